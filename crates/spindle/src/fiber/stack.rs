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
//! The [`StackPool`] belongs to one worker and is used only from that worker's thread, so it
//! needs no synchronisation. It hands out the most recently released stack first (its pages
//! are still resident and warm in the cache), keeps at most `max_cached` stacks, and on
//! [`StackPool::trim`] returns the pages of all but the `keep_warm` most recent stacks to the
//! kernel with `madvise(MADV_DONTNEED)`, keeping their address space (and guard) for reuse.

use std::io;
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
        let page = page_size();
        debug_assert!(len.is_multiple_of(page) && len > page);
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing has no
        // preconditions; the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
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
        let mut stack = Stack { base, len, valgrind_id: valgrind::NOT_REGISTERED, dirty: false };
        install_guard(base.as_ptr(), page)?; // on error `stack` drops and unmaps
        stack.valgrind_id = valgrind::stack_register(stack.bottom() as usize, stack.top() as usize);
        Ok(stack)
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
}

impl StackPool {
    pub(crate) fn new(max_cached: usize, keep_warm: usize) -> StackPool {
        StackPool { free: Vec::new(), cached: 0, max_cached, keep_warm, released_since_trim: 0 }
    }

    /// A stack of `len` bytes: the warmest cached one, or a new mapping.
    pub(crate) fn get(&mut self, len: usize) -> io::Result<Stack> {
        if let Some((_, list)) = self.free.iter_mut().find(|(size, _)| *size == len) {
            if let Some(stack) = list.pop() {
                self.cached -= 1;
                return Ok(stack);
            }
        }
        Stack::new(len)
    }

    /// Returns a stack to the pool (or unmaps it when the pool is full).
    pub(crate) fn put(&mut self, mut stack: Stack) {
        if self.cached >= self.max_cached {
            return; // dropping unmaps it
        }
        stack.dirty = true;
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
