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
//! # Invariants
//!
//! - **The permit contract.** Fibers follow `std::thread::park`'s contract: an unpark that
//!   comes before the park leaves a permit, so the park returns at once and no wake-up is lost
//!   (the fiber's park word, `fiber::park_state`, loom-checked). Parks may return spuriously:
//!   every caller loops on its condition.
//! - **One rescheduler.** Of all the parties that unpark a parked fiber, exactly one (the one
//!   whose compare-exchange moves it out of `PARKED`) queues it again, and only on the worker
//!   that owns it: started fibers never change thread (soundness rule "fibers stay home").
//! - **Never block a worker.** A blocking-style wait from code on a worker outside a fiber (an
//!   async task) panics, naming the async alternative (`sched::caller`).

pub(crate) mod completion;
mod join_word;
pub(crate) mod wait;
pub(crate) mod wait_list;
pub(crate) mod waker_set;

use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use crate::fiber::control::FiberRef;
use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::worker::{self, TimerHandle, Worker};
pub(crate) use wait_list::{wake, WaitList, WaitNode};

/// A parked fiber or thread that can be woken, or the waker of a pending future.
#[derive(Debug)]
pub(crate) enum Waiter {
    Fiber(FiberRef),
    Thread(Thread),
    /// A future's waker (an async task, or a fiber in `block_on`/`select!`).
    Task(Waker),
}

impl Waiter {
    /// The caller: the running fiber if there is one, else the current thread.
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
        match self {
            Waiter::Fiber(fiber) => unpark(fiber),
            Waiter::Thread(thread) => thread.unpark(),
            Waiter::Task(waker) => waker.wake_by_ref(),
        }
    }

    /// Whether waking `self` wakes the task behind `waker` (so a re-poll need not requeue).
    pub(crate) fn will_wake(&self, waker: &Waker) -> bool {
        matches!(self, Waiter::Task(w) if w.will_wake(waker))
    }
}

/// Wakes a parked fiber, or leaves a permit if it is not parked. Callable from any thread.
pub(crate) fn unpark(fiber: &FiberRef) {
    if fiber.header.park.unpark() {
        // We moved it PARKED -> IDLE: queueing it is our duty (one rescheduler), on its owner.
        worker::reschedule(fiber.clone());
    }
}

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
    match worker::current().filter(|w| w.in_fiber()) {
        Some(worker) => fiber_waker(worker),
        None => Waker::from(Arc::new(ThreadWake(thread::current()))),
    }
}

/// Parks the caller (fiber or thread) until woken, recording what a fiber waits for (shown by
/// `Runtime::dump_fibers`); may return spuriously.
///
/// # Panics
///
/// In an async task on a spindle worker (see `sched::caller`), naming the async alternative.
#[track_caller]
pub(crate) fn park_on(reason: &'static str) {
    crate::fiber::check_no_park(reason);
    match blocking_caller(reason) {
        Caller::Fiber(worker) => worker.park_fiber(reason),
        Caller::Thread => thread::park(),
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
    let now = Instant::now();
    if now >= deadline {
        return;
    }
    match caller {
        Caller::Fiber(w) => {
            struct CancelTimer(TimerHandle);
            impl Drop for CancelTimer {
                fn drop(&mut self) {
                    if let Some(w) = worker::current() {
                        w.cancel_timer(self.0);
                    }
                }
            }
            let _timer = CancelTimer(w.add_timer(deadline, fiber_waker(w)));
            w.park_fiber(reason);
        }
        Caller::Thread => thread::park_timeout(deadline - now),
    }
}
