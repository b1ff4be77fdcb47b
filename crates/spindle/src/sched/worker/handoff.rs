//! The safety net's cell: a worker's run queue, which its owner thread borrows as cheaply as a
//! `RefCell`, and which the watchdog takes over while the owner is held by a fiber that does
//! not come back (an unhooked blocking call, a long computation), to hand the queue's
//! unstarted fibers to the other workers — as Go's scheduler hands off a P whose thread is
//! blocked in a system call.
//!
//! # Invariants
//!
//! - **One side at a time.** The queue is touched either by its owner, inside a borrow, or by
//!   one taker, inside [`HandoffCell::take_over`]; never both. The owner's borrow marks the
//!   cell busy (`state`, a plain store) and then checks `taking` (a plain load), with only a
//!   compiler fence between; the taker sets `taking`, then issues `membarrier(2)`
//!   (`MEMBARRIER_CMD_PRIVATE_EXPEDITED`: every thread of the process runs a full memory
//!   barrier before it returns), then checks `state`. This is the asymmetric Dekker pattern
//!   (the light side a compiler fence, the heavy side a process-wide barrier): of the
//!   owner's check and the taker's, at least one sees the other's store. A taker that sees
//!   the cell busy gives up; an owner that sees `taking` steps back (clears its mark) and
//!   waits for the taker to finish (acquire), then borrows again.
//! - **Costs the owner no fence.** The owner's path is two plain stores and a load around
//!   each borrow, as a `RefCell`'s bookkeeping is; the barrier is all on the taker's side,
//!   which runs a few times a second at most (the watchdog).
//! - **No barrier, no take-over.** Without a working `membarrier` (a kernel without it, a
//!   seccomp filter that refuses it) and under the ThreadSanitizer and loom builds (which do
//!   not model it: TSan would report the take-over as a race), `take_over` never takes the
//!   queue.
//! - **Started fibers stay home.** The taker moves only fibers that have not started and are
//!   not pinned (module `sched::worker`, "fibers stay home"); pinning happens inside the
//!   owner's borrow (`Worker::keeps_for_join`), so a fiber is never pinned and moved at once.

use std::cell::UnsafeCell;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU8, Ordering};
use std::sync::OnceLock;

/// A value its owner thread borrows, and a taker may take over while the owner is away
/// (module doc).
pub(crate) struct HandoffCell<T> {
    value: UnsafeCell<T>,
    /// The owner's borrow state, [`FREE`] or [`BORROWED`]. Written only by the owner; read by
    /// the taker.
    state: AtomicU8,
    /// A taker holds the value (written only by the taker).
    taking: AtomicBool,
}

// SAFETY: the value is touched by one thread at a time ("one side at a time"): the owner
// inside its borrows, a taker inside `take_over`; `T: Send` lets it be used from either.
unsafe impl<T: Send> Sync for HandoffCell<T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for HandoffCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandoffCell").finish_non_exhaustive()
    }
}

impl<T> HandoffCell<T> {
    pub(crate) fn new(value: T) -> HandoffCell<T> {
        HandoffCell {
            value: UnsafeCell::new(value),
            state: AtomicU8::new(FREE),
            taking: AtomicBool::new(false),
        }
    }

    /// Marks the cell borrowed, stepping back while a taker holds it.
    #[inline]
    fn enter(&self) {
        self.state.store(BORROWED, Ordering::Relaxed);
        // The light side of the barrier ("one side at a time"): the store above is not moved
        // after the load below by the compiler; the taker's membarrier orders them in the CPU.
        compiler_fence(Ordering::SeqCst);
        if self.taking.load(Ordering::Relaxed) {
            self.step_back();
        }
    }

    /// A taker holds the value: clear the mark, wait for the taker to finish, mark again.
    #[cold]
    #[inline(never)]
    fn step_back(&self) {
        loop {
            self.state.store(FREE, Ordering::Relaxed);
            // Acquire: the taker's writes to the value are visible once it is done.
            while self.taking.load(Ordering::Acquire) {
                std::hint::spin_loop();
                std::thread::yield_now();
            }
            self.state.store(BORROWED, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
            if !self.taking.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// Borrows the value mutably (owner only). Borrows do not nest: the run queue's are each
    /// one statement long.
    ///
    /// # Panics
    ///
    /// If it is borrowed already (a bug, as with `RefCell`).
    #[inline]
    pub(crate) fn borrow_mut(&self) -> RefMut<'_, T> {
        assert!(self.state.load(Ordering::Relaxed) == FREE, "HandoffCell already borrowed");
        self.enter();
        RefMut { cell: self }
    }

    /// Borrows the value for reading (owner only): a mutable borrow, read only.
    #[inline]
    pub(crate) fn borrow(&self) -> RefMut<'_, T> {
        self.borrow_mut()
    }

    /// Runs `f` on the value if the owner is not using it (the taker's side; module doc),
    /// else returns `None`. Takers must not run at once (the runtime's one watchdog).
    pub(crate) fn take_over<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if !barrier_available() {
            return None;
        }
        self.taking.store(true, Ordering::Relaxed);
        if !process_barrier() {
            self.taking.store(false, Ordering::Release);
            return None;
        }
        // Acquire: the owner's last borrow ended with a release store.
        if self.state.load(Ordering::Acquire) != FREE {
            self.taking.store(false, Ordering::Release);
            return None;
        }
        // SAFETY: the owner is not in a borrow, and any borrow it starts now sees `taking`
        // and waits until the release below ("one side at a time").
        let r = f(unsafe { &mut *self.value.get() });
        self.taking.store(false, Ordering::Release);
        Some(r)
    }
}

/// A mutable borrow of a [`HandoffCell`].
pub(crate) struct RefMut<'a, T> {
    cell: &'a HandoffCell<T>,
}

impl<T> std::ops::Deref for RefMut<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the one borrow ("one side at a time").
        unsafe { &*self.cell.value.get() }
    }
}

impl<T> std::ops::DerefMut for RefMut<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the one borrow ("one side at a time").
        unsafe { &mut *self.cell.value.get() }
    }
}

impl<T> Drop for RefMut<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: the owner's writes are visible to a taker that sees the cell free.
        self.cell.state.store(FREE, Ordering::Release);
    }
}

/// Whether the process may use the expedited private barrier (registered once).
fn barrier_available() -> bool {
    if cfg!(any(spindle_tsan, spindle_loom)) {
        return false;
    }
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: membarrier takes integer arguments only.
        unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
    })
}

/// Runs a full memory barrier on every running thread of the process.
fn process_barrier() -> bool {
    // SAFETY: membarrier takes integer arguments only.
    unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 }
}

/// The owner is not using the value.
const FREE: u8 = 0;
/// The owner is in a borrow.
const BORROWED: u8 = 1;

/// `linux/membarrier.h`.
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// The owner moves items through its queue while a taker keeps taking the odd ones out:
    /// every item ends up exactly once on one side or the other ("one side at a time"; a
    /// borrow racing a take-over would lose or duplicate items, or trip the borrow checks).
    #[test]
    fn owner_and_taker_never_touch_the_value_at_once() {
        if !barrier_available() {
            return; // the take-over is off here (module doc, "no barrier, no take-over")
        }
        const ITEMS: usize = 200_000;
        let cell = Arc::new(HandoffCell::new(VecDeque::<usize>::new()));
        let done = Arc::new(AtomicBool::new(false));
        let taken = Arc::new(AtomicUsize::new(0));
        let taker = {
            let (cell, done, taken) = (cell.clone(), done.clone(), taken.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while !done.load(Ordering::Acquire) {
                    if let Some(mut items) = cell.take_over(|q| {
                        let mut out = Vec::new();
                        let mut kept = VecDeque::with_capacity(q.len());
                        for i in q.drain(..) {
                            if i % 2 == 1 {
                                out.push(i);
                            } else {
                                kept.push_back(i);
                            }
                        }
                        *q = kept;
                        out
                    }) {
                        taken.fetch_add(items.len(), Ordering::Relaxed);
                        got.append(&mut items);
                    }
                }
                got
            })
        };
        let mut kept = Vec::new();
        for i in 0..ITEMS {
            cell.borrow_mut().push_back(i);
            if cell.borrow().len() > 64 {
                let front = cell.borrow_mut().pop_front();
                kept.extend(front);
            }
        }
        done.store(true, Ordering::Release);
        let mut got = taker.join().unwrap();
        kept.extend(cell.borrow_mut().drain(..));
        got.extend(kept);
        got.sort_unstable();
        assert_eq!(got, (0..ITEMS).collect::<Vec<_>>(), "every item once");
        assert!(taken.load(Ordering::Relaxed) > 0, "the taker took some items over");
    }
}
