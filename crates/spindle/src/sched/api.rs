//! The scheduler as the layers above it see it: the one module through which `park` and
//! `sync` reach `sched` (tokio's `Schedule` trait plays this part there). Everything else in
//! `sched` is the scheduler's own business.
//!
//! What they need, and all they get:
//!
//! - who is calling ([`blocking_caller`], [`check_entry`]: a fiber parks, a thread blocks, an
//!   async task is told to await instead);
//! - the current worker ([`current_worker`]) and, through [`Worker`]'s methods, its running
//!   fiber (`current_fiber`, `in_fiber`), parking it (`park_current`) and its timers
//!   (`add_timer`, `cancel_timer`: [`TimerHandle`]);
//! - parking the caller, fiber or thread ([`park`]);
//! - the runtime's clock ([`now`], [`deadline_in`]).
//!
//! Waking a fiber needs nothing from here: [`unpark`](crate::fiber::waiter::unpark) (module
//! `fiber::waiter`) goes through the fiber's park word to its own worker.
//!
//! Invariant: **never block a worker** (module `sched::caller`): every wait that parks goes
//! through [`park`] or `Worker::park_current` after [`blocking_caller`] said it runs in a fiber.

use std::thread;

pub(crate) use super::caller::{blocking_caller, check_entry, Caller};
pub(crate) use super::clock::{deadline_in, now};
pub(crate) use super::worker::{current as current_worker, TimerHandle, Worker};

/// Parks the caller (fiber or thread) until woken, recording what a fiber waits for (shown by
/// `Runtime::dump_fibers`); may return spuriously.
///
/// # Panics
///
/// In an async task on a spindle worker (see `sched::caller`), naming the async alternative.
#[track_caller]
pub(crate) fn park(reason: &'static str) {
    crate::fiber::check_no_park(reason);
    match blocking_caller(reason) {
        Caller::Fiber(worker) => worker.park_current(reason),
        Caller::Thread => thread::park(),
    }
}
