//! [`Interval`]: ticks at a fixed period, blocking-style in fibers ([`Interval::tick`]) and
//! as a future or a `Stream` in tasks ([`Interval::tick_async`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::clock::{deadline_from, now};
use super::sleep::{sleep_until, sleep_until_future, Sleep};

/// How late a tick may be taken before it counts as missed (then [`MissedTickBehavior`]
/// applies): a timer fires up to a millisecond after its deadline, plus the time its fiber or
/// task waits for the worker.
const LATE: Duration = Duration::from_millis(5);

/// What an [`Interval`] does with ticks it missed because its owner was late to take them
/// (busy for longer than a period, say). tokio's `MissedTickBehavior`, same variants and
/// default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedTickBehavior {
    /// Takes the missed ticks one after another without waiting until it has caught up with
    /// the schedule, which stays `start + k * period` (the default).
    #[default]
    Burst,
    /// Starts a new schedule from the late tick: the next one comes a whole period after the
    /// moment the late one was taken.
    Delay,
    /// Drops the missed ticks and goes on with the next tick of the schedule that is still
    /// ahead.
    Skip,
}

impl MissedTickBehavior {
    /// The deadline after a tick that was due at `due` and taken at `taken`.
    fn next(self, due: Instant, taken: Instant, period: Duration) -> Instant {
        let on_time = deadline_from(due, period);
        if taken <= due + LATE {
            return on_time;
        }
        match self {
            MissedTickBehavior::Burst => on_time,
            MissedTickBehavior::Delay => deadline_from(taken, period),
            MissedTickBehavior::Skip => {
                // The first `due + k * period` later than `taken`.
                let late = taken - due;
                let periods = late.as_nanos() / period.as_nanos() + 1;
                let step = period.saturating_mul(u32::try_from(periods).unwrap_or(u32::MAX));
                deadline_from(due, step)
            }
        }
    }
}

/// Ticks at a fixed period: from [`interval`] or [`interval_at`].
///
/// A fiber waits for the next tick with [`tick`](Self::tick) (it parks); a task awaits
/// [`tick_async`](Self::tick_async), or reads the interval as a `futures_core::Stream` of tick
/// instants. Each tick returns the instant it was due at (on the runtime's clock,
/// [`time::now`](super::now)), not the instant it was taken.
#[derive(Debug)]
pub struct Interval {
    /// When the next tick is due.
    next: Instant,
    period: Duration,
    missed: MissedTickBehavior,
    /// The timer of a task's pending tick.
    sleep: Option<Sleep>,
}

/// Ticks every `period`, the first tick at once (tokio's `time::interval`).
///
/// ```
/// use std::time::Duration;
///
/// let rt = spindle::Builder::new().start_paused(true).build().unwrap();
/// rt.block_on(|| {
///     let start = spindle::time::now();
///     let mut every_second = spindle::time::interval(Duration::from_secs(1));
///     for k in 0..3 {
///         assert_eq!(every_second.tick(), start + Duration::from_secs(k));
///     }
/// });
/// ```
///
/// # Panics
///
/// If `period` is zero.
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    interval_at(now(), period)
}

/// Ticks every `period`, the first tick at `start`.
///
/// # Panics
///
/// If `period` is zero.
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(!period.is_zero(), "spindle::time::interval: the period must not be zero");
    Interval { next: start, period, missed: MissedTickBehavior::default(), sleep: None }
}

impl Interval {
    /// Waits for the next tick and returns the instant it was due at: parks a fiber, sleeps a
    /// plain thread.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`tick_async`](Self::tick_async) there.
    #[track_caller]
    pub fn tick(&mut self) -> Instant {
        self.sleep = None;
        sleep_until(self.next);
        self.take_tick()
    }

    /// The next tick, from async code: a future of the instant it was due at. Dropping it
    /// before it completes takes no tick.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// #[spindle::main(flavor = "local", start_paused = true)]
    /// async fn main() {
    ///     let mut interval = spindle::time::interval(Duration::from_millis(10));
    ///     let first = interval.tick_async().await;
    ///     let second = interval.tick_async().await;
    ///     assert_eq!(second - first, Duration::from_millis(10));
    /// }
    /// ```
    pub fn tick_async(&mut self) -> Tick<'_> {
        Tick { interval: self }
    }

    /// Polls for the next tick: `Ready` with the instant it was due at, or `Pending` with the
    /// task's waker registered for it.
    ///
    /// # Panics
    ///
    /// When it has to wait outside a spindle worker (a spindle timer needs one).
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        let next = self.next;
        let sleep = self.sleep.get_or_insert_with(|| sleep_until_future(next));
        match Pin::new(sleep).poll(cx) {
            Poll::Ready(()) => {
                self.sleep = None;
                Poll::Ready(self.take_tick())
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// The tick due at `self.next` is taken now: schedules the one after.
    fn take_tick(&mut self) -> Instant {
        let due = self.next;
        self.next = self.missed.next(due, now(), self.period);
        due
    }

    /// Starts the schedule again a period from now.
    pub fn reset(&mut self) {
        self.reset_at(deadline_from(now(), self.period));
    }

    /// Makes the next tick due at once, the schedule going on from now.
    pub fn reset_immediately(&mut self) {
        self.reset_at(now());
    }

    /// Makes the next tick due `after` from now.
    pub fn reset_after(&mut self, after: Duration) {
        self.reset_at(deadline_from(now(), after));
    }

    /// Makes the next tick due at `deadline`.
    pub fn reset_at(&mut self, deadline: Instant) {
        self.next = deadline;
        self.sleep = None;
    }

    /// When the next tick is due.
    pub fn next_tick(&self) -> Instant {
        self.next
    }

    pub fn period(&self) -> Duration {
        self.period
    }

    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed
    }

    /// Sets what the interval does with ticks it missed ([`MissedTickBehavior::Burst`] by
    /// default).
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }
}

/// The future of [`Interval::tick_async`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Tick<'a> {
    interval: &'a mut Interval,
}

impl Future for Tick<'_> {
    type Output = Instant;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Instant> {
        self.get_mut().interval.poll_tick(cx)
    }
}

/// An endless stream of tick instants, for async code ([`Interval::poll_tick`]).
impl futures_core::Stream for Interval {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        self.get_mut().poll_tick(cx).map(Some)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn missed_ticks() {
        let due = Instant::now();
        let period = 10 * MS;
        // On time (within LATE): the schedule goes on, whatever the behaviour.
        for b in [MissedTickBehavior::Burst, MissedTickBehavior::Delay, MissedTickBehavior::Skip] {
            assert_eq!(b.next(due, due + 2 * MS, period), due + period);
        }
        // 35 ms late: burst keeps the schedule, delay restarts from the taking, skip jumps to
        // the next tick still ahead.
        let taken = due + 35 * MS;
        assert_eq!(MissedTickBehavior::Burst.next(due, taken, period), due + period);
        assert_eq!(MissedTickBehavior::Delay.next(due, taken, period), taken + period);
        assert_eq!(MissedTickBehavior::Skip.next(due, taken, period), due + 40 * MS);
        // Late by exactly whole periods: skip still moves strictly ahead.
        assert_eq!(MissedTickBehavior::Skip.next(due, due + 20 * MS, period), due + 30 * MS);
    }
}
