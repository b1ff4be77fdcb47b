//! spindle: cheap concurrency for Linux.
//!
//! Fibers are stackful coroutines: code written in plain blocking style that parks the fiber,
//! not the thread, when it waits. A [`Runtime`] starts its worker threads when it is built;
//! each worker is an epoll event loop that switches between fibers with a few instructions of
//! hand-written assembly, and polls async tasks on the same loop.
//!
//! ```
//! use spindle::sync::channel;
//!
//! let rt = spindle::Runtime::new().unwrap();
//! let total = rt.block_on(|| {
//!     let (tx, rx) = channel(16);
//!     for i in 0..4u64 {
//!         let tx = tx.clone();
//!         spindle::spawn(move || tx.send(i).unwrap());
//!     }
//!     drop(tx);
//!     rx.iter().sum::<u64>()
//! });
//! assert_eq!(total, 6);
//! ```
//!
//! [`sync`] has the primitives a Go or tokio user reaches for (channels, [`select!`], Mutex,
//! RwLock, Condvar, Semaphore, Notify, Barrier, WaitGroup, broadcast, watch), each blocking in
//! fibers, with a timeout, and awaitable in tasks; [`fiber_local!`] keeps per-fiber state;
//! [`Runtime::block_on`] takes a closure or a future, and `#[spindle::main]` /
//! `#[spindle::test]` wrap a function in it. [`net`] has sockets, [`fs`] files and directories
//! (run on the blocking pool), [`process`] child processes (waited for through a pidfd), all
//! blocking-style in fibers and awaitable in tasks.
//!
//! See `docs/ARCHITECTURE.md` for the design, its soundness rules and the rules for code on a
//! worker.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_debug_implementations)]

pub mod blocking;
#[cfg(feature = "tokio-compat")]
pub mod compat;
mod error;
pub mod fiber;
pub mod fs;
#[cfg(feature = "hook")]
mod hook;
#[cfg(feature = "hyper")]
pub mod hyper_rt;
mod lock;
mod loom;
pub mod net;
pub(crate) mod park;
pub mod process;
pub(crate) mod reactor;
mod report;
pub mod runtime;
mod sched;
pub mod shutdown;
pub mod signal;
pub mod sync;
pub(crate) mod sys;
pub mod task;
pub mod time;

pub use error::{CancelReason, Cancelled, JoinError};
pub use fiber::{spawn, yield_now, JoinHandle};
pub use runtime::{BlockOn, Builder, Handle, LocalRuntime, Runtime, RuntimeClosed};
pub use sched::metrics::{FiberInfo, WorkerMetrics};
pub use sched::DEFAULT_STACK_SIZE;
/// `#[spindle::main]`: runs `main` (plain or `async`) on a new runtime (crate `spindle-macros`).
pub use spindle_macros::main;
/// `#[spindle::test]`: a `#[test]` (plain or `async`) run on a new runtime per test.
pub use spindle_macros::test;

/// Runs `f` on the current runtime's blocking thread pool, so that blocking code (file I/O,
/// a C library, a long computation) does not stall the worker. Join the handle from a fiber
/// (it parks) or `.await` it.
///
/// # Panics
///
/// Outside a spindle worker; use [`Runtime::spawn_blocking`] there.
pub fn spawn_blocking<F, T>(f: F) -> blocking::BlockingHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let services = runtime::services()
        .expect("spindle::spawn_blocking called outside a spindle runtime; use Runtime::spawn_blocking");
    services.blocking.spawn(f)
}

/// The repository README's Rust examples, compiled (and run, unless marked `no_run`) as
/// doctests of this crate.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// What spindle's macros expand to; not a public API.
#[doc(hidden)]
pub mod __support {
    pub use crate::task::join_macros::{JoinFibers, MaybeDone, TryJoinFibers};
}

/// Internals exposed for spindle's own benchmarks; not a public API.
#[doc(hidden)]
pub mod __private {
    /// Times `n` raw context-switch round trips (resume + suspend) outside the scheduler.
    pub fn raw_switch_round_trips(n: u64) -> std::io::Result<std::time::Duration> {
        crate::fiber::arch::raw_round_trips(n)
    }
}
