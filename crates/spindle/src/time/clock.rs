//! The runtime's clock as `time` offers it: [`now`], and deadlines that never overflow
//! ([`NEVER`], [`deadline_after`], [`deadline_from`]; the `time` module doc, "The clock").

use std::time::{Duration, Instant};

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
