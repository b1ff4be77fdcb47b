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
//! [`sync`] has the primitives a Go or tokio user reaches for (channels, rendezvous channels
//! included, [`select!`], Mutex, RwLock, Condvar, Semaphore, Notify, Barrier, WaitGroup,
//! broadcast, watch, [`CancellationToken`](sync::CancellationToken)), each blocking in
//! fibers, with a timeout, and awaitable in tasks; [`fiber_local!`] and [`task_local!`] keep
//! per-fiber and per-task state; [`task::JoinSet`], [`join!`] and [`join_fibers!`] wait for
//! several things at once; [`time`] has sleeps, timeouts, intervals and a clock that tests
//! pause; [`Runtime::block_on`] takes a closure or a future, and `#[spindle::main]` /
//! `#[spindle::test]` wrap a function in it. [`net`] has sockets, [`fs`] files and
//! directories (run on the blocking pool), [`process`] child processes (waited for through a
//! pidfd), all blocking-style in fibers and awaitable in tasks.
//!
//! Most calls come in two forms: a blocking-style one for fibers (`recv`, `lock`, `join`,
//! `tick`, `select!`) and an async one for tasks, named `_async` or returning a future
//! (`recv_async`, `lock_async`, `.await` on a join handle, `tick_async`, `select_async!`).
//!
//! # Rules for code on a worker
//!
//! A worker thread runs many fibers and tasks in turn: whatever blocks the thread blocks all
//! of them.
//!
//! 1. **Wait only through spindle.** Its channels, locks, timers, sockets, joins and
//!    [`task::block_on`] park the fiber; [`fs`] and [`process`] run files and child processes
//!    on the blocking pool while the fiber parks. Without the `hook` feature,
//!    `std::thread::sleep` and `std::net` block the worker; with or without it,
//!    `std::sync::mpsc::Receiver::recv`, `std::sync::Condvar::wait` and blocking DNS calls do.
//!    Move other blocking work to [`spawn_blocking`].
//! 2. **No foreign blocking executor in a fiber.** `futures::executor::block_on`,
//!    `tokio::runtime::Runtime::block_on` and the like block the thread while the wake-up
//!    they wait for may need this very worker: a deadlock. Use [`task::block_on`] (it parks
//!    the fiber) or await in a task; crates that need a tokio runtime go through the bridge
//!    of the `tokio-compat` feature.
//! 3. **Blocking-style calls belong in fibers.** In an async task use the async forms; a
//!    blocking-style call in a task panics with a message naming the one to use.
//! 4. **Thread-locals belong to the worker, not to the fiber.** Every fiber on a worker sees
//!    the same `thread_local!` values: keep per-fiber state in [`fiber_local!`], and never
//!    hold a `RefCell` borrow of a thread-local across a park.
//! 5. **No std lock guard across a park.** A `std::sync::Mutex` guard held while the fiber
//!    parks blocks every other fiber that wants the lock, and can deadlock the worker against
//!    itself. Hold std locks for short sections, or use [`sync::Mutex`], whose guard may be
//!    held across parks and `.await`s. Mark such a section with [`fiber::no_park`]: a park
//!    inside it then panics, naming it.
//! 6. **No long computation without a suspension point.** A fiber that never parks or yields
//!    cannot be cancelled and starves its worker: call [`yield_now`] in long loops, or move
//!    the work to [`spawn_blocking`]. The runtime's watchdog warns about a fiber or task that
//!    holds its worker past [`Builder::long_running_budget`], and hands the worker's fibers
//!    that have not started yet to the other workers.
//!
//! # Thread-local context in fibers
//!
//! A worker thread runs many fibers in turn, and a fiber never changes thread: so a
//! `thread_local!` is shared by every fiber of a worker, and whatever a fiber leaves in one
//! when it parks is seen by the next fiber that runs there. The rule:
//!
//! - **Per-fiber state goes in [`fiber_local!`]**, not in `thread_local!`.
//! - **Context that a library keeps per thread must not stay set across a park**: a
//!   `RefCell` borrow, a std lock guard, a tokio `Handle::enter` guard, a scoped default
//!   subscriber (`tracing::subscriber::set_default`), a logger's scope. Set it and take it down
//!   between two parks, or keep it outside the fibers (set the subscriber globally; build the
//!   tokio context into the runtime with the `tokio-compat` feature). Mark such a section with
//!   [`fiber::no_park`] and a park inside it panics, naming it.
//! - **tracing's current span is the exception** (feature `tracing`): spindle saves the spans
//!   a fiber entered when it parks and enters them again when it resumes, so
//!   `let _e = span.enter();` across a park is correct and each fiber sees only its own spans;
//!   a fiber inherits its spawner's span (`fiber::Builder::instrument` gives another), and
//!   tasks keep theirs through tracing's `Instrument`, as on tokio. This needs a subscriber
//!   that tracks the current span (tracing-subscriber's `Registry`, under `fmt` and most
//!   layers). The subscriber's `enter`/`exit` callbacks then run at every switch of a fiber
//!   that has spans entered: they must not park.
//!
//! # Misuse that is reported, not hung
//!
//! A fiber joining itself panics at once; a fiber that parks while holding a
//! [`fiber::no_park`] marker or a `watch::Ref` panics, naming it; a blocking-style call from
//! an async task panics naming the async form (in debug builds even when it would not have
//! waited); a runtime whose every fiber waits for what nothing can bring (a join cycle, a lost
//! wake-up, a sender kept but never used) fails its `block_on` with the fiber dump, as Go's
//! "all goroutines are asleep - deadlock!", when that is provable (no thread outside the
//! runtime exists that could wake it); and the watchdog names a worker held by a computation
//! or a foreign blocking call (a std lock: `futex`), on every runtime flavour.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_debug_implementations)]

pub mod blocking;
#[cfg(feature = "tokio-compat")]
pub mod compat;
mod error;
pub mod fiber;
pub mod fs;
pub mod graceful;
#[cfg(feature = "hook")]
mod hook;
#[cfg(feature = "hyper")]
pub mod hyper_exec;
#[cfg(feature = "hyper")]
pub mod hyper_rt;
mod lock;
mod loom;
#[cfg(feature = "native-roots")]
pub mod native_roots;
pub mod net;
pub(crate) mod park;
pub mod process;
pub(crate) mod reactor;
mod report;
pub mod runtime;
mod sched;
mod services;
pub mod shutdown;
pub mod signal;
pub mod sync;
pub(crate) mod sys;
pub mod task;
pub mod time;
mod trace;

pub use error::{CancelReason, Cancelled, JoinError};
pub use fiber::{spawn, yield_now, JoinHandle};
pub use runtime::{BlockOn, Builder, Handle, LocalRuntime, Runtime, RuntimeClosed};
pub use sched::metrics::{FiberInfo, WorkerMetrics};
pub use sched::DEFAULT_STACK_SIZE;
/// `#[spindle::main]`: runs `main` (plain or `async`) on a new runtime.
///
/// ```
/// #[spindle::main(flavor = "local", start_paused = true)]
/// async fn main() {
///     let start = spindle::time::now();
///     spindle::time::sleep_future(std::time::Duration::from_secs(1)).await;
///     assert_eq!(spindle::time::now() - start, std::time::Duration::from_secs(1));
/// }
/// ```
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
    let services = services::services()
        .expect("spindle::spawn_blocking called outside a spindle runtime; use Runtime::spawn_blocking");
    services.blocking.spawn(f)
}

/// The repository README's Rust examples, compiled (and run, unless marked `no_run`) as
/// doctests of this crate.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// Internals exposed for spindle's own benchmarks; not a public API.
#[doc(hidden)]
pub mod __private {
    /// Times `n` raw context-switch round trips (resume + suspend) outside the scheduler.
    pub fn raw_switch_round_trips(n: u64) -> std::io::Result<std::time::Duration> {
        crate::fiber::arch::raw_round_trips(n)
    }
}
