//! Timers: `sleep`, `timeout`, [`interval`], and the runtime's clock, for fibers and futures.
//!
//! In a fiber, [`sleep`] parks the fiber; on a plain thread it is `std::thread::sleep`. The
//! futures [`Sleep`], [`Timeout`] and [`Interval`]'s ticks register with the worker that polls
//! them; polling them outside a spindle worker panics with a message saying so. A timer never
//! fires early: deadlines round up to the next millisecond.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = spindle::Runtime::new().unwrap();
//! rt.block_on(|| {
//!     let mut ticks = spindle::time::interval(Duration::from_millis(2));
//!     ticks.tick(); // the first tick completes at once
//!     ticks.tick(); // 2 ms later
//!     let slow = spindle::spawn(|| spindle::time::sleep(Duration::from_secs(60)));
//!     let slow = slow.join_timeout(Duration::from_millis(5)).unwrap_err();
//!     slow.abort();
//! });
//! ```
//!
//! # The clock
//!
//! Deadlines are `std::time::Instant`s read from the runtime's clock, [`now`]: the real
//! clock, unless the runtime's time is paused ([`pause`], [`advance`],
//! [`Builder::start_paused`](crate::Builder::start_paused),
//! `#[spindle::test(start_paused = true)]`), for tests of timing logic that run at once and
//! never depend on how fast the machine is. Code that computes a deadline itself reads
//! [`now`] (not `Instant::now()`, which stays the real clock) when it should follow paused
//! time.
//!
//! A duration too long for an `Instant` (`Duration::MAX`) means "never": the deadline becomes
//! [`NEVER`] from now (about 35,000 years), which no process lives to see, instead of an
//! overflow panic. [`deadline_after`] and [`deadline_from`] apply the same rule for code
//! that turns a configured duration into a deadline itself.

// Invariant (module `reactor::wheel`): the wheel fires a timer at its own deadline however
// far away it is, never before, so a waiter whose timer fired may take its deadline as
// passed: `Sleep`, `sleep` and socket waits arm one timer per wait and rely on that. Every
// deadline armed on a worker's wheel is on the runtime's clock (module `sched::clock`).

mod interval;
mod paused;

pub use interval::{interval, interval_at, Interval, MissedTickBehavior, Tick};
pub use paused::{advance, advance_async, is_paused, pause, resume};

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

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

/// How far from now a deadline lies whose duration is too long for an `Instant`: 2^40 s,
/// about 35,000 years, so that code may still add to it.
///
/// Also the cap for a duration handed to code that adds it to an `Instant` itself (hyper's
/// builders, say): `timeout.min(NEVER)` keeps a configured `Duration::MAX` ("no limit") from
/// panicking there, and changes no duration shorter than 35,000 years.
pub const NEVER: Duration = Duration::from_secs(1 << 40);

/// The deadline `duration` from now, or [`NEVER`] from now if that is too far for an
/// `Instant` (see the module doc): `Instant::now() + duration` without the overflow panic,
/// for durations a user configures, where `Duration::MAX` means "no limit". (Inside spindle,
/// the blocking waits that take an `Option`, where `None` means "no deadline", use
/// `park::wait::deadline_in` instead.) On the runtime's clock ([`now`]).
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let soon = spindle::time::deadline_after(Duration::from_secs(1));
/// assert!(soon > Instant::now()); // not paused here: the real clock
/// // `Instant::now() + Duration::MAX` would panic; this is a deadline nobody lives to see.
/// let never = spindle::time::deadline_after(Duration::MAX);
/// assert!(never >= soon + Duration::from_secs(1 << 39));
/// ```
pub fn deadline_after(duration: Duration) -> Instant {
    deadline_from(now(), duration)
}

/// The current instant on the runtime's clock: `Instant::now()`, unless the time of the
/// runtime whose fiber or task calls it is paused (see the module doc): then the paused
/// clock's reading. Off a spindle worker (a plain thread, the blocking pool) it is always
/// `Instant::now()`. tokio's `tokio::time::Instant::now()`; the instants are std's.
///
/// ```
/// use std::time::Duration;
///
/// let rt = spindle::Builder::new().build_local().unwrap();
/// rt.block_on(|| {
///     spindle::time::pause();
///     let t0 = spindle::time::now();
///     spindle::time::advance(Duration::from_secs(5));
///     assert_eq!(spindle::time::now() - t0, Duration::from_secs(5));
/// });
/// ```
#[inline]
pub fn now() -> Instant {
    crate::sched::clock::now()
}

/// [`deadline_after`] from a given `now` (an idle connection's deadline from the moment it
/// went idle, say).
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let idle_since = Instant::now();
/// let expires = spindle::time::deadline_from(idle_since, Duration::MAX);
/// assert_eq!(expires, idle_since + spindle::time::NEVER);
/// ```
pub fn deadline_from(now: Instant, duration: Duration) -> Instant {
    now.checked_add(duration).unwrap_or_else(|| now + NEVER)
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
