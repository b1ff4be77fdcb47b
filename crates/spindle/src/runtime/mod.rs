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
//! Shutdown (dropping the [`Runtime`]): each worker stops taking new work, cancels fibers that
//! never started (their join handles get a cancelled [`JoinError`](crate::JoinError)) and
//! resumes every started fiber with its cancel flag set, so it unwinds from its suspension
//! point (`park`, `yield_now`, a blocking channel operation) and runs its destructors. Fibers
//! that only switch among themselves (yield loops, endless ping-pong) see the shutdown within
//! a few dozen switches. Fibers spawned during shutdown (from a destructor) are cancelled
//! too, even when pinned to a worker that has already stopped. A fiber that never reaches a
//! suspension point (an endless computation) keeps the drop from returning, as a thread that
//! never ends keeps `join` from returning.

pub(crate) mod block_on;
mod builder;
mod deadlock;
mod dump;
pub(crate) mod handle;
mod local;
mod multi_thread;
mod spawn;
mod tokio_context;

pub use block_on::{Async, BlockOn, Closure};
pub use builder::Builder;
pub use handle::{Handle, RuntimeClosed};
pub use local::LocalRuntime;
pub use multi_thread::Runtime;
