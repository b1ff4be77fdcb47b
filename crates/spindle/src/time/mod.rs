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

mod clock;
mod interval;
mod paused;
mod sleep;
pub(crate) mod timeout;

pub use clock::{deadline_after, deadline_from, now, NEVER};
pub use interval::{interval, interval_at, Interval, MissedTickBehavior, Tick};
pub use paused::{advance, advance_async, is_paused, pause, resume};
pub use sleep::{sleep, sleep_future, sleep_until, sleep_until_future, Sleep};
pub use timeout::{timeout, timeout_fiber, Elapsed, Timeout};
