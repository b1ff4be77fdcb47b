//! Park and wake: how fibers, tasks and plain threads wait, in one place.
//!
//! Every waiting operation of spindle (channels, locks, joins, sleeps, sockets) is written
//! once against this module: [`park_on`] / [`park_until`] suspend the caller, and a
//! [`Waiter`] (or a `Waker` made here) wakes it. Who waits decides what parking means:
//!
//! | caller | park | wake |
//! |---|---|---|
//! | a fiber | its worker switches to other work (`sched::worker::switch`) | [`unpark`]: the park word, then the fiber's own worker queues it |
//! | a plain thread | `std::thread::park` | `Thread::unpark` |
//! | an async task | never parks (blocking-style calls panic there, `sched::caller`) | its `Waker` |
//!
//! Submodules: [`wait_list`] (the FIFO of waiters a blocking primitive keeps under its lock),
//! [`waker_set`] (the wakers of futures waiting for one event, keyed so a dropped future takes
//! its waker out), [`completion`] (the one join cell of fibers, tasks and blocking jobs).
//!
//! Layering: this module sits above the fiber core and the scheduler. It reaches the
//! scheduler only through `sched::api` (who is calling, the current worker's park and timers,
//! the clock); the fiber's park word (module `fiber::park_word`), the [`Waiter`] and
//! [`unpark`] (module `fiber::waiter`) and the join cell (module `fiber::completion`) live
//! in the fiber layer, because every fiber's control block holds them.
//!
//! # Invariants
//!
//! - **The permit contract** and **one rescheduler** (module `fiber::park_word`, where the
//!   park word is modelled with loom): an unpark before the park leaves a permit, so no
//!   wake-up is lost; exactly one unparker queues a parked fiber again, on its own worker.
//!   Parks may return spuriously: every caller loops on its condition.
//! - **A timed park cleans up** (module `timed`): no stale timer wakes the fiber in a later
//!   park.
//! - **Never block a worker.** A blocking-style wait from code on a worker outside a fiber (an
//!   async task) panics, naming the async alternative (`sched::caller`).
//!
//! [`unpark`]: crate::fiber::waiter::unpark

pub(crate) mod block_on;
pub(crate) mod completion;
mod timed;
pub(crate) mod wait;
pub(crate) mod wait_list;
pub(crate) mod waker_set;
mod wakers;

pub(crate) use crate::fiber::waiter::Waiter;
/// Parks the caller (fiber or thread) until woken; may return spuriously (`sched::api::park`).
pub(crate) use crate::sched::api::park as park_on;
pub(crate) use timed::park_until;
pub(crate) use wait_list::{wake, WaitList, WaitNode};
pub(crate) use wakers::{current_waker, fiber_waker};
