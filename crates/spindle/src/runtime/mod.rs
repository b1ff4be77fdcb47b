//! The runtime: worker threads started when it is built, each an event loop running fibers
//! and tasks; and what a user holds of it ([`Runtime`], [`Handle`], [`Builder`]). A
//! [`LocalRuntime`] (module `local`) has no worker thread: its one worker is the thread in
//! its `block_on`.
//!
//! M:N: `worker_threads` workers, all started when the runtime is built, each an event loop
//! with its own run queue, reactor, timers and stack pool (module `sched`). New fibers carry
//! no owner until their first run, so any worker may start them: a spawn stays on the
//! spawning worker while every worker is busy, and goes to the shared injector (waking one
//! idle worker) when some worker is idle. A started fiber is resumed only by its owner.
//!
//! Shutdown (dropping the [`Runtime`]): module `multi_thread`.

pub(crate) mod block_on;
mod builder;
mod deadlock;
mod dump;
pub(crate) mod handle;
mod local;
mod multi_thread;
pub(crate) mod services;
mod spawn;

pub use block_on::{Async, BlockOn, Closure};
pub use builder::Builder;
pub use handle::{Handle, RuntimeClosed};
pub use local::LocalRuntime;
pub use multi_thread::Runtime;
