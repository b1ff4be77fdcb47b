//! Park and wake: how fibers, tasks and plain threads wait, in one place.
//!
//! Every waiting operation of spindle (channels, locks, joins, sleeps, sockets) is written
//! once against this module: [`park_on`] / [`park_until`] suspend the caller, and a
//! [`Waiter`] (or a `Waker` made here) wakes it. Who waits decides what parking means:
//!
//! | caller | park | wake |
//! |---|---|---|
//! | a fiber | its worker switches to other work (`sched::worker::switch`) | [`unpark`]: the park word, then the fiber's own worker queues it |
//! | a plain thread | `std::thread::park` | `Thread::unpark` |
//! | an async task | never parks (blocking-style calls panic there, `sched::caller`) | its `Waker` |
//!
//! Submodules: [`wait_list`] (the FIFO of waiters a blocking primitive keeps under its lock),
//! [`waker_set`] (the wakers of futures waiting for one event, keyed so a dropped future takes
//! its waker out), [`completion`] (the one join cell of fibers, tasks and blocking jobs).
//!
//! Layering: this module sits above the fiber core and the scheduler. It reaches the
//! scheduler only through `sched::api` (who is calling, the current worker's park and timers,
//! the clock); the fiber's park word (module `fiber::park_word`), the [`Waiter`] and
//! [`unpark`] (module `fiber::waiter`) and the join cell (module `fiber::completion`) live
//! in the fiber layer, because every fiber's control block holds them.
//!
//! # Invariants
//!
//! - **The permit contract** and **one rescheduler** (module `fiber::park_word`, where the
//!   park word is modelled with loom): an unpark before the park leaves a permit, so no
//!   wake-up is lost; exactly one unparker queues a parked fiber again, on its own worker.
//!   Parks may return spuriously: every caller loops on its condition.
//! - **A timed park cleans up.** [`park_until`]'s timer on the worker's wheel is cancelled on
//!   every way out (return, spurious wake-up, unwinding), so no stale timer wakes the fiber
//!   in a later park.
//! - **Never block a worker.** A blocking-style wait from code on a worker outside a fiber (an
//!   async task) panics, naming the async alternative (`sched::caller`).

pub(crate) mod completion;
pub(crate) mod wait;
pub(crate) mod wait_list;
pub(crate) mod waker_set;

use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use crate::fiber::control::FiberRef;
pub(crate) use crate::fiber::waiter::{unpark, Waiter};
/// Parks the caller (fiber or thread) until woken; may return spuriously (`sched::api::park`).
pub(crate) use crate::sched::api::park as park_on;
use crate::sched::api::{self, blocking_caller, Caller, TimerHandle, Worker};
pub(crate) use wait_list::{wake, WaitList, WaitNode};

/// Wakes a fiber: the `Waker` of fibers, so that futures, timers and I/O wake them alike.
struct FiberWake(FiberRef);

impl Wake for FiberWake {
    fn wake(self: Arc<Self>) {
        unpark(&self.0);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        unpark(&self.0);
    }
}

/// Wakes a plain thread.
struct ThreadWake(Thread);

impl Wake for ThreadWake {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the running fiber of `worker` (cached in its control block until it
/// finishes).
pub(crate) fn fiber_waker(worker: &Worker) -> Waker {
    let fiber = worker.current_fiber().expect("fiber_waker outside a fiber");
    let cached = fiber.header.waker.take();
    let waker = cached.unwrap_or_else(|| Waker::from(Arc::new(FiberWake(fiber.clone()))));
    fiber.header.waker.set(Some(waker.clone()));
    waker
}

/// A waker for the caller: its fiber's, or one that unparks the current thread.
pub(crate) fn current_waker() -> Waker {
    match api::current_worker().filter(|w| w.in_fiber()) {
        Some(worker) => fiber_waker(worker),
        None => Waker::from(Arc::new(ThreadWake(thread::current()))),
    }
}

/// Like [`park_on`], but returns by `deadline` at the latest (`None`: no deadline). A fiber
/// arms a timer on its worker's wheel for the park (cancelled on every way out); a thread uses
/// `std::thread::park_timeout`. May return spuriously: callers re-check their condition and
/// the clock.
#[track_caller]
pub(crate) fn park_until(deadline: Option<Instant>, reason: &'static str) {
    let Some(deadline) = deadline else { return park_on(reason) };
    crate::fiber::check_no_park(reason);
    let caller = blocking_caller(reason);
    // The runtime's clock, as the deadline (module `sched::clock`); a thread's is the real one.
    let now = api::now();
    if now >= deadline {
        return;
    }
    match caller {
        Caller::Fiber(w) => {
            struct CancelTimer(TimerHandle);
            impl Drop for CancelTimer {
                fn drop(&mut self) {
                    if let Some(w) = api::current_worker() {
                        w.cancel_timer(self.0);
                    }
                }
            }
            let _timer = CancelTimer(w.add_timer(deadline, fiber_waker(w)));
            w.park_current(reason);
        }
        Caller::Thread => thread::park_timeout(deadline - now),
    }
}
