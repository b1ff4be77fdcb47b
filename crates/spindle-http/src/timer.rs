//! hyper's timer on spindle's timer wheel.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Implements [`hyper::rt::Timer`] with spindle's timer futures (each worker's timer wheel),
/// so that hyper's `header_read_timeout` works on spindle. The sleeps it returns must be
/// polled on a spindle worker (a fiber or a spindle task), as every spindle timer future.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpindleTimer;

/// A [`spindle::time::Sleep`] as a [`hyper::rt::Sleep`].
#[derive(Debug)]
pub struct HyperSleep(spindle::time::Sleep);

impl Future for HyperSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for SpindleTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(spindle::time::sleep_future(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(spindle::time::sleep_until_future(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            // Reuses the allocation; the old wheel entry is cancelled, the next poll adds one.
            Some(s) => s.get_mut().0.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}
