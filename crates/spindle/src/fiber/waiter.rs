//! Who waits, and how to wake it: a [`Waiter`] is a parked fiber, a blocked thread, or the
//! waker of a pending future; [`unpark`] wakes a fiber through its park word (module
//! `fiber::park_word`) and hands it to its own worker.
//!
//! Below module `park` (which parks the callers these wake) because the fiber's join cell
//! (module `fiber::completion`, in the control block) holds a `Waiter`.
//!
//! # Invariants
//!
//! - **One rescheduler** (module `fiber::park_word`): [`unpark`] queues the fiber only when its
//!   compare-exchange moved the park word out of `PARKED`, and only on the fiber's owner
//!   (`sched::worker::reschedule`), taking over the run reference the fiber forgot when it
//!   parked.
//! - **A joiner at home** (module `park::completion`): a [`HomeFiber`] is an uncounted
//!   pointer, made, stored and used on the one thread where both the joiner and the joined
//!   fiber run.

use std::task::Waker;
use std::thread::{self, Thread};

use super::block::FiberPtr;
use super::control::FiberRef;
use crate::sched::worker::{self, Queued, Worker};

/// A parked fiber or thread that can be woken, or the waker of a pending future.
#[derive(Debug)]
pub(crate) enum Waiter {
    Fiber(FiberRef),
    Thread(Thread),
    /// A future's waker (an async task, or a fiber in `block_on`/`select!`).
    Task(Waker),
    /// A fiber of the waking party's own worker, uncounted: see [`HomeFiber`].
    Home(HomeFiber),
}

/// A joiner that waits for a fiber which can only run on the joiner's own worker (module
/// `park::completion`, "a joiner at home"): an uncounted pointer to the joining fiber's cell.
/// A counted [`FiberRef`] cost two atomic read-modify-writes a join (its clone and its drop).
///
/// Sound because the waking party runs on the joiner's thread, so the joiner cannot finish
/// meanwhile: it leaves its join only after the wake-up (which runs to its end without a
/// switch) or, unwinding, after taking the pointer back ([`Completion::join_at_home`]'s guard).
///
/// [`Completion::join_at_home`]: super::completion::Completion::join_at_home
#[derive(Debug)]
pub(crate) struct HomeFiber(FiberPtr);

// SAFETY: a `HomeFiber` is made, stored, taken and used on one thread (the joiner's worker,
// where the joined fiber runs: see the type's doc); it crosses no thread. `Send` and `Sync` only
// let it sit in the join word, which holds the other waiters too.
unsafe impl Send for HomeFiber {}
// SAFETY: as above.
unsafe impl Sync for HomeFiber {}

impl HomeFiber {
    /// The running fiber of `worker`.
    #[inline]
    pub(crate) fn current(worker: &Worker) -> HomeFiber {
        HomeFiber(worker.current_fiber_ptr().expect("a join at home from outside a fiber"))
    }
}

impl Waiter {
    /// The caller: the running fiber if there is one, else the current thread. Inlined: a
    /// waiter returned through memory was copied into the join word's slot with loads that
    /// spanned two of its stores, which stalls (store-to-load forwarding fails).
    #[inline(always)]
    pub(crate) fn current() -> Waiter {
        match worker::current().and_then(|w| w.current_fiber()) {
            Some(fiber) => Waiter::Fiber(fiber),
            None => Waiter::Thread(thread::current()),
        }
    }

    pub(crate) fn wake(self) {
        self.wake_by_ref();
    }

    pub(crate) fn wake_by_ref(&self) {
        self.wake_as(Queued::Woken);
    }

    /// Wakes the joiner of a completion (module `fiber::completion`, "a completion wakes its joiner
    /// behind the queue"): a fiber of this worker goes to the back of its run queue, not into
    /// the LIFO slot.
    pub(crate) fn wake_joiner(self) {
        self.wake_as(Queued::Back);
    }

    /// Wakes the waiter; a fiber of the current worker is queued as `how` says.
    #[inline]
    fn wake_as(&self, how: Queued) {
        match self {
            Waiter::Fiber(fiber) => unpark_as(fiber, how),
            Waiter::Thread(thread) => thread.unpark(),
            Waiter::Task(waker) => waker.wake_by_ref(),
            Waiter::Home(HomeFiber(ptr)) => {
                // SAFETY: the joining fiber is alive ("a joiner at home": it cannot have left
                // its join while this waiter is registered); the reference made here is not
                // dropped, so no count is given up that was not taken.
                let fiber = std::mem::ManuallyDrop::new(unsafe { FiberRef::from_raw(*ptr) });
                unpark_as(&fiber, how)
            }
        }
    }

    /// Whether waking `self` wakes the task behind `waker` (so a re-poll need not requeue).
    pub(crate) fn will_wake(&self, waker: &Waker) -> bool {
        matches!(self, Waiter::Task(w) if w.will_wake(waker))
    }
}

/// Wakes a parked fiber, or leaves a permit if it is not parked. Callable from any thread.
/// A fiber of the current worker goes into its LIFO slot, to run next.
pub(crate) fn unpark(fiber: &FiberRef) {
    unpark_as(fiber, Queued::Woken);
}

/// [`unpark`], queueing a fiber of the current worker as `how` says.
#[inline]
fn unpark_as(fiber: &FiberRef, how: Queued) {
    if fiber.header.park.unpark() {
        crate::trace::fiber_woken(fiber.header.id);
        // We moved it PARKED -> IDLE: queueing it is our duty (one rescheduler), on its owner.
        // SAFETY: a parked fiber forgot its run reference for its one rescheduler, which we
        // now are (module `sched::worker`, "a started fiber owns itself"); `fiber` is a
        // reference to the same cell, so its pointer is that reference's.
        let run_ref = unsafe { FiberRef::from_raw(FiberRef::as_ptr(fiber)) };
        worker::reschedule(run_ref, how);
    }
}
