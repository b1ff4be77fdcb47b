//! Time limits: [`timeout`] on a future, [`timeout_fiber`] on blocking-style code, and their
//! error [`Elapsed`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::clock::deadline_after;
use super::sleep::{sleep_future, Sleep};
use crate::sched::caller::{blocking_caller, Caller};

/// Runs `op` in a new fiber on the current worker and waits at most `duration` for it. On
/// time, returns its result (a panic in `op` resumes here). Past the deadline, the fiber is
/// cancelled (it unwinds at its next suspension point, running its destructors), this call
/// waits for that unwinding, and returns `Err(Elapsed)`. This is `timeout` for blocking-style
/// code; for futures, use [`timeout`].
///
/// # Panics
///
/// Outside a spindle runtime, and in an async task (use [`timeout`] on a future there).
#[track_caller]
pub fn timeout_fiber<F, T>(duration: Duration, op: F) -> Result<T, Elapsed>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    if let Caller::Thread = blocking_caller("timeout_fiber") {
        panic!("spindle::time::timeout_fiber called outside a spindle runtime");
    }
    let deadline = deadline_after(duration);
    let handle = crate::fiber::spawn(op);
    if !handle.wait_until(deadline) {
        handle.abort();
    }
    match handle.join() {
        Ok(v) => Ok(v),
        Err(err) if err.is_cancelled() => Err(Elapsed),
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// The error of a [`Timeout`] whose deadline passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, Elapsed)
    }
}

/// Runs `future` with a time limit: `Ok(output)`, or `Err(Elapsed)` if `duration` passes
/// first (the inner future is then dropped, which cancels it).
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout { future, sleep: sleep_future(duration) }
}

/// Future returned by [`timeout`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning: `future` is never moved out of the pinned Timeout, and
        // `sleep` is Unpin.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above; `this.future` stays where it is until the Timeout drops.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(v) = future.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match Pin::new(&mut this.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}
