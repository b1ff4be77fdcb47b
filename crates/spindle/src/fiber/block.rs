//! The allocation of a fiber's control block: counted pointers to the fiber's cell (module
//! `fiber::control`), seen as [`FiberRef`] by the scheduler and as [`OutputRef`] by the join
//! handle. A freed cell's memory goes to a per-thread cache by layout (module
//! `fiber::block_cache`), so that a spawn after a fiber's end reuses a block without a trip
//! through the allocator.
//!
//! It replaces `Arc`, whose memory cannot be recycled, which counts weak references nobody
//! takes (one more atomic read-modify-write per fiber) and starts at one reference where a
//! spawn needs two (one more), and whose value sits after its counts at an offset that depends
//! on the closure's alignment: every access to the header through an `Arc<FiberCell<dyn
//! Stage>>` computed it from the vtable. Here the count is a field of the header, which is at
//! offset 0 of the cell (`repr(C)`), so the header is reached with no computation.
//!
//! # Invariants
//!
//! - **Counted like `Arc`.** The count (`Header::refs`) is the number of live [`FiberRef`]s
//!   and [`OutputRef`]s of the cell. A spawn writes it as 2 (the run reference and the
//!   handle's) before the cell is shared. A clone increments it (relaxed: the cloner holds a
//!   reference already); a drop decrements it (release), and the drop that takes it to zero
//!   loads it again (acquire; not a fence, which ThreadSanitizer does not model) before it
//!   drops the cell and frees its memory, so every use of the cell by any holder happens
//!   before the free. Loom-checked below (`loom_block_count`).
//! - **The sole holder frees without a read-modify-write.** A holder that reads the count as 1
//!   (acquire) holds the only reference, and nobody can make another (a clone needs one), so
//!   it frees the cell without decrementing: the acquire load synchronises with every earlier
//!   holder's release decrement as the last decrement's acquire would. A spawned fiber's
//!   second drop (the run reference or the handle's, whichever goes last) saves its
//!   `fetch_sub` so. Loom-checked with the rest (`loom_block_count`).
//! - **A freed block is plain memory.** The cell is dropped in place before its memory goes to
//!   the cache of the thread that dropped the last reference (module `fiber::block_cache`,
//!   whose invariants say what it keeps).

use std::alloc::Layout;
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use super::block_cache::{allocate, put, take, CACHE_MAX_BLOCK};
use super::control::{FiberCell, Header, Output, Stage};
use crate::loom::AtomicUsize;

/// The reference count of a cell, kept in its header ("counted like `Arc`").
#[derive(Debug)]
pub(crate) struct Count(AtomicUsize);

impl Count {
    /// The count of a new cell: its run reference and its handle's.
    pub(crate) fn new() -> Count {
        Count(AtomicUsize::new(2))
    }
}

/// A pointer to a cell as the scheduler and the registry see it.
pub(crate) type FiberPtr = *const FiberCell<dyn Stage>;

/// A reference to a fiber as the scheduler sees it: counted ("counted like `Arc`").
pub(crate) struct FiberRef {
    ptr: NonNull<FiberCell<dyn Stage>>,
}

/// The join handle's reference to the same block, typed by the fiber's result.
pub(crate) struct OutputRef<T> {
    ptr: NonNull<FiberCell<dyn Output<T>>>,
}

// SAFETY: a FiberRef shares a `FiberCell<dyn Stage>`, which is Send + Sync (`Stage: Send +
// Sync`, `Header` is both), through a thread-safe count: like `Arc<T: Send + Sync>`.
unsafe impl Send for FiberRef {}
// SAFETY: as above.
unsafe impl Sync for FiberRef {}
// SAFETY: as above, with `Output<T>: Send + Sync`; T: Send as the result moves to the joiner.
unsafe impl<T: Send> Send for OutputRef<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for OutputRef<T> {}

/// The memory of a new fiber's block, taken before the fiber's closure is moved: every call
/// that might unwind or fail (the block, the allocator, the stack) happens before, so the
/// closure moves once, from where its spawner built it into the block ([`Building::fill`]).
/// Built through a `make` closure after the block was taken, a server's request handler was
/// copied three more times on the way: the closure that captured it was
/// live on the unwinding path of the block's allocation.
pub(crate) struct Vacant<S> {
    raw: NonNull<FiberCell<S>>,
}

impl<S> Vacant<S> {
    /// Takes memory for a `FiberCell<S>`: a cached block, else the allocator's.
    #[inline(always)]
    pub(crate) fn take() -> Vacant<S> {
        let layout = Layout::new::<FiberCell<S>>();
        // The size is a constant here: the branch folds away.
        let raw = if layout.size() <= CACHE_MAX_BLOCK { take(layout) } else { allocate(layout) };
        Vacant { raw: raw.cast() }
    }

    /// Writes the cell's header, built by `header` (in place: a header built on the stack
    /// would be copied whole). The stage follows with [`Building::fill`], once
    /// whatever else might fail (the fiber's stack, written into the header) has succeeded.
    #[inline(always)]
    pub(crate) fn write_header(self, header: impl FnOnce() -> Header) -> Building<S> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: `raw` is fresh memory of `FiberCell<S>`'s layout ("a freed block is plain
        // memory"), which nothing else points to: the header is written here, before anything
        // reads the cell. The header's count starts at 2 (`Count::new`).
        unsafe { std::ptr::addr_of_mut!((*raw.as_ptr()).header).write(header()) };
        Building { raw }
    }
}

/// A block whose header is written and whose stage is not yet ([`Vacant::write_header`]).
/// Dropped (a spawn that failed after the header, when no stack could be had), it drops the
/// header and gives the memory back to the cache.
pub(crate) struct Building<S> {
    raw: NonNull<FiberCell<S>>,
}

impl<S> Building<S> {
    /// The header written by [`Vacant::write_header`], still owned by the builder alone.
    #[inline(always)]
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the header is initialised (`write_header`), and nothing else points to the
        // cell until `fill` hands out its references.
        unsafe { &*std::ptr::addr_of!((*self.raw.as_ptr()).header) }
    }

    /// Writes the stage by `write_stage(stage, input)`, which writes it at the pointer it is
    /// given; returns the cell's run reference and its handle's.
    ///
    /// # Safety
    ///
    /// `write_stage` writes a whole `S` at the pointer it is given.
    #[inline(always)]
    pub(crate) unsafe fn fill<A, T>(
        self,
        input: A,
        write_stage: impl FnOnce(*mut S, A),
    ) -> (FiberRef, OutputRef<T>)
    where
        S: Stage + Output<T> + 'static,
    {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: the stage's field of the cell whose header `write_header` wrote, which
        // nothing else points to yet; `write_stage` writes it whole (the caller's contract).
        write_stage(unsafe { std::ptr::addr_of_mut!((*raw.as_ptr()).stage) }, input);
        (FiberRef { ptr: raw }, OutputRef { ptr: raw })
    }
}

impl<S> Drop for Building<S> {
    fn drop(&mut self) {
        // SAFETY: the header is initialised and owned by us alone (see `header`); it is
        // dropped once, here, and the memory is then plain memory again.
        unsafe { std::ptr::drop_in_place(std::ptr::addr_of_mut!((*self.raw.as_ptr()).header)) };
        put(self.raw.cast::<u8>(), Layout::new::<FiberCell<S>>());
    }
}

impl<S> Drop for Vacant<S> {
    /// A block never filled (its spawn failed after it was taken) goes back to the cache.
    fn drop(&mut self) {
        put(self.raw.cast::<u8>(), Layout::new::<FiberCell<S>>());
    }
}

impl FiberRef {
    /// The cell's address, for the registry (which borrows the run reference).
    #[inline]
    pub(crate) fn as_ptr(this: &FiberRef) -> FiberPtr {
        this.ptr.as_ptr()
    }

    /// Takes back a reference that was forgotten (`std::mem::forget`) by its holder.
    ///
    /// # Safety
    ///
    /// `ptr` is from [`FiberRef::as_ptr`] of a reference that was then forgotten, and that
    /// forgotten reference is taken back once, here.
    #[inline]
    pub(crate) unsafe fn from_raw(ptr: FiberPtr) -> FiberRef {
        // SAFETY: non-null: from `as_ptr` of a live reference (the caller's contract).
        FiberRef { ptr: unsafe { NonNull::new_unchecked(ptr.cast_mut()) } }
    }

    /// A new counted reference to the cell whose stage is at `stage`.
    ///
    /// # Safety
    ///
    /// `stage` points at the `stage` field of a live `FiberCell<S>` made by [`Building::fill`],
    /// which the caller holds a reference to.
    pub(crate) unsafe fn from_stage<S: Stage + 'static>(stage: *const S) -> FiberRef {
        let offset = std::mem::offset_of!(FiberCell<S>, stage);
        let cell = stage.cast::<u8>().wrapping_sub(offset).cast::<FiberCell<S>>().cast_mut();
        // SAFETY: the caller's cell, alive: it holds a reference; we add ours to the count.
        let cell = unsafe { NonNull::new_unchecked(cell) };
        // SAFETY: as above.
        unsafe { acquire(cell.as_ref()) };
        FiberRef { ptr: cell }
    }
}

impl Deref for FiberRef {
    type Target = FiberCell<dyn Stage>;

    #[inline]
    fn deref(&self) -> &FiberCell<dyn Stage> {
        // SAFETY: a live reference keeps the cell allocated ("counted like `Arc`").
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> Deref for OutputRef<T> {
    type Target = FiberCell<dyn Output<T>>;

    #[inline]
    fn deref(&self) -> &FiberCell<dyn Output<T>> {
        // SAFETY: as for FiberRef.
        unsafe { self.ptr.as_ref() }
    }
}

impl Clone for FiberRef {
    #[inline]
    fn clone(&self) -> FiberRef {
        // SAFETY: we hold a reference, so the cell is alive.
        unsafe { acquire(self.ptr.as_ref()) };
        FiberRef { ptr: self.ptr }
    }
}

impl Drop for FiberRef {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: our reference is given up here, once.
        unsafe { release(self.ptr) }
    }
}

impl<T> Drop for OutputRef<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as for FiberRef.
        unsafe { release(self.ptr) }
    }
}

impl fmt::Debug for FiberRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// Adds a reference ("counted like `Arc`": relaxed, the caller holds one).
///
/// # Safety
///
/// The caller holds a reference to `cell`.
#[inline]
unsafe fn acquire<S: ?Sized>(cell: &FiberCell<S>) {
    let previous = cell.header.refs.0.fetch_add(1, Ordering::Relaxed);
    if previous > isize::MAX as usize {
        // As `Arc`: a count this high means leaked references; wrapping would free early.
        std::process::abort();
    }
}

/// Gives up a reference; the last one drops the cell and frees its memory.
///
/// # Safety
///
/// The caller gives up a reference it holds to the live cell at `ptr`, once.
#[inline]
unsafe fn release<S: ?Sized>(ptr: NonNull<FiberCell<S>>) {
    // SAFETY: the caller's reference keeps the cell alive until this decrement.
    if drop_ref(&unsafe { ptr.as_ref() }.header.refs.0) {
        // SAFETY: we gave up the last reference, so the cell is ours alone.
        unsafe { free(ptr) }
    }
}

/// Gives up a reference of a count ("counted like `Arc`"); true for the last reference, which
/// has then synchronised (an acquire load) so that every other holder's uses happen before
/// what it does next. The last one leaves the count as it found it (1, or 0 after racing
/// another holder's drop): the cell is freed next, nobody reads it again.
#[inline]
fn drop_ref(count: &AtomicUsize) -> bool {
    // The sole holder ("the sole holder frees without a read-modify-write"): the acquire load
    // reads the release decrement of the holder before us, so its uses happen before the free.
    if count.load(Ordering::Acquire) == 1 {
        return true;
    }
    if count.fetch_sub(1, Ordering::Release) != 1 {
        return false;
    }
    // An acquire load of the count rather than an acquire fence (as std's `Arc` does under
    // ThreadSanitizer, which does not model fences): it reads our own decrement, which ends
    // every other holder's release sequence, so their uses happen before the free.
    count.load(Ordering::Acquire);
    true
}

/// The last reference's half of [`release`]: outlined, the common drop is not the last.
///
/// # Safety
///
/// The caller gave up the last reference to the live cell at `ptr` ([`drop_ref`] said so).
#[inline(never)]
unsafe fn free<S: ?Sized>(ptr: NonNull<FiberCell<S>>) {
    // SAFETY: the cell is alive and ours alone; its layout is read before its drop.
    let layout = Layout::for_value(unsafe { ptr.as_ref() });
    // SAFETY: as above; the cell is dropped once, here, and not touched again.
    unsafe { std::ptr::drop_in_place(ptr.as_ptr()) };
    put(ptr.cast::<u8>(), layout);
}

#[cfg(all(test, spindle_loom))]
mod block_loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// Two holders write their part of the cell, then drop their references on two threads:
    /// exactly one is the last, and it reads both parts without a race (loom reports a read
    /// that does not happen after both writes).
    #[test]
    fn loom_block_count() {
        loom::model(|| {
            let count = Arc::new(AtomicUsize::new(2));
            let parts = Arc::new((UnsafeCell::new(0usize), UnsafeCell::new(0usize)));
            let last = |count: &AtomicUsize, parts: &(UnsafeCell<usize>, UnsafeCell<usize>)| {
                if drop_ref(count) {
                    // SAFETY: the last reference: both writers are done (what loom checks).
                    let sum = unsafe { parts.0.with(|a| *a) + parts.1.with(|b| *b) };
                    assert_eq!(sum, 3, "both holders' writes are visible to the last one");
                    true
                } else {
                    false
                }
            };
            let other = {
                let (count, parts) = (count.clone(), parts.clone());
                thread::spawn(move || {
                    // SAFETY: this part is this holder's until its reference is dropped.
                    parts.1.with_mut(|b| unsafe { *b = 2 });
                    last(&count, &parts)
                })
            };
            // SAFETY: as above, for the other part.
            parts.0.with_mut(|a| unsafe { *a = 1 });
            let here = last(&count, &parts);
            let there = other.join().unwrap();
            assert!(here != there, "exactly one holder is the last");
        });
    }

    /// Three holders (a relaxed clone among them), each writing its part, drop on three
    /// threads: exactly one is the last (by its decrement or by finding the count at 1, "the
    /// sole holder frees without a read-modify-write") and it sees every part.
    #[test]
    fn loom_block_count_with_a_clone() {
        loom::model(|| {
            let count = Arc::new(AtomicUsize::new(2));
            let parts = Arc::new([UnsafeCell::new(0usize), UnsafeCell::new(0usize), UnsafeCell::new(0usize)]);
            let last = Arc::new(AtomicUsize::new(0));
            let drop_one =
                |i: usize, count: &AtomicUsize, parts: &[UnsafeCell<usize>; 3], last: &AtomicUsize| {
                    // SAFETY: part `i` is this holder's until its reference is dropped.
                    parts[i].with_mut(|p| unsafe { *p = 1 << i });
                    if drop_ref(count) {
                        // SAFETY: the last reference: every writer is done (what loom checks).
                        let sum: usize = parts.iter().map(|p| p.with(|v| unsafe { *v })).sum();
                        assert_eq!(sum, 7, "every holder's write is visible to the last one");
                        last.fetch_add(1, Ordering::Relaxed);
                    }
                };
            // A holder clones (relaxed: it holds a reference) before handing the clone over.
            count.fetch_add(1, Ordering::Relaxed);
            let threads: Vec<_> = (1..3)
                .map(|i| {
                    let (count, parts, last) = (count.clone(), parts.clone(), last.clone());
                    thread::spawn(move || drop_one(i, &count, &parts, &last))
                })
                .collect();
            drop_one(0, &count, &parts, &last);
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(last.load(Ordering::Relaxed), 1, "exactly one holder is the last");
        });
    }
}
