//! A runtime's clock: the real monotonic clock, or, in tests, a clock that is paused, moved
//! by hand and moved by itself to the next timer when nothing else can happen (module
//! `time`: `pause`, `advance`, `resume`, `Builder::start_paused`).
//!
//! Every reading that a timer is compared with goes through [`now`]: the deadlines of
//! `time::sleep`, of `Sleep`, of the `_timeout` waits (module `park`), of socket waits, and the
//! `now` that a worker's timer wheel is advanced to (module `sched::worker::timers`). So one
//! runtime's timers all live on its clock.
//!
//! # Invariants
//!
//! - **Real until shifted.** A clock reads `Instant::now()` until it is first paused; from then
//!   on it is *shifted* for good (`shifted`, set once and never cleared) and reads its own
//!   state. The process counts its shifted clocks (`SHIFTED_CLOCKS`), so that [`now`] costs
//!   one relaxed load more than `Instant::now()` while no runtime has ever paused time.
//! - **Monotonic.** A shifted clock reads `base` while paused, and `base + (real now -
//!   base_real)` while running: `pause` freezes the running reading, `resume` starts running
//!   from the frozen one, and `advance` only moves `base` forward. So no reading is earlier
//!   than one before it, and a timer wheel advanced to the clock's readings never goes back.
//! - **On the wheel's grid.** Pausing rounds the frozen reading up to a whole millisecond since
//!   [`epoch`], the origin of every worker's timer wheel (module `reactor::wheel` counts ticks
//!   of 1 ms from its origin). A paused clock moved by whole milliseconds then lands exactly on
//!   the deadlines of whole-millisecond sleeps, so paused tests see exact durations.
//! - **One worker.** Only a runtime of one worker may pause its clock: that worker is the only
//!   one reading it, and its being idle is the whole runtime being idle (auto-advance).
//! - **Auto-advance only when nothing can happen but a timer.** The worker moves a paused
//!   clock to its next timer only when it has nothing runnable after a non-blocking look at
//!   its reactor, and no blocking-pool job of the runtime is in flight (`jobs`: a job's end
//!   could wake a fiber before that timer is due). While a job runs, the worker looks again
//!   every `JOB_POLL` of real time instead of sleeping.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::lock::lock;
use crate::sched::worker;

/// Clocks of the process that have been paused at least once.
static SHIFTED_CLOCKS: AtomicUsize = AtomicUsize::new(0);

/// How often a worker whose clock is paused looks again while a blocking job is in flight.
pub(crate) const JOB_POLL: Duration = Duration::from_millis(1);

/// The origin of every timer wheel of the process: the first moment a worker asked for it.
pub(crate) fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `t` rounded up to a whole millisecond since [`epoch`] ("on the wheel's grid").
fn on_grid(t: Instant) -> Instant {
    let since = t.saturating_duration_since(epoch());
    let ms = since.as_nanos().div_ceil(1_000_000);
    epoch() + Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// The clock of the runtime whose worker runs the caller; the real clock anywhere else (a plain
/// thread, the blocking pool).
#[inline]
pub(crate) fn now() -> Instant {
    if SHIFTED_CLOCKS.load(Ordering::Relaxed) == 0 {
        return Instant::now();
    }
    match worker::current() {
        Some(w) => w.rt.clock.now(),
        None => Instant::now(),
    }
}

/// The deadline `timeout` from now on the runtime's clock; `None` (wait forever) if it is too
/// far to represent.
pub(crate) fn deadline_in(timeout: std::time::Duration) -> Option<Instant> {
    now().checked_add(timeout)
}

/// Why a clock could not be paused, resumed or advanced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClockError {
    /// The runtime has more than one worker.
    Workers,
    AlreadyPaused,
    NotPaused,
}

impl ClockError {
    pub(crate) fn message(self) -> &'static str {
        match self {
            ClockError::Workers => {
                "time can be paused only on a runtime of one worker (a LocalRuntime, worker_threads(1), \
                 or #[spindle::test(start_paused = true)])"
            }
            ClockError::AlreadyPaused => "time is already paused",
            ClockError::NotPaused => "time is not paused",
        }
    }
}

/// One runtime's clock (in `RuntimeShared`).
#[derive(Debug)]
pub(crate) struct Clock {
    /// Set at the first pause, never cleared ("real until shifted").
    shifted: AtomicBool,
    state: Mutex<State>,
    /// Blocking-pool jobs of the runtime in flight ("auto-advance only when nothing can happen
    /// but a timer").
    jobs: AtomicUsize,
    workers: usize,
}

#[derive(Debug)]
struct State {
    paused: bool,
    /// The clock's reading at `base_real`, and while paused.
    base: Instant,
    /// The real instant of the last pause or resume.
    base_real: Instant,
}

/// What a worker with timers and nothing else to do should do ([`Clock::on_idle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Idle {
    /// Sleep in the reactor until this real instant.
    SleepUntil(Instant),
    /// Paused: look at the reactor without blocking, then move the clock to the next timer if
    /// still nothing is runnable.
    AutoAdvance,
}

impl Clock {
    pub(crate) fn new(workers: usize, start_paused: bool) -> Clock {
        let real = Instant::now();
        let clock = Clock {
            shifted: AtomicBool::new(false),
            state: Mutex::new(State { paused: false, base: real, base_real: real }),
            jobs: AtomicUsize::new(0),
            workers,
        };
        if start_paused {
            clock.pause().expect("Builder checks the worker count of a paused start");
        }
        clock
    }

    /// Whether this clock has been paused at least once (otherwise it is the real clock).
    #[inline]
    pub(crate) fn is_shifted(&self) -> bool {
        self.shifted.load(Ordering::Relaxed)
    }

    pub(crate) fn now(&self) -> Instant {
        if !self.is_shifted() {
            return Instant::now();
        }
        lock(&self.state).at(Instant::now())
    }

    /// The clock's reading at the real instant `real` (a worker's own read of the real clock).
    pub(crate) fn at(&self, real: Instant) -> Instant {
        if !self.is_shifted() {
            return real;
        }
        lock(&self.state).at(real)
    }

    pub(crate) fn is_paused(&self) -> bool {
        self.is_shifted() && lock(&self.state).paused
    }

    pub(crate) fn pause(&self) -> Result<(), ClockError> {
        if self.workers > 1 {
            return Err(ClockError::Workers);
        }
        let mut state = lock(&self.state);
        if state.paused {
            return Err(ClockError::AlreadyPaused);
        }
        let real = Instant::now();
        let reading = if self.is_shifted() { state.at(real) } else { real };
        state.base = on_grid(reading);
        state.base_real = real;
        state.paused = true;
        if !self.shifted.swap(true, Ordering::Relaxed) {
            SHIFTED_CLOCKS.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    pub(crate) fn resume(&self) -> Result<(), ClockError> {
        let mut state = lock(&self.state);
        if !state.paused {
            return Err(ClockError::NotPaused);
        }
        state.paused = false;
        state.base_real = Instant::now();
        Ok(())
    }

    /// Moves a paused clock forward by `by`.
    pub(crate) fn advance(&self, by: Duration) -> Result<(), ClockError> {
        let mut state = lock(&self.state);
        if !state.paused {
            return Err(ClockError::NotPaused);
        }
        // A step too long for an `Instant` (`Duration::MAX`) goes 2^40 s ahead, as
        // `time::deadline_from` does.
        state.base = state.base.checked_add(by).unwrap_or(state.base + Duration::from_secs(1 << 40));
        Ok(())
    }

    /// Auto-advance: moves a paused clock forward to `to` if no blocking job is in flight (and
    /// `to` is later). Returns whether it moved.
    pub(crate) fn advance_to(&self, to: Instant) -> bool {
        let mut state = lock(&self.state);
        if !state.paused || self.jobs.load(Ordering::Acquire) > 0 || to <= state.base {
            return false;
        }
        state.base = to;
        true
    }

    /// What the idle worker should do about its next timer, due at `next` on this clock.
    pub(crate) fn on_idle(&self, next: Instant) -> Idle {
        if !self.is_shifted() {
            return Idle::SleepUntil(next);
        }
        let state = lock(&self.state);
        if !state.paused {
            // Running with an offset: the real instant at which the clock reads `next`.
            let ahead = next.saturating_duration_since(state.at(Instant::now()));
            return Idle::SleepUntil(Instant::now() + ahead);
        }
        if self.jobs.load(Ordering::Acquire) > 0 {
            return Idle::SleepUntil(Instant::now() + JOB_POLL);
        }
        Idle::AutoAdvance
    }

    /// A blocking-pool job of the runtime was queued: no auto-advance until it has ended.
    pub(crate) fn job_started(&self) {
        self.jobs.fetch_add(1, Ordering::AcqRel);
    }

    /// A blocking-pool job ended (ran, or was cancelled), before its result is published.
    pub(crate) fn job_finished(&self) {
        self.jobs.fetch_sub(1, Ordering::AcqRel);
    }
}

impl State {
    fn at(&self, real: Instant) -> Instant {
        if self.paused {
            self.base
        } else {
            self.base + real.saturating_duration_since(self.base_real)
        }
    }
}

impl Drop for Clock {
    fn drop(&mut self) {
        if *self.shifted.get_mut() {
            SHIFTED_CLOCKS.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_reads_frozen_on_the_grid_and_advances_exactly() {
        let clock = Clock::new(1, false);
        assert!(!clock.is_shifted());
        clock.pause().unwrap();
        let t0 = clock.now();
        assert_eq!(t0.saturating_duration_since(epoch()).subsec_nanos() % 1_000_000, 0);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(clock.now(), t0, "a paused clock does not move by itself");
        clock.advance(Duration::from_millis(10)).unwrap();
        assert_eq!(clock.now(), t0 + Duration::from_millis(10));
        assert_eq!(clock.pause(), Err(ClockError::AlreadyPaused));
        assert!(clock.advance_to(t0 + Duration::from_millis(30)));
        assert!(!clock.advance_to(t0), "never backwards");
        assert_eq!(clock.now(), t0 + Duration::from_millis(30));
    }

    #[test]
    fn resumed_runs_from_the_frozen_reading() {
        let clock = Clock::new(1, true);
        let t0 = clock.now();
        clock.advance(Duration::from_secs(3600)).unwrap();
        clock.resume().unwrap();
        let t1 = clock.now();
        assert!(t1 >= t0 + Duration::from_secs(3600));
        assert!(clock.now() >= t1, "monotonic");
        assert_eq!(clock.advance(Duration::from_secs(1)), Err(ClockError::NotPaused));
        assert_eq!(clock.resume(), Err(ClockError::NotPaused));
    }

    #[test]
    fn jobs_in_flight_hold_auto_advance() {
        let clock = Clock::new(1, true);
        let t0 = clock.now();
        clock.job_started();
        assert!(matches!(clock.on_idle(t0 + Duration::from_secs(1)), Idle::SleepUntil(_)));
        assert!(!clock.advance_to(t0 + Duration::from_secs(1)));
        clock.job_finished();
        assert_eq!(clock.on_idle(t0 + Duration::from_secs(1)), Idle::AutoAdvance);
    }

    #[test]
    fn only_one_worker_pauses() {
        assert_eq!(Clock::new(2, false).pause(), Err(ClockError::Workers));
    }
}
