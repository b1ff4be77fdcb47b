//! Fiber stacks and the per-worker stack pool.
//!
//! A [`Stack`] is a slot of a *chunk*: one anonymous private mapping holding several stacks
//! side by side. In each slot the lowest page is the guard and the usable stack grows down
//! from the highest address. Pages are committed lazily by the kernel on first touch
//! (`MAP_NORESERVE`), so a fiber that never goes deep costs one or two resident pages whatever
//! its configured size.
//!
//! The guard page is made with `madvise(MADV_GUARD_INSTALL)` where the kernel has it (Linux
//! 6.13+): the page stays inside the same VMA, so guards do not count against
//! `vm.max_map_count` (65,530 by default). Older kernels fall back to `mprotect(PROT_NONE)`,
//! which splits the mapping: two VMAs per stack, so at most about 32,000 live fibers there
//! unless the limit is raised.
//!
//! # Invariants
//!
//! - **A chunk is unmapped whole or not at all.** Every stack holds a reference to its chunk;
//!   the chunk is unmapped (one `munmap` of the whole mapping) when the last stack carved from
//!   it is dropped. Nothing ever unmaps part of a chunk, so no pattern of fiber exits can split
//!   mappings: the number of mappings is at most one per chunk.
//! - **Chunks are mapped only on a miss.** A pool maps a new chunk only when it has no free
//!   stack of the size asked for, so at that moment every stack it made is in use: a pool
//!   holds at most `ceil(peak stacks in use / CHUNK_SLOTS) + 1` chunks of a size, whatever
//!   the order in which fibers exit.
//! - **Free stacks are kept, their pages are not.** A released stack goes back to the pool
//!   (no system call). Beyond the `keep_warm` most recently released ones, their pages are
//!   given back with `MADV_DONTNEED` in batches (`process_madvise`, up to 1,024 stacks per
//!   call) when the worker goes idle, and while it is busy, once per
//!   `max(max_cached, keep_warm) + RELEASE_BATCH` releases, for the free stacks that no fiber
//!   took during that window (the bottom of the LIFO below its low-water mark). A free stack
//!   that keeps its pages was released in the current window or the one before (or is among
//!   the `keep_warm` most recent), so the resident memory of free stacks stays below
//!   `keep_warm + 2 x (max(max_cached, keep_warm) + RELEASE_BATCH + 1)` stacks' worth, and a
//!   burst spawned again and again keeps its pages warm, whatever its size.
//! - **Address space is returned by whole chunks.** When the worker goes idle with more than
//!   `max_cached` free stacks, chunks whose every stack is free in this pool are unmapped.
//! - **Single owner.** A `StackPool` (module `stack_pool`) belongs to one worker and is used only from its thread;
//!   a [`Stack`] may move between threads (a fiber spawned on one worker may be stolen by
//!   another before it starts) and is then released into that worker's pool.
//!
//! On a miss the pool maps a whole chunk (`CHUNK_SLOTS` stacks, or fewer for stacks larger
//! than `CHUNK_BYTES / CHUNK_SLOTS`), installs every guard with one `process_madvise` and
//! pre-faults the top page (the one a fiber touches first) of the next `batch` stacks to be
//! handed out, doubling `batch` on each consecutive miss: a burst of fiber starts pays a few
//! system calls per chunk (`mmap`, then `pidfd_open` and the two `process_madvise` through
//! that one pidfd) instead of an `mmap`, a `madvise` and a page-fault trap per stack, and a
//! lone start (`batch` 1) pre-faults nothing: its one page faults in on first use. The kernel's work per stack stays: a fresh stack
//! costs one zeroed page, its guard marker and an eighth of a page table (256 KiB stacks): the
//! largest part of a fresh fiber's cost (`docs/perf/stacks.md`, "What a fresh stack costs").

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::valgrind;

/// `madvise` advice installing lightweight guard regions (Linux 6.13+, not in libc yet).
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Smallest stack accepted, guard page included: the initial frame, the fiber entry with its
/// panic catching, and a little room for user code.
pub const MIN_STACK_SIZE: usize = 16 * 1024;
/// Largest stack accepted (address space, committed lazily).
pub const MAX_STACK_SIZE: usize = 1 << 30;

/// Whether `MADV_GUARD_INSTALL` was refused once: then every later stack uses `mprotect`.
static GUARD_FALLBACK: AtomicBool = AtomicBool::new(false);

/// The system page size, read once.
pub(crate) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let size = usize::try_from(size).ok().filter(|s| s.is_power_of_two()).unwrap_or(4096);
            PAGE.store(size, Ordering::Relaxed);
            size
        }
        size => size,
    }
}

/// Rounds a requested stack size (guard page included) up to whole pages and checks bounds.
#[inline]
pub(crate) fn normalize_size(requested: usize) -> io::Result<usize> {
    if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&requested) {
        return Err(out_of_range(requested));
    }
    // `page_size` is a power of two: round up with a mask, not a division.
    let mask = page_size() - 1;
    Ok((requested + mask) & !mask)
}

/// The error of [`normalize_size`], out of its inlined path.
#[cold]
fn out_of_range(requested: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("fiber stack size {requested} is out of range ({MIN_STACK_SIZE}..={MAX_STACK_SIZE} bytes)"),
    )
}

/// One mapping holding the stacks of one chunk; unmapped whole when dropped, that is when the
/// last stack carved from it is dropped.
#[derive(Debug)]
pub(crate) struct Chunk {
    base: NonNull<u8>,
    bytes: usize,
}

// SAFETY: a Chunk is only the ownership of a mapping (an address range); it is touched only in
// `drop`, by whichever thread drops the last reference.
unsafe impl Send for Chunk {}
// SAFETY: as above: no method reads or writes through the pointer.
unsafe impl Sync for Chunk {}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: we own the mapping [base, base + bytes) and every stack carved from it has
        // been dropped (each held a reference to this chunk), so nothing runs on it any more.
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.bytes) };
        if rc != 0 {
            // Unmapping a whole mapping fails only when the kernel would have to split a VMA
            // merged with a neighbour and the process is at vm.max_map_count: the address
            // space stays reserved (leaked), nothing is corrupted.
            crate::report::error(format_args!(
                "spindle: could not unmap a {} byte chunk of fiber stacks: {}",
                self.bytes,
                io::Error::last_os_error()
            ));
        }
    }
}

/// One fiber stack: `[base, base + page)` is the guard, `[base + page, base + len)` usable.
#[derive(Debug)]
pub(crate) struct Stack {
    base: NonNull<u8>,
    len: usize,
    /// Stack id given by valgrind ([`valgrind::NOT_REGISTERED`] when not running under it).
    valgrind_id: usize,
    /// Whether pages may be resident (cleared when its pages are released). A `Cell`, which
    /// hides the `bool`'s niche: `Option<Stack>` then takes the base pointer's, and its moves
    /// (pool to header to pool, twice per fiber) copy five words instead of four and a tag byte
    /// with the padding after it, byte-wise.
    pub(super) dirty: std::cell::Cell<bool>,
    /// The mapping this stack is a slot of.
    pub(super) chunk: Arc<Chunk>,
}

// SAFETY: a Stack exclusively owns its slot of the chunk's mapping; moving that ownership to
// another thread is fine (the memory is not tied to any thread).
unsafe impl Send for Stack {}

impl Stack {
    /// Maps a chunk holding just one stack of `len` bytes (a multiple of the page size, guard
    /// page included). Its top page is not pre-faulted: for a lone page, the fiber's first
    /// write costs one trap, as a `madvise` would cost one system call.
    pub(crate) fn new(len: usize) -> io::Result<Stack> {
        let mut stacks = Stack::map_chunk(len, 1, 1)?;
        Ok(stacks.pop().expect("map_chunk returns the stacks it was asked for"))
    }

    /// Maps a chunk of `count` stacks of `len` bytes each with one `mmap`, installs every
    /// guard page (one `process_madvise` where the kernel allows) and pre-faults the top page
    /// of the last `prefault` stacks. Returned lowest address first.
    pub(super) fn map_chunk(len: usize, count: usize, prefault: usize) -> io::Result<Vec<Stack>> {
        let page = page_size();
        debug_assert!(len.is_multiple_of(page) && len > page && count > 0);
        let total = len.checked_mul(count).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing has no
        // preconditions; the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).expect("mmap returned null");
        // From here the chunk owns the mapping, so an error below unmaps it.
        let chunk = Arc::new(Chunk { base, bytes: total });
        let mut stacks: Vec<Stack> = (0..count)
            .map(|i| Stack {
                base: NonNull::new(base.as_ptr().wrapping_add(i * len)).expect("inside the mapping"),
                len,
                valgrind_id: valgrind::NOT_REGISTERED,
                dirty: std::cell::Cell::new(false),
                chunk: chunk.clone(),
            })
            .collect();
        // One pidfd serves both batched calls: opening one costs three system calls
        // (`getpid`, `pidfd_open`, `close`), as many as the two `process_madvise`.
        let pidfd = if count > 1 && !BATCH_FALLBACK.load(Ordering::Relaxed) { own_pidfd() } else { None };
        install_guards(&stacks, page, pidfd.as_ref())?;
        prefault_tops(&mut stacks[count - prefault.min(count)..], page, pidfd.as_ref());
        for stack in &mut stacks {
            stack.valgrind_id = valgrind::stack_register(stack.bottom() as usize, stack.top() as usize);
        }
        Ok(stacks)
    }

    /// Highest address of the usable stack (exclusive); 16-byte aligned.
    pub(crate) fn top(&self) -> *mut u8 {
        self.base.as_ptr().wrapping_add(self.len)
    }

    /// Lowest usable address (just above the guard page).
    pub(crate) fn bottom(&self) -> *mut u8 {
        self.base.as_ptr().wrapping_add(page_size())
    }

    /// The guard page's address range.
    pub(crate) fn guard(&self) -> (usize, usize) {
        let base = self.base.as_ptr() as usize;
        (base, base + page_size())
    }

    /// Total size, guard page included (the size the user asked for, rounded to pages).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The usable range, for `madvise`.
    fn usable(&self) -> libc::iovec {
        libc::iovec { iov_base: self.bottom().cast(), iov_len: self.len - page_size() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        valgrind::stack_deregister(self.valgrind_id);
        // The slot's address space goes back with the whole chunk (`Chunk::drop`).
    }
}

/// Gives the usable pages of `stacks` back to the kernel (`MADV_DONTNEED`); their mappings
/// and guards stay. One `process_madvise` per 1,024 stacks where the kernel allows, else one
/// `madvise` each. Nothing may run on these stacks (they are free).
pub(super) fn release_pages(stacks: &mut [&mut Stack]) {
    if stacks.is_empty() {
        return;
    }
    let ranges: Vec<libc::iovec> = stacks.iter().map(|s| s.usable()).collect();
    let mut done = 0;
    if !BATCH_FALLBACK.load(Ordering::Relaxed) {
        if let Some(pidfd) = own_pidfd() {
            done = madvise_batch(&pidfd, &ranges, libc::MADV_DONTNEED);
        }
    }
    for range in &ranges[done..] {
        // SAFETY: the range is the usable part of a free stack of our own mapping. DONTNEED
        // keeps guard markers installed with MADV_GUARD_INSTALL and does not touch the
        // PROT_NONE fallback guard, which lies outside the range.
        let rc = unsafe { libc::madvise(range.iov_base, range.iov_len, libc::MADV_DONTNEED) };
        debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) failed on a free fiber stack");
    }
    stacks.iter().for_each(|s| s.dirty.set(false));
}

/// Pre-faults the top page of each stack (the page a fiber touches first), best effort: one
/// `process_madvise(MADV_POPULATE_WRITE)` through `pidfd` for all; a page not populated faults
/// in on first use.
fn prefault_tops(stacks: &mut [Stack], page: usize, pidfd: Option<&OwnedFd>) {
    if stacks.len() < 2 || BATCH_FALLBACK.load(Ordering::Relaxed) {
        return; // a lone stack's top page faults in on first use, one trap either way
    }
    let Some(pidfd) = pidfd else { return };
    let tops: Vec<libc::iovec> = stacks
        .iter()
        .map(|s| libc::iovec { iov_base: s.top().wrapping_sub(page).cast(), iov_len: page })
        .collect();
    madvise_batch(pidfd, &tops, MADV_POPULATE_WRITE);
    // Resident now: a trim must see them.
    stacks.iter().for_each(|s| s.dirty.set(true));
}

/// Whether batched guard installation was refused once (then each stack gets its own call).
static BATCH_FALLBACK: AtomicBool = AtomicBool::new(false);

/// `madvise` advice populating (pre-faulting) pages writable, Linux 5.14+.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Makes the lowest page of each stack a guard page: with `process_madvise` through `pidfd`,
/// one call for the whole chunk instead of one `madvise` per stack. Without a pidfd, or where
/// the kernel refuses batched advice, guards are installed one call per stack.
fn install_guards(stacks: &[Stack], page: usize, pidfd: Option<&OwnedFd>) -> io::Result<()> {
    if stacks.len() > 1 && !GUARD_FALLBACK.load(Ordering::Relaxed) && !BATCH_FALLBACK.load(Ordering::Relaxed)
    {
        if let Some(pidfd) = pidfd {
            let guards: Vec<libc::iovec> = stacks
                .iter()
                .map(|s| libc::iovec { iov_base: s.base.as_ptr().cast(), iov_len: page })
                .collect();
            let done = madvise_batch(pidfd, &guards, MADV_GUARD_INSTALL);
            if done == guards.len() {
                return Ok(());
            }
            BATCH_FALLBACK.store(true, Ordering::Relaxed);
            return stacks[done..].iter().try_for_each(|s| install_guard(s.base.as_ptr(), page));
        }
        BATCH_FALLBACK.store(true, Ordering::Relaxed);
    }
    stacks.iter().try_for_each(|s| install_guard(s.base.as_ptr(), page))
}

/// A pidfd of our own process, opened per chunk mapped (one for its two batched calls) and per
/// batch of pages given back: a descriptor kept across calls could be closed by the program and
/// its number reused by a pidfd of another process.
fn own_pidfd() -> Option<OwnedFd> {
    // SAFETY: getpid and pidfd_open have no memory preconditions; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: pidfd_open just returned this descriptor, which nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Applies `advice` to each range with `process_madvise` (1,024 ranges per call, the kernel's
/// IOV_MAX). Every range has the same length. Returns how many ranges were advised before the
/// first refusal (a range advised in part counts as not advised: every advice used here may be
/// applied twice).
fn madvise_batch(pidfd: &OwnedFd, ranges: &[libc::iovec], advice: libc::c_int) -> usize {
    use std::os::fd::AsRawFd;
    let Some(range_len) = ranges.first().map(|r| r.iov_len) else { return 0 };
    debug_assert!(ranges.iter().all(|r| r.iov_len == range_len));
    let mut done = 0;
    while done < ranges.len() {
        let chunk = &ranges[done..(done + 1024).min(ranges.len())];
        // SAFETY: every iovec names a range of a stack of our own mapping that nothing runs
        // on, and the kernel only reads the iovec array, which outlives the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd.as_raw_fd(),
                chunk.as_ptr(),
                chunk.len(),
                advice,
                0,
            )
        };
        // The call returns the bytes advised; it may stop early, and we go on from there.
        match usize::try_from(rc) {
            Ok(bytes) if bytes >= range_len => done += bytes / range_len,
            _ => break,
        }
    }
    done
}

/// Makes `[addr, addr + page)` a guard page.
fn install_guard(addr: *mut u8, page: usize) -> io::Result<()> {
    if !GUARD_FALLBACK.load(Ordering::Relaxed) {
        // SAFETY: `addr` is the start of a page of our own fresh mapping.
        let rc = unsafe { libc::madvise(addr.cast(), page, MADV_GUARD_INSTALL) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINVAL) {
            return Err(err);
        }
        GUARD_FALLBACK.store(true, Ordering::Relaxed);
    }
    // SAFETY: as above; PROT_NONE on a page of our own mapping.
    let rc = unsafe { libc::mprotect(addr.cast(), page, libc::PROT_NONE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_rounded_and_bounded() {
        let page = page_size();
        assert_eq!(normalize_size(MIN_STACK_SIZE).unwrap(), MIN_STACK_SIZE);
        assert_eq!(normalize_size(MIN_STACK_SIZE + 1).unwrap(), MIN_STACK_SIZE + page);
        assert_eq!(normalize_size(1).unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert!(normalize_size(MAX_STACK_SIZE + 1).is_err());
    }

    /// Whether the page holding `addr` is resident (`mincore`).
    fn resident(addr: *mut u8) -> bool {
        let page = page_size();
        let start = (addr as usize) & !(page - 1);
        let mut vec = 0u8;
        // SAFETY: `start` is a page-aligned address inside a mapping of ours, and mincore writes
        // one byte per page of the one-page range into `vec`.
        let rc = unsafe { libc::mincore(start as *mut libc::c_void, page, &mut vec) };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        vec & 1 == 1
    }

    #[test]
    fn a_chunk_prefaults_the_top_pages_asked_for_and_nothing_else() {
        let page = page_size();
        let stacks = Stack::map_chunk(64 * 1024, 8, 3).unwrap();
        if BATCH_FALLBACK.load(Ordering::Relaxed) {
            return; // no batched advice on this kernel: nothing is pre-faulted
        }
        let top_page = |s: &Stack| s.top().wrapping_sub(page);
        for (i, stack) in stacks.iter().enumerate() {
            // The last three (the next to be handed out from the pool's LIFO) are ready.
            assert_eq!(resident(top_page(stack)), i >= 5, "top page of stack {i}");
            assert_eq!(stack.dirty.get(), i >= 5, "a pre-faulted stack counts as dirty for trims");
            // Committed lazily: below the top page nothing is resident.
            assert!(!resident(top_page(stack).wrapping_sub(page)), "second page of stack {i}");
            assert!(!resident(stack.bottom()), "lowest usable page of stack {i}");
        }
    }

    #[test]
    fn stack_is_writable_top_to_bottom() {
        let stack = Stack::new(64 * 1024).unwrap();
        assert_eq!(stack.top() as usize % 16, 0);
        let (lo, hi) = stack.guard();
        assert_eq!(hi, stack.bottom() as usize);
        assert_eq!(hi - lo, page_size());
        // Every usable byte can be written and read back.
        let usable = stack.top() as usize - stack.bottom() as usize;
        // SAFETY: [bottom, top) is the usable, writable part of a stack we own.
        let bytes = unsafe { std::slice::from_raw_parts_mut(stack.bottom(), usable) };
        bytes.fill(0xA5);
        assert!(bytes.iter().all(|&b| b == 0xA5));
    }
}
