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
//!   call) once `RELEASE_BATCH` of them have gathered, and when the worker goes idle. So the
//!   resident memory of free stacks stays below `keep_warm + RELEASE_BATCH` stacks' worth.
//! - **Address space is returned by whole chunks.** When the worker goes idle with more than
//!   `max_cached` free stacks, chunks whose every stack is free in this pool are unmapped.
//! - **Single owner.** A [`StackPool`] belongs to one worker and is used only from its thread;
//!   a [`Stack`] may move between threads (a fiber spawned on one worker may be stolen by
//!   another before it starts) and is then released into that worker's pool.
//!
//! On a miss the pool maps a whole chunk (`CHUNK_SLOTS` stacks, or fewer for stacks larger
//! than `CHUNK_BYTES / CHUNK_SLOTS`), installs every guard with one `process_madvise` and
//! pre-faults the top page (the one a fiber touches first) of the next `batch` stacks to be
//! handed out, doubling `batch` on each consecutive miss: a burst of fiber starts pays a few
//! system calls per chunk instead of an `mmap`, a `madvise` and a page-fault trap per stack,
//! and a lone start pre-faults only its own page.

use std::io;
use std::os::fd::FromRawFd;
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
pub(crate) fn normalize_size(requested: usize) -> io::Result<usize> {
    if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&requested) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "fiber stack size {requested} is out of range ({MIN_STACK_SIZE}..={MAX_STACK_SIZE} bytes)"
            ),
        ));
    }
    let page = page_size();
    Ok(requested.div_ceil(page) * page)
}

/// One mapping holding the stacks of one chunk; unmapped whole when dropped, that is when the
/// last stack carved from it is dropped.
#[derive(Debug)]
struct Chunk {
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
    /// Whether pages may be resident (cleared when its pages are released).
    dirty: bool,
    /// The mapping this stack is a slot of.
    chunk: Arc<Chunk>,
}

// SAFETY: a Stack exclusively owns its slot of the chunk's mapping; moving that ownership to
// another thread is fine (the memory is not tied to any thread).
unsafe impl Send for Stack {}

impl Stack {
    /// Maps a chunk holding just one stack of `len` bytes (a multiple of the page size, guard
    /// page included), its top page pre-faulted.
    pub(crate) fn new(len: usize) -> io::Result<Stack> {
        let mut stacks = Stack::map_chunk(len, 1, 1)?;
        Ok(stacks.pop().expect("map_chunk returns the stacks it was asked for"))
    }

    /// Maps a chunk of `count` stacks of `len` bytes each with one `mmap`, installs every
    /// guard page (one `process_madvise` where the kernel allows) and pre-faults the top page
    /// of the last `prefault` stacks. Returned lowest address first.
    fn map_chunk(len: usize, count: usize, prefault: usize) -> io::Result<Vec<Stack>> {
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
                dirty: false,
                chunk: chunk.clone(),
            })
            .collect();
        install_guards(&stacks, page)?;
        prefault_tops(&mut stacks[count - prefault.min(count)..], page);
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
fn release_pages(stacks: &mut [&mut Stack]) {
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
    stacks.iter_mut().for_each(|s| s.dirty = false);
}

/// Pre-faults the top page of each stack (the page a fiber touches first), best effort: one
/// `process_madvise(MADV_POPULATE_WRITE)` for all; a page not populated faults in on first use.
fn prefault_tops(stacks: &mut [Stack], page: usize) {
    if stacks.len() < 2 || BATCH_FALLBACK.load(Ordering::Relaxed) {
        return; // a lone stack's top page faults in on first use, one trap either way
    }
    let Some(pidfd) = own_pidfd() else { return };
    let tops: Vec<libc::iovec> = stacks
        .iter()
        .map(|s| libc::iovec { iov_base: s.top().wrapping_sub(page).cast(), iov_len: page })
        .collect();
    madvise_batch(&pidfd, &tops, MADV_POPULATE_WRITE);
    // Resident now: a trim must see them.
    stacks.iter_mut().for_each(|s| s.dirty = true);
}

/// Whether batched guard installation was refused once (then each stack gets its own call).
static BATCH_FALLBACK: AtomicBool = AtomicBool::new(false);

/// `madvise` advice populating (pre-faulting) pages writable, Linux 5.14+.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Makes the lowest page of each stack a guard page: with `process_madvise`, one call for the
/// whole chunk instead of one `madvise` per stack. Where the kernel refuses batched advice,
/// guards are installed one call per stack.
fn install_guards(stacks: &[Stack], page: usize) -> io::Result<()> {
    if stacks.len() > 1 && !GUARD_FALLBACK.load(Ordering::Relaxed) && !BATCH_FALLBACK.load(Ordering::Relaxed)
    {
        if let Some(pidfd) = own_pidfd() {
            let guards: Vec<libc::iovec> = stacks
                .iter()
                .map(|s| libc::iovec { iov_base: s.base.as_ptr().cast(), iov_len: page })
                .collect();
            let done = madvise_batch(&pidfd, &guards, MADV_GUARD_INSTALL);
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

/// A pidfd of our own process, opened per batch: a descriptor kept across calls could be
/// closed by the program and its number reused by a pidfd of another process.
fn own_pidfd() -> Option<std::os::fd::OwnedFd> {
    // SAFETY: getpid and pidfd_open have no memory preconditions; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: pidfd_open just returned this descriptor, which nothing else owns.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Applies `advice` to each range with `process_madvise` (1,024 ranges per call, the kernel's
/// IOV_MAX). Every range has the same length. Returns how many ranges were advised before the
/// first refusal (a range advised in part counts as not advised: every advice used here may be
/// applied twice).
fn madvise_batch(pidfd: &std::os::fd::OwnedFd, ranges: &[libc::iovec], advice: libc::c_int) -> usize {
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

/// A LIFO cache of free stacks of one worker, and the chunks they are carved from.
#[derive(Debug)]
pub(crate) struct StackPool {
    /// Free stacks by size; most recently released last. Few sizes are in use at once, so a
    /// small vector beats a map.
    free: Vec<(usize, Vec<Stack>)>,
    cached: usize,
    /// Above this many free stacks, an idle worker unmaps chunks that are entirely free.
    max_cached: usize,
    /// How many of the most recently released stacks of each size keep their pages.
    keep_warm: usize,
    /// Stacks released since the last idle trim (a trim has nothing to do when this is zero).
    released_since_trim: usize,
    /// Stacks released since pages were last given back (see `RELEASE_BATCH`).
    released_since_release: usize,
    /// How many top pages the next miss pre-faults: doubles on each miss up to
    /// [`CHUNK_SLOTS`], back to one when a stack is released, so a burst of fiber starts
    /// finds its pages ready and a lone start pre-faults just its own.
    batch: usize,
}

/// Stacks per chunk (fewer for large stacks, see [`CHUNK_BYTES`]). Untouched stacks cost
/// address space, not memory.
const CHUNK_SLOTS: usize = 64;

/// Most address space in one chunk: large stacks are mapped fewer at a time.
const CHUNK_BYTES: usize = 16 << 20;

/// Released stacks beyond `keep_warm` that may keep their pages before the pool gives them
/// back in one batch, without waiting for the worker to go idle.
const RELEASE_BATCH: usize = 1024;

impl StackPool {
    pub(crate) fn new(max_cached: usize, keep_warm: usize) -> StackPool {
        StackPool {
            free: Vec::new(),
            cached: 0,
            max_cached,
            keep_warm,
            released_since_trim: 0,
            released_since_release: 0,
            batch: 1,
        }
    }

    /// A stack of `len` bytes: the warmest free one, or one of a newly mapped chunk.
    pub(crate) fn get(&mut self, len: usize) -> io::Result<Stack> {
        if let Some((_, list)) = self.free.iter_mut().find(|(size, _)| *size == len) {
            if let Some(stack) = list.pop() {
                self.cached -= 1;
                return Ok(stack);
            }
        }
        // A miss: every stack of this size is in use. Map a chunk, hand out one stack and
        // keep the others (highest address on top of the LIFO, next to the one handed out).
        let count = (CHUNK_BYTES / len).clamp(1, CHUNK_SLOTS);
        let prefault = self.batch.min(count);
        self.batch = (self.batch * 2).min(CHUNK_SLOTS);
        let mut stacks = match Stack::map_chunk(len, count, prefault) {
            Ok(stacks) => stacks,
            // Strict overcommit accounting may refuse a large chunk that a single stack fits.
            Err(_) if count > 1 => Stack::map_chunk(len, 1, 1)?,
            Err(e) => return Err(e),
        };
        let stack = stacks.pop().expect("map_chunk returns the stacks it was asked for");
        if !stacks.is_empty() {
            self.cached += stacks.len();
            match self.free.iter_mut().find(|(size, _)| *size == len) {
                Some((_, list)) => list.extend(stacks),
                None => self.free.push((len, stacks)),
            }
        }
        Ok(stack)
    }

    /// Returns a free stack to the pool: no system call, except that every `RELEASE_BATCH`
    /// releases the pages of the stacks beyond `keep_warm` are given back in one batch.
    pub(crate) fn put(&mut self, mut stack: Stack) {
        stack.dirty = true;
        self.batch = 1;
        self.cached += 1;
        self.released_since_trim += 1;
        self.released_since_release += 1;
        let len = stack.len();
        match self.free.iter_mut().find(|(size, _)| *size == len) {
            Some((_, list)) => list.push(stack),
            None => self.free.push((len, vec![stack])),
        }
        if self.released_since_release > self.keep_warm + RELEASE_BATCH {
            self.release_cold_pages();
        }
    }

    /// Whether stacks were released since the last trim.
    pub(crate) fn needs_trim(&self) -> bool {
        self.released_since_trim > 0
    }

    /// For an idle worker: unmaps chunks that are entirely free while more than `max_cached`
    /// stacks are free, then gives the pages of all but the `keep_warm` most recently released
    /// stacks of each size back to the kernel. Cheap when nothing was released since.
    pub(crate) fn trim(&mut self) {
        if self.released_since_trim == 0 {
            return;
        }
        self.released_since_trim = 0;
        if self.cached > self.max_cached {
            self.unmap_free_chunks();
        }
        self.release_cold_pages();
    }

    /// Gives back the pages of the free stacks beyond the `keep_warm` most recent of each size
    /// (batched; the mappings stay).
    fn release_cold_pages(&mut self) {
        self.released_since_release = 0;
        let mut cold: Vec<&mut Stack> = Vec::new();
        for (_, list) in &mut self.free {
            let n = list.len().saturating_sub(self.keep_warm);
            // Walk down from the most recent cold stack: below the first clean one, every
            // stack was released before (the LIFO keeps release order).
            cold.extend(list[..n].iter_mut().rev().take_while(|s| s.dirty));
        }
        release_pages(&mut cold);
    }

    /// Unmaps chunks all of whose stacks are free in this pool, coldest first, until at most
    /// `max_cached` stacks are free. A chunk with a stack in use (or free in another worker's
    /// pool) stays whole.
    fn unmap_free_chunks(&mut self) {
        use std::collections::HashMap;
        for (_, list) in &mut self.free {
            // Stacks of each chunk in this list; a chunk is entirely free here when that count
            // equals its reference count (one per stack in existence).
            let mut here: HashMap<*const Chunk, usize> = HashMap::new();
            for stack in list.iter() {
                *here.entry(Arc::as_ptr(&stack.chunk)).or_default() += 1;
            }
            let mut doomed: HashMap<*const Chunk, ()> = HashMap::new();
            let mut excess = self.cached.saturating_sub(self.max_cached);
            for stack in list.iter() {
                if excess == 0 {
                    break;
                }
                let key = Arc::as_ptr(&stack.chunk);
                let count = here[&key];
                if count == Arc::strong_count(&stack.chunk) && !doomed.contains_key(&key) {
                    doomed.insert(key, ());
                    excess = excess.saturating_sub(count);
                }
            }
            if !doomed.is_empty() {
                let before = list.len();
                list.retain(|s| !doomed.contains_key(&Arc::as_ptr(&s.chunk)));
                self.cached -= before - list.len();
            }
        }
    }

    /// Number of cached stacks.
    #[cfg(test)]
    pub(crate) fn cached(&self) -> usize {
        self.cached
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

    #[test]
    fn pool_is_lifo() {
        let mut pool = StackPool::new(2, 1);
        let a = pool.get(64 * 1024).unwrap();
        let b = pool.get(64 * 1024).unwrap();
        let (a_top, b_top) = (a.top(), b.top());
        let spares = pool.cached();
        pool.put(a);
        pool.put(b);
        assert_eq!(pool.cached(), spares + 2, "a release keeps the stack, whatever the cap");
        assert_eq!(pool.get(64 * 1024).unwrap().top(), b_top, "most recent first");
        assert_eq!(pool.get(64 * 1024).unwrap().top(), a_top);
    }

    #[test]
    fn a_chunk_is_unmapped_whole_and_only_when_all_its_stacks_are_free() {
        let len = 64 * 1024;
        let per_chunk = (CHUNK_BYTES / len).clamp(1, CHUNK_SLOTS);
        let mut pool = StackPool::new(0, 0);
        let held = pool.get(len).unwrap();
        // Every stack of the chunk but `held` is now free in the pool.
        assert_eq!(pool.cached(), per_chunk - 1);
        pool.trim();
        assert_eq!(pool.cached(), per_chunk - 1, "a chunk with a stack in use stays whole");
        // SAFETY: `held` is mapped; its top word is writable.
        unsafe { held.top().wrapping_sub(8).write(1) };
        pool.put(held);
        pool.trim();
        assert_eq!(pool.cached(), 0, "a chunk whose stacks are all free goes when over the cap");
    }

    #[test]
    fn a_burst_of_misses_maps_chunks_of_distinct_usable_stacks() {
        let len = 32 * 1024;
        let mut pool = StackPool::new(1000, 0);
        let stacks: Vec<Stack> = (0..100).map(|_| pool.get(len).unwrap()).collect();
        // Chunks were mapped (64 stacks per miss): the pool holds the spares.
        assert!(pool.cached() > 0, "batched mapping leaves spare stacks in the pool");
        let mut ranges: Vec<(usize, usize)> =
            stacks.iter().map(|s| (s.guard().0, s.top() as usize)).collect();
        ranges.sort();
        assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "stacks never overlap");
        for stack in &stacks {
            assert_eq!(stack.len(), len);
            let usable = stack.top() as usize - stack.bottom() as usize;
            // SAFETY: [bottom, top) is the usable, writable part of a stack we own.
            let bytes = unsafe { std::slice::from_raw_parts_mut(stack.bottom(), usable) };
            bytes.fill(0x5A);
            assert!(bytes.iter().all(|&b| b == 0x5A));
        }
        // Dropping stacks never unmaps part of a chunk: the others stay usable.
        let mut stacks = stacks;
        let last = stacks.pop().unwrap();
        drop(stacks);
        // SAFETY: `last` is still mapped; its top word is writable.
        unsafe { last.top().wrapping_sub(8).write(1) };
        for _ in 0..pool.cached() {
            let spare = pool.get(len).unwrap();
            // SAFETY: as above, for a spare stack that was never handed out before.
            unsafe { spare.top().wrapping_sub(8).write(2) };
        }
    }

    #[test]
    fn trimmed_stacks_read_back_zero_and_stay_usable() {
        let mut pool = StackPool::new(8, 0);
        let stack = pool.get(32 * 1024).unwrap();
        let word = stack.top().wrapping_sub(64);
        // SAFETY: `word` is inside the usable part of a stack we own.
        unsafe { word.write(7) };
        pool.put(stack);
        pool.trim();
        let stack = pool.get(32 * 1024).unwrap();
        assert!(!stack.dirty);
        // SAFETY: as above; after MADV_DONTNEED the page reads back as zero.
        assert_eq!(unsafe { word.read() }, 0);
    }
}
