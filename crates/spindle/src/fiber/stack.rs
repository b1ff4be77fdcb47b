//! Fiber stacks and the per-worker stack pool.
//!
//! A [`Stack`] is one anonymous private mapping: a guard page at its lowest address, then the
//! usable stack, which grows down from the highest address. Pages are committed lazily by
//! the kernel on first touch (`MAP_NORESERVE`), so a fiber that never goes deep costs one or
//! two resident pages whatever its configured size.
//!
//! The guard page is made with `madvise(MADV_GUARD_INSTALL)` where the kernel has it (Linux
//! 6.13+): the page stays inside the same VMA, so stacks do not count twice against
//! `vm.max_map_count` (65,530 by default) and adjacent stacks merge into one VMA. Older
//! kernels fall back to `mprotect(PROT_NONE)`, which splits the mapping: two VMAs per stack,
//! so at most about 32,000 live fibers there unless the limit is raised.
//!
//! On a miss the pool maps stacks in batches (one `mmap` for several stacks, their guards
//! installed and their top pages pre-faulted with one `process_madvise` each), doubling the
//! batch on each consecutive miss: a burst of fiber starts pays a few system calls per batch
//! instead of an `mmap`, a `madvise` and a page-fault trap per stack.
//!
//! The [`StackPool`] belongs to one worker and is used only from that worker's thread, so it
//! needs no synchronisation. It hands out the most recently released stack first (its pages
//! are still resident and warm in the cache), keeps at most `max_cached` stacks, and on
//! [`StackPool::trim`] returns the pages of all but the `keep_warm` most recent stacks to the
//! kernel with `madvise(MADV_DONTNEED)`, keeping their address space (and guard) for reuse.

use std::io;
use std::os::fd::FromRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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

/// One fiber stack: `[base, base + page)` is the guard, `[base + page, base + len)` usable.
#[derive(Debug)]
pub(crate) struct Stack {
    base: NonNull<u8>,
    len: usize,
    /// Stack id given by valgrind ([`valgrind::NOT_REGISTERED`] when not running under it).
    valgrind_id: usize,
    /// Whether pages may be resident (cleared when trimmed).
    dirty: bool,
}

// SAFETY: a Stack exclusively owns its mapping; moving that ownership to another thread is
// fine (the memory is not tied to any thread).
unsafe impl Send for Stack {}

impl Stack {
    /// Maps a new stack of `len` bytes (a multiple of the page size, guard page included).
    pub(crate) fn new(len: usize) -> io::Result<Stack> {
        let mut stacks = Stack::map_batch(len, 1)?;
        Ok(stacks.pop().expect("map_batch returns the stacks it was asked for"))
    }

    /// Maps `count` stacks of `len` bytes each with one `mmap` (and, where the kernel allows,
    /// one `process_madvise` for all their guard pages). Each stack owns its own part of the
    /// mapping and unmaps just that part when dropped (`munmap` of part of a mapping is
    /// allowed). Returned lowest address first.
    fn map_batch(len: usize, count: usize) -> io::Result<Vec<Stack>> {
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
        let base = ptr.cast::<u8>();
        // From here each part is owned by a Stack, so an error below unmaps everything.
        let mut stacks: Vec<Stack> = (0..count)
            .map(|i| Stack {
                base: NonNull::new(base.wrapping_add(i * len)).expect("mmap returned null"),
                len,
                valgrind_id: valgrind::NOT_REGISTERED,
                dirty: false,
            })
            .collect();
        install_guards(&stacks, page)?;
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

    /// Returns the usable pages to the kernel; the mapping and the guard stay.
    fn release_pages(&mut self) {
        // SAFETY: [bottom, top) lies inside our own mapping and nothing runs on this stack (it
        // is in the pool). MADV_DONTNEED keeps guard markers installed with MADV_GUARD_INSTALL
        // and does not touch the PROT_NONE fallback guard, which lies outside the range.
        let rc = unsafe { libc::madvise(self.bottom().cast(), self.len - page_size(), libc::MADV_DONTNEED) };
        debug_assert_eq!(rc, 0, "madvise(MADV_DONTNEED) failed on a fiber stack");
        self.dirty = false;
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        valgrind::stack_deregister(self.valgrind_id);
        // SAFETY: we own the mapping [base, base + len) and nothing runs on it any more.
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        debug_assert_eq!(rc, 0, "munmap of a fiber stack failed");
    }
}

/// Whether batched guard installation was refused once (then each stack gets its own call).
static BATCH_FALLBACK: AtomicBool = AtomicBool::new(false);

/// `madvise` advice populating (pre-faulting) pages writable, Linux 5.14+.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Makes the lowest page of each stack a guard page and pre-faults each stack's top page
/// (the one a fiber touches first): with `process_madvise`, two calls for the whole batch
/// instead of a `madvise` and a page-fault trap per stack. Where the kernel refuses batched
/// advice, guards are installed one call per stack and top pages fault in on first use.
fn install_guards(stacks: &[Stack], page: usize) -> io::Result<()> {
    if stacks.len() > 1 && !GUARD_FALLBACK.load(Ordering::Relaxed) && !BATCH_FALLBACK.load(Ordering::Relaxed)
    {
        if let Some(pidfd) = own_pidfd() {
            let guards: Vec<libc::iovec> = stacks
                .iter()
                .map(|s| libc::iovec { iov_base: s.base.as_ptr().cast(), iov_len: page })
                .collect();
            let done = madvise_batch(&pidfd, &guards, MADV_GUARD_INSTALL, page);
            if done == guards.len() {
                let tops: Vec<libc::iovec> = stacks
                    .iter()
                    .map(|s| libc::iovec { iov_base: s.top().wrapping_sub(page).cast(), iov_len: page })
                    .collect();
                // Best effort: a page not populated here faults in on first use.
                madvise_batch(&pidfd, &tops, MADV_POPULATE_WRITE, page);
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

/// Applies `advice` to each one-page range with `process_madvise` (1,024 ranges per call, the
/// kernel's IOV_MAX). Returns how many ranges were advised before the first refusal.
fn madvise_batch(
    pidfd: &std::os::fd::OwnedFd,
    ranges: &[libc::iovec],
    advice: libc::c_int,
    page: usize,
) -> usize {
    use std::os::fd::AsRawFd;
    let mut done = 0;
    while done < ranges.len() {
        let chunk = &ranges[done..(done + 1024).min(ranges.len())];
        // SAFETY: every iovec names one page of a stack of our own fresh mapping, and the
        // kernel only reads the iovec array, which outlives the call.
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
            Ok(bytes) if bytes >= page => done += bytes / page,
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

/// A LIFO cache of stacks of one worker.
#[derive(Debug)]
pub(crate) struct StackPool {
    /// Free stacks by size; most recently released last. Few sizes are in use at once, so a
    /// small vector beats a map.
    free: Vec<(usize, Vec<Stack>)>,
    cached: usize,
    max_cached: usize,
    keep_warm: usize,
    /// Stacks released since the last trim (a trim has nothing to do when this is zero).
    released_since_trim: usize,
    /// How many stacks the next miss maps at once: doubles on each miss up to
    /// [`MAX_BATCH`], back to one when a stack is released, so a burst of fiber starts pays
    /// one `mmap` per batch and a lone start maps just its own stack.
    batch: usize,
}

/// Most stacks mapped by one `mmap` (untouched stacks cost address space, not memory).
const MAX_BATCH: usize = 64;

/// Most address space mapped by one batch: large stacks are mapped fewer at a time.
const MAX_BATCH_BYTES: usize = 16 << 20;

impl StackPool {
    pub(crate) fn new(max_cached: usize, keep_warm: usize) -> StackPool {
        StackPool { free: Vec::new(), cached: 0, max_cached, keep_warm, released_since_trim: 0, batch: 1 }
    }

    /// A stack of `len` bytes: the warmest cached one, or a new mapping.
    pub(crate) fn get(&mut self, len: usize) -> io::Result<Stack> {
        if let Some((_, list)) = self.free.iter_mut().find(|(size, _)| *size == len) {
            if let Some(stack) = list.pop() {
                self.cached -= 1;
                return Ok(stack);
            }
        }
        // A miss: map a batch, hand out one stack and cache the others (untouched, clean).
        let count = self
            .batch
            .min(self.max_cached.saturating_sub(self.cached) + 1)
            .min((MAX_BATCH_BYTES / len).max(1));
        self.batch = (self.batch * 2).min(MAX_BATCH);
        let mut stacks = match Stack::map_batch(len, count) {
            Ok(stacks) => stacks,
            // Strict overcommit accounting may refuse a large batch that a single stack fits.
            Err(_) if count > 1 => Stack::map_batch(len, 1)?,
            Err(e) => return Err(e),
        };
        let stack = stacks.pop().expect("map_batch returns the stacks it was asked for");
        if !stacks.is_empty() {
            // Their top pages may have been pre-faulted: resident, so a trim must see them.
            stacks.iter_mut().for_each(|s| s.dirty = true);
            self.cached += stacks.len();
            // Highest address on top of the LIFO, next to the stack handed out.
            match self.free.iter_mut().find(|(size, _)| *size == len) {
                Some((_, list)) => list.extend(stacks),
                None => self.free.push((len, stacks)),
            }
        }
        Ok(stack)
    }

    /// Returns a stack to the pool (or unmaps it when the pool is full).
    pub(crate) fn put(&mut self, mut stack: Stack) {
        if self.cached >= self.max_cached {
            return; // dropping unmaps it
        }
        stack.dirty = true;
        self.batch = 1;
        self.cached += 1;
        self.released_since_trim += 1;
        let len = stack.len();
        match self.free.iter_mut().find(|(size, _)| *size == len) {
            Some((_, list)) => list.push(stack),
            None => self.free.push((len, vec![stack])),
        }
    }

    /// Whether stacks were released since the last trim.
    pub(crate) fn needs_trim(&self) -> bool {
        self.released_since_trim > 0
    }

    /// Gives the pages of all but the `keep_warm` most recently released stacks of each size
    /// back to the kernel. Cheap when nothing was released since the last call.
    pub(crate) fn trim(&mut self) {
        if self.released_since_trim == 0 {
            return;
        }
        self.released_since_trim = 0;
        for (_, list) in &mut self.free {
            let cold = list.len().saturating_sub(self.keep_warm);
            for stack in list[..cold].iter_mut().rev() {
                if !stack.dirty {
                    break; // everything below was trimmed before
                }
                stack.release_pages();
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
    fn pool_is_lifo_and_bounded() {
        let mut pool = StackPool::new(2, 1);
        let a = pool.get(64 * 1024).unwrap();
        let b = pool.get(64 * 1024).unwrap();
        let c = pool.get(64 * 1024).unwrap();
        let (a_top, b_top) = (a.top(), b.top());
        pool.put(a);
        pool.put(b);
        pool.put(c); // over max_cached: unmapped
        assert_eq!(pool.cached(), 2);
        assert_eq!(pool.get(64 * 1024).unwrap().top(), b_top, "most recent first");
        assert_eq!(pool.get(64 * 1024).unwrap().top(), a_top);
        assert_eq!(pool.cached(), 0);
    }

    #[test]
    fn a_burst_of_misses_maps_batches_of_distinct_usable_stacks() {
        let len = 32 * 1024;
        let mut pool = StackPool::new(1000, 0);
        let stacks: Vec<Stack> = (0..100).map(|_| pool.get(len).unwrap()).collect();
        // Batches were mapped (1 + 2 + 4 + ... stacks per miss): the pool holds the spares.
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
        // Each stack unmaps its own part of a shared mapping; the others stay usable.
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
