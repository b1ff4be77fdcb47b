//! The `Waker`s of blocking-style callers: a fiber's (unparks it through its park word, module
//! `fiber::waiter`) and a plain thread's (`Thread::unpark`).

use std::sync::Arc;
use std::task::{Wake, Waker};
use std::thread::{self, Thread};

use crate::fiber::control::FiberRef;
use crate::fiber::waiter::unpark;
use crate::sched::api::{self, Worker};

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
