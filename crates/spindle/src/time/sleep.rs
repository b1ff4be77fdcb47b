//! Sleeping: [`sleep`] and [`sleep_until`] park a fiber (or sleep a thread) until a deadline;
//! [`Sleep`] is the future that completes at one.

// Invariant (module `reactor::wheel`): the wheel fires a timer at its own deadline however
// far away it is, never before, so a waiter whose timer fired may take its deadline as
// passed: `Sleep`, `sleep` and socket waits arm one timer per wait and rely on that. Every
// deadline armed on a worker's wheel is on the runtime's clock (module `sched::clock`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::clock::{deadline_after, now};
use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::worker;
use crate::sched::worker::TimerHandle;

/// Suspends the caller for at least `duration` (`Duration::MAX`: forever, see the module doc):
/// parks the fiber, or sleeps the thread.
///
/// # Panics
///
/// In an async task on a spindle worker, where it would stall the whole worker: use
/// [`sleep_future`]`(duration).await` there.
#[track_caller]
pub fn sleep(duration: Duration) {
    sleep_until(deadline_after(duration));
}

/// Suspends the caller until `deadline` (returns at once if it has passed).
///
/// # Panics
///
/// In an async task on a spindle worker: use [`sleep_until_future`]`(deadline).await` there.
#[track_caller]
pub fn sleep_until(deadline: Instant) {
    let worker = match blocking_caller("sleep") {
        Caller::Fiber(worker) => worker,
        Caller::Thread => {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            return;
        }
    };
    if now() >= deadline {
        return;
    }
    let key = worker.add_timer(deadline, crate::park::fiber_waker(worker));
    // Cancels the timer on every way out, including the unwinding of a cancelled fiber.
    struct Cancel(TimerHandle);
    impl Drop for Cancel {
        fn drop(&mut self) {
            if let Some(worker) = worker::current() {
                worker.cancel_timer(self.0);
            }
        }
    }
    let _cancel = Cancel(key);
    while now() < deadline {
        crate::park::park_on("sleep");
    }
}

/// A future that completes at a deadline. Created by [`sleep_future`] / [`sleep_until_future`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: Instant,
    timer: Option<(TimerHandle, std::task::Waker)>,
}

/// A future that completes after `duration` (never, for a duration too long for an
/// `Instant`: see the module doc).
pub fn sleep_future(duration: Duration) -> Sleep {
    sleep_until_future(deadline_after(duration))
}

/// A future that completes at `deadline`.
pub fn sleep_until_future(deadline: Instant) -> Sleep {
    Sleep { deadline, timer: None }
}

impl Sleep {
    /// When the future completes (on the runtime's clock).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the deadline (the pending timer, if any, is replaced).
    pub fn reset(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
    }

    fn cancel(&mut self) {
        if let Some((key, _)) = self.timer.take() {
            if let Some(worker) = worker::current() {
                worker.cancel_timer(key);
            }
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some((timer, waker)) = &self.timer {
            // Polled again on the worker whose wheel holds the timer, before the wheel fired
            // it (a wake-up for something else, or a spurious one): it will fire and wake this
            // same task, so keep waiting without reading the clock (module
            // `sched::worker::timers`, "the wheel knows what it fired"). A clock read costs as
            // much as the rest of this poll; a server polls its idle timer at every request.
            if waker.will_wake(cx.waker())
                && worker::current().is_some_and(|w| w.timer_not_due(*timer, self.deadline))
            {
                return Poll::Pending;
            }
        }
        if now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        if let Some((_, waker)) = &self.timer {
            if waker.will_wake(cx.waker()) {
                return Poll::Pending; // the registered timer will wake this same task
            }
        }
        self.cancel();
        let worker = worker::current().expect(
            "a spindle timer future was polled outside a spindle worker; poll it in a fiber or a spindle task",
        );
        let key = worker.add_timer(self.deadline, cx.waker().clone());
        self.timer = Some((key, cx.waker().clone()));
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}
