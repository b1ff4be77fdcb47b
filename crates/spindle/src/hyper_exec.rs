//! hyper's executors with spindle's spawn options (the `hyper` feature): how the futures
//! hyper spawns for a connection (HTTP/2 streams, a client connection's driver) become
//! spindle tasks. [`hyper_rt::Executor`](crate::hyper_rt::Executor) spawns plain tasks; the
//! types here choose where those tasks run and when they are polled.
//!
//! - [`TaskExecutor`]: `Send` tasks, which any worker may poll, with the options of
//!   [`task::Builder`](crate::task::Builder) (`eager`: the first poll may happen at once,
//!   inside the spawning task's poll; `batched`: wake-ups go to the back of the worker's
//!   queue, not its LIFO slot) and `deferred` (each poll comes one trip through the queue
//!   after its wake-up: [`Deferred`]).
//! - [`LocalExecutor`]: tasks pinned to the current worker, for futures that are not `Send`
//!   (a client connection and its streams then share one worker).
//!
//! Invariants:
//!
//! - **Spawned on the current runtime.** `execute` must be called on a spindle worker (hyper
//!   calls it from the connection's future, which runs on one); elsewhere it panics, as
//!   [`task::spawn_async`](crate::task::spawn_async) does.
//! - **Detached.** The task's handle is dropped at once: the task runs to completion on its
//!   own, as hyper expects, and ends with the runtime.
//! - **Same future, same polls** ([`Deferred`]): the wrapper adds no poll of the inner future
//!   and skips none; every second poll of the wrapper is exactly one poll of the inner one.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Spawns hyper's futures as `Send` spindle tasks of the current runtime, with the chosen
/// options (module doc). `TaskExecutor::new()` spawns plain tasks.
///
/// ```
/// // An HTTP/2 server's streams: polled at once when that takes nothing from anyone, woken
/// // to the back of the queue.
/// let exec = spindle::hyper_exec::TaskExecutor::new().eager(true).batched(true);
/// # let _ = exec;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskExecutor {
    eager: bool,
    batched: bool,
    deferred: bool,
}

impl TaskExecutor {
    /// Plain tasks: queued at spawn, woken into their worker's LIFO slot.
    pub const fn new() -> TaskExecutor {
        TaskExecutor { eager: false, batched: false, deferred: false }
    }

    /// Whether a task's first poll may happen at once, inside the calling task's poll
    /// ([`task::Builder::eager`](crate::task::Builder::eager)).
    pub const fn eager(mut self, eager: bool) -> TaskExecutor {
        self.eager = eager;
        self
    }

    /// Whether a task's wake-ups go to the back of its worker's queue
    /// ([`task::Builder::batched`](crate::task::Builder::batched)).
    pub const fn batched(mut self, batched: bool) -> TaskExecutor {
        self.batched = batched;
        self
    }

    /// Whether each poll of a task comes one trip through the worker's queue after its
    /// wake-up ([`Deferred`]).
    pub const fn deferred(mut self, deferred: bool) -> TaskExecutor {
        self.deferred = deferred;
        self
    }
}

impl<F> hyper::rt::Executor<F> for TaskExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        let builder = crate::task::Builder::new().eager(self.eager).batched(self.batched);
        if self.deferred {
            drop(builder.spawn(Deferred::new(future)));
        } else {
            drop(builder.spawn(future));
        }
    }
}

/// Spawns hyper's futures as tasks pinned to the current worker
/// ([`task::spawn_local`](crate::task::spawn_local)): they need not be `Send`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalExecutor;

impl<F> hyper::rt::Executor<F> for LocalExecutor
where
    F: Future + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        drop(crate::task::spawn_local(future));
    }
}

/// A future whose every poll comes one trip through the worker's queue after its wake-up.
///
/// A woken task normally runs next (the worker's LIFO slot): a connection woken by one call
/// would then write that call alone. Deferred by one yield, it runs after the tasks already
/// queued (the other callers, the other streams), and writes all their frames in one go, as on
/// a FIFO runtime: fewer system calls and wake-ups a call under concurrency, one extra trip
/// through the queue when alone.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Deferred<F> {
    inner: Pin<Box<F>>,
    yielded: bool,
}

impl<F: Future> Deferred<F> {
    /// Wraps `inner` (boxed: the wrapper is `Unpin`).
    pub fn new(inner: F) -> Deferred<F> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its polls; ready at the second.
    struct Twice(Arc<AtomicUsize>);

    impl Future for Twice {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(())
        }
    }

    #[test]
    fn deferred_polls_the_inner_future_every_second_poll() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut fut = Deferred::new(Twice(polls.clone()));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut outer = 0;
        while Pin::new(&mut fut).poll(&mut cx).is_pending() {
            outer += 1;
        }
        assert_eq!((outer + 1, polls.load(Ordering::SeqCst)), (4, 2));
    }
}
