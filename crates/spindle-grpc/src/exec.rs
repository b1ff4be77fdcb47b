//! hyper's executor for spindle-grpc's connections: spindle tasks whose every poll is preceded
//! by one yield to the back of the worker's queue.
//!
//! # Invariants
//!
//! - **Batching over promptness.** A woken task normally runs next (spindle's LIFO slot): a
//!   connection woken by one call would then write that call alone. Deferred by one yield, it
//!   runs after the tasks already queued (the other callers, the other streams), and writes all
//!   their frames in one go, as a FIFO runtime would: fewer syscalls and wake-ups per call
//!   under concurrency, one extra trip through the queue when alone.
//! - **Same future, same polls.** The wrapper adds no poll of the inner future and skips none:
//!   every second poll of the wrapper is exactly one poll of the inner future.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Spawns hyper's futures as spindle tasks, each poll deferred by one yield (module docs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Executor;

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        drop(spindle::task::spawn_async(Deferred::new(future)));
    }
}

/// A future whose polls each come one trip through the worker's queue after its wake-up.
pub(crate) struct Deferred<F> {
    inner: Pin<Box<F>>,
    yielded: bool,
}

impl<F: Future> Deferred<F> {
    pub(crate) fn new(inner: F) -> Deferred<F> {
        Deferred { inner: Box::pin(inner), yielded: false }
    }
}

impl<F: Future> Future for Deferred<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.yielded = false;
        self.inner.as_mut().poll(cx)
    }
}
