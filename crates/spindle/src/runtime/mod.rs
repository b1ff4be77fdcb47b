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
pub(crate) mod handle;
mod local;

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;

pub use block_on::{Async, BlockOn, Closure};
pub use builder::Builder;
pub use handle::{Handle, RuntimeClosed};
pub use local::LocalRuntime;

use crate::blocking::BlockingPool;
use crate::error::Cancelled;
use crate::fiber::{self, JoinHandle};
use crate::sched::{metrics, worker, RuntimeShared};
use crate::shutdown::ShutdownToken;

/// A spindle runtime: its worker threads run fibers and tasks until the runtime is dropped.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let sum = rt.block_on(|| {
///     let handles: Vec<_> = (0..10u64).map(|i| spindle::spawn(move || i * i)).collect();
///     handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
/// });
/// assert_eq!(sum, 285);
/// ```
#[derive(Debug)]
pub struct Runtime {
    shared: Arc<RuntimeShared>,
    services: Arc<Services>,
    threads: Vec<thread::JoinHandle<()>>,
    watchdog: Option<(StopSignal, thread::JoinHandle<()>)>,
}

use metrics::StopSignal;

/// Spawning from outside a worker (`fiber::Builder::spawn_on`) lives here, beside the
/// runtime it needs, so that module `fiber` does not depend on this one.
impl fiber::Builder {
    /// Spawns the fiber on `runtime`, from any thread.
    #[track_caller]
    pub fn spawn_on<F, T>(self, runtime: &Runtime, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn_fiber_on(&runtime.shared, self, f)
    }
}

/// Spawns a fiber on `rt` from any thread: on the worker chosen with `Builder::worker`, else
/// through the injector (any idle worker may start it).
#[track_caller]
pub(crate) fn spawn_fiber_on<F, T>(
    rt: &RuntimeShared,
    builder: fiber::Builder,
    f: F,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let target = builder.target_worker();
    let (fiber, output) = builder.build(f, rt.config.stack_size, target.is_some(), None)?;
    match target {
        Some(i) => rt.place_pinned(i, fiber),
        None => rt.inject_fiber(fiber),
    }
    Ok(JoinHandle::new(output))
}

/// What a runtime offers besides its workers: the blocking pool and the shutdown token.
/// Workers reach it through a thread-local set when their thread starts ([`services`]), so the
/// scheduler (module `sched`) never depends on these modules.
#[derive(Debug)]
pub(crate) struct Services {
    pub(crate) blocking: Arc<BlockingPool>,
    /// The pool of file system calls (`Builder::max_file_threads`).
    pub(crate) files: Arc<BlockingPool>,
    pub(crate) shutdown: ShutdownToken,
    /// Whether the workers enter the tokio bridge's context (`Builder::tokio_context`).
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio_context: bool,
}

/// The tokio bridge's context entered on this thread while the guard lives, when the runtime
/// asks for it (feature `tokio-compat`, module `compat`); nothing otherwise.
#[cfg(feature = "tokio-compat")]
fn enter_tokio(services: &Services) -> Option<tokio::runtime::EnterGuard<'static>> {
    services.tokio_context.then(crate::compat::enter_context)
}

/// Without the feature: nothing to enter (a guard that guards nothing, so that callers hold
/// it the same way).
#[cfg(not(feature = "tokio-compat"))]
fn enter_tokio(_: &Services) -> NoTokio {
    NoTokio
}

/// The guard [`enter_tokio`] gives without the `tokio-compat` feature.
#[cfg(not(feature = "tokio-compat"))]
struct NoTokio;

std::thread_local! {
    static SERVICES: std::cell::RefCell<Option<Arc<Services>>> = const { std::cell::RefCell::new(None) };
}

/// Called first on each worker thread.
fn enter_worker(services: Arc<Services>) {
    crate::shutdown::enter_worker(services.shutdown.clone());
    SERVICES.with(|s| *s.borrow_mut() = Some(services));
}

/// Makes `services` this thread's for as long as the guard lives, then puts back what the
/// thread had (a [`LocalRuntime`]'s thread is its worker only inside `block_on`).
fn enter_services(services: Arc<Services>) -> ServicesGuard {
    let token = crate::shutdown::swap_current(Some(services.shutdown.clone()));
    let services = SERVICES.with(|s| s.replace(Some(services)));
    ServicesGuard { services, token }
}

/// What [`enter_services`] replaced.
struct ServicesGuard {
    services: Option<Arc<Services>>,
    token: Option<ShutdownToken>,
}

impl Drop for ServicesGuard {
    fn drop(&mut self) {
        crate::shutdown::swap_current(self.token.take());
        SERVICES.with(|s| *s.borrow_mut() = self.services.take());
    }
}

/// The `block_on` fiber's result: its value, or its panic resumed on the caller (both
/// runtimes' `block_on`).
fn join_block_on<T>(handle: JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// Every started, unfinished fiber of `rt`: each worker lists its own, in a task on its
/// loop (`Runtime::dump_fibers`, `Handle::dump_fibers`).
///
/// # Panics
///
/// On the thread of a local runtime outside its `block_on`: nothing would run the tasks
/// (`LocalRuntime::dump_fibers` lists them directly).
pub(crate) fn dump_fibers(rt: &RuntimeShared) -> Vec<metrics::FiberInfo> {
    let here = thread::current().id();
    assert!(
        worker::current().is_some() || !rt.workers.iter().any(|w| w.thread.get() == Some(&here)),
        "Handle::dump_fibers called on a LocalRuntime's thread outside its block_on: nothing runs \
         its worker there; use LocalRuntime::dump_fibers"
    );
    let handles: Vec<_> = rt
        .workers
        .iter()
        .map(|w| {
            crate::task::spawn_pinned(w.clone(), async {
                worker::current().map(|w| w.dump()).unwrap_or_default()
            })
        })
        .collect();
    handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
}

/// The services of the runtime whose worker runs the caller, if the caller is on a worker.
pub(crate) fn services() -> Option<Arc<Services>> {
    SERVICES.with(|s| s.borrow().clone())
}

impl Runtime {
    /// A runtime with the default settings.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// Runs `body` on this runtime and blocks the calling thread until it is done, then returns
    /// its result. `body` is a closure (run as a fiber, in blocking style) or a future (polled
    /// in a fiber, so it may also call blocking-style code); see [`BlockOn`]. A panic in it
    /// resumes on the caller.
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// assert_eq!(rt.block_on(|| 1 + 1), 2);
    /// assert_eq!(rt.block_on(async { spindle::task::yield_now().await; 3 }), 3);
    /// ```
    ///
    /// # Panics
    ///
    /// When called from a fiber of this same runtime (that would block the worker the fiber
    /// waits for): spawn and join instead. When the runtime is asleep for good (every fiber
    /// and task waits with no timer, no I/O and no thread outside the runtime that could wake
    /// them: a join cycle, a lost wake-up, a sender kept but never used), with the fiber dump
    /// (also printed on stderr), as Go's "all goroutines are asleep - deadlock!" (the rule:
    /// `docs/ARCHITECTURE.md`, "Deadlocks and misuse").
    #[track_caller]
    pub fn block_on<M, B: BlockOn<M>>(&self, body: B) -> B::Output {
        if let Some(worker) = worker::current() {
            assert!(
                worker.shared.runtime_id != self.shared.id,
                "Runtime::block_on called from a fiber of the same runtime; spawn a fiber and join it instead"
            );
        }
        let handle = fiber::Builder::new()
            .name("block_on")
            .spawn_on(self, move || body.run())
            .expect("spawn the block_on fiber");
        deadlock::wait_block_on(&self.shared, handle)
    }

    /// Spawns a fiber on this runtime from any thread.
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        fiber::Builder::new().spawn_on(self, f).expect("spawn a fiber with the runtime's default settings")
    }

    /// Spawns `future` as an async task on this runtime, from any thread. The handle is a
    /// future of the task's result and can abort it.
    pub fn spawn_async<F>(&self, future: F) -> crate::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::task::spawn_on(self.shared.clone(), future)
    }

    /// Runs `f` on the runtime's blocking thread pool; the handle can be joined from a fiber
    /// (parks it) or a thread, or awaited.
    pub fn spawn_blocking<F, T>(&self, f: F) -> crate::blocking::BlockingHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.services.blocking.spawn(f)
    }

    /// A snapshot of every worker's counters.
    pub fn metrics(&self) -> Vec<metrics::WorkerMetrics> {
        self.shared.workers.iter().map(|w| w.stats.snapshot(w.index, self.shared.started)).collect()
    }

    /// Every started, unfinished fiber of the runtime: id, name, owner worker and what it is
    /// parked on. Each worker lists its own fibers (in a task on its loop), so the call waits
    /// for every worker to get there: from a fiber it parks, from a thread it blocks.
    pub fn dump_fibers(&self) -> Vec<metrics::FiberInfo> {
        dump_fibers(&self.shared)
    }

    /// A cheap, cloneable handle that spawns on this runtime from any thread (module docs of
    /// [`Handle`]).
    pub fn handle(&self) -> Handle {
        Handle::new(self.shared.clone(), self.services.clone())
    }

    /// The runtime's shutdown token: servers and loops on the runtime watch it (inside the
    /// runtime, [`shutdown::token`](crate::shutdown::token) returns the same token), and
    /// [`shutdown_timeout`](Self::shutdown_timeout) triggers it.
    pub fn shutdown_token(&self) -> crate::shutdown::ShutdownToken {
        self.services.shutdown.clone()
    }

    /// Shuts the runtime down gracefully: triggers its [shutdown token](Self::shutdown_token),
    /// waits until the work tracked with [`ShutdownToken::track`](crate::shutdown::ShutdownToken::track)
    /// has finished or `timeout` has passed, then stops the runtime, cancelling every fiber
    /// and task still there (fibers unwind at their next suspension point, running their
    /// destructors; join handles report `Cancelled`). Returns true if the tracked work
    /// drained in time.
    ///
    /// # Panics
    ///
    /// When called from a fiber of this same runtime (it would wait for itself).
    pub fn shutdown_timeout(self, timeout: std::time::Duration) -> bool {
        if let Some(worker) = worker::current() {
            assert!(
                worker.shared.runtime_id != self.shared.id,
                "Runtime::shutdown_timeout called from a fiber of the same runtime; call it from the thread that owns the runtime"
            );
        }
        let token = self.services.shutdown.clone();
        token.trigger();
        // A timeout too long for an `Instant` waits without a deadline.
        let drained = token.wait_drained(crate::park::wait::deadline_in(timeout));
        drop(self);
        drained
    }

    /// Number of worker threads.
    pub fn worker_threads(&self) -> usize {
        self.shared.workers.len()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // From now on spawns through a Handle fail instead of queueing work nobody will run.
        *self.shared.spawn_gate.write().unwrap_or_else(|e| e.into_inner()) = true;
        if let Some((stop, handle)) = self.watchdog.take() {
            *crate::lock::lock(&stop.0) = true;
            stop.1.notify_all();
            let _ = handle.join();
        }
        for w in &self.shared.workers {
            w.request_shutdown();
        }
        if let Some(io) = &self.shared.io {
            io.driver.close();
        }
        let mut panicked = false;
        for thread in self.threads.drain(..) {
            panicked |= thread.join().is_err();
        }
        self.services.blocking.shutdown();
        self.services.files.shutdown();
        // Fibers injected but never taken by a worker, and pinned ones sent to a worker that
        // had already exited ("shutdown reaches every fiber"): complete them as cancelled.
        while let Some(fiber) = self.shared.steal_injected_fiber() {
            fiber.stage.abort_unstarted(&fiber.header, Box::new(Cancelled::SHUTDOWN));
        }
        for w in &self.shared.workers {
            for fiber in w.take_inbox() {
                if fiber.header.started() {
                    // Every started fiber finished in its worker's cancel_all; a stale entry
                    // can only be a wake-up of a finished fiber, which has nothing left to run.
                    debug_assert!(fiber.header.is_complete(), "a started fiber outlived its worker");
                } else {
                    fiber.stage.abort_unstarted(&fiber.header, Box::new(Cancelled::SHUTDOWN));
                }
            }
        }
        // Tasks likewise; from now on an injected task is cancelled by its injector.
        self.shared.closed.store(true, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.shared.cancel_injected_tasks();
        if panicked && !thread::panicking() {
            panic!("a spindle worker thread panicked");
        }
    }
}
