//! Futures on spindle.
//!
//! [`block_on`] runs a future to completion from blocking-style code: in a fiber it parks the
//! fiber between polls (its worker runs other fibers meanwhile) and the future's waker unparks
//! it; on a plain thread it parks the thread. Spindle's sockets and timers register with the
//! worker that polls them, so async libraries (anything written against `futures-io`) run on
//! a fiber unchanged.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::sched::worker;

struct ThreadWake(std::thread::Thread);

impl Wake for ThreadWake {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion, parking the calling fiber (or thread) while it is pending.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = match worker::current().filter(|w| w.current_fiber().is_some()) {
        Some(worker) => worker.current_waker(),
        None => Waker::from(Arc::new(ThreadWake(std::thread::current()))),
    };
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        crate::sync::waiter::park();
    }
}
