//! [`Runtime`]: the runtime that owns its worker threads, its pools and its watchdog (a
//! `LocalRuntime` holds one with no worker thread, and shares its drop).
//!
//! Its drop carries out the shutdown the `runtime` module doc describes ("Shutdown").

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;

use super::block_on::BlockOn;
use super::deadlock;
use super::dump::dump_fibers;
use super::handle::Handle;
use super::spawn::spawn_fiber_on;
use crate::error::Cancelled;
use crate::fiber::{self, JoinHandle};
use crate::sched::metrics::{self, StopSignal};
use crate::sched::{worker, RuntimeShared};
use crate::services::Services;

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
    pub(super) shared: Arc<RuntimeShared>,
    pub(super) services: Arc<Services>,
    pub(super) threads: Vec<thread::JoinHandle<()>>,
    pub(super) watchdog: Option<(StopSignal, thread::JoinHandle<()>)>,
}

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

impl Runtime {
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
        crate::task::spawn::spawn_on(self.shared.clone(), future)
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
