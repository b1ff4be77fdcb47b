//! hyper's runtime traits on spindle (the `hyper` feature): a timer on the workers' timer
//! wheels and an executor that spawns hyper's background futures as spindle tasks.
//!
//! Sockets implement `hyper::rt::Read`/`Write` themselves (`net/stream.rs`). With these two,
//! hyper's HTTP/1.1 and HTTP/2 servers and clients run on spindle with no other runtime.

// Invariants:
// - **Timers belong to a worker.** A [`Sleep`] registers on the timer wheel of the worker
//   that polls it; it must be polled on a spindle worker (a fiber or a spindle task), as every
//   spindle timer future.
// - **Spawned futures run on the current runtime.** `Executor::execute` must be called on a
//   spindle worker (hyper calls it from the connection future, which runs on one).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Implements [`hyper::rt::Timer`] with spindle's timer futures (each worker's timer wheel),
/// so that hyper's timeouts (`header_read_timeout`, HTTP/2 keep-alive) work on spindle.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timer;

/// A [`crate::time::Sleep`] as a [`hyper::rt::Sleep`].
#[derive(Debug)]
pub struct Sleep(crate::time::Sleep);

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

impl hyper::rt::Sleep for Sleep {}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep(crate::time::sleep_future(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep(crate::time::sleep_until_future(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<Sleep>() {
            // Reuses the allocation; the old wheel entry is cancelled, the next poll adds one.
            Some(s) => s.get_mut().0.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// Implements [`hyper::rt::Executor`] by spawning each future as a spindle task
/// ([`crate::task::spawn_async`]) on the current runtime; the task is detached (its handle
/// dropped), so it runs to completion on its own, as hyper expects.
#[derive(Debug, Clone, Copy, Default)]
pub struct Executor;

impl<F> hyper::rt::Executor<F> for Executor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        drop(crate::task::spawn_async(future));
    }
}
