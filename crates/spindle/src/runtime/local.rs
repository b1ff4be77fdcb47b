//! [`LocalRuntime`]: a runtime whose one worker is the thread that built it, running only
//! inside its `block_on` (tokio's `current_thread` flavour, and its `LocalRuntime`).
//!
//! Invariants:
//! - **One thread, for good.** The worker's state (`Worker`) is made on the building thread
//!   and its loop runs only there: `LocalRuntime` is neither `Send` nor `Sync`, so `block_on`
//!   and the drop can only be called on that thread, and fibers started there never see
//!   another (soundness rule: started fibers never migrate).
//! - **Leaving the loop** (module `sched::worker`): `block_on` runs the worker's loop until
//!   its own fiber ends, then returns with every other fiber and task kept where it was
//!   (parked, queued, in the inbox); they go on at the next `block_on`. Wake-ups and spawns
//!   from other threads (a [`Handle`], a blocking-pool job, a timer of another runtime) wait
//!   in the worker's inbox or the injectors meanwhile, as for a busy worker.
//! - **No nesting.** `block_on` refuses to run inside any spindle worker's loop (a fiber or
//!   task of this or another runtime on this thread): a loop inside a loop would break "one
//!   current fiber".
//! - **Cancelled on this thread.** The drop requests shutdown and runs the loop once more,
//!   which cancels every fiber and task left (fibers unwind, running their destructors), as
//!   a worker thread does at shutdown; then the common runtime drop cancels what was injected
//!   and never taken.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use super::block_on::BlockOn;
use super::handle::Handle;
use super::multi_thread::Runtime;
use super::spawn::spawn_fiber_on;
use super::tokio_context::enter_tokio;
use crate::fiber::{self, JoinHandle};
use crate::sched::worker::{self, Exit, Worker};
use crate::services::enter_services;

/// A spindle runtime without worker threads: the thread that builds it is its one worker,
/// and runs its fibers and tasks while it is inside [`block_on`](Self::block_on).
///
/// No worker thread is started: the shape of tokio's `current_thread` runtime, and the
/// cheaper one for a single-core service, a test, or a tool. Its watchdog (which warns about
/// a fiber holding the worker and reports deadlocks) is a thread; with
/// `Builder::long_running_budget(None)` there is none and the process stays single-threaded
/// (until something starts the blocking pool), so its socket calls, allocator and file table
/// skip the atomics a multi-threaded process pays. Fibers and tasks spawned in a `block_on` that has returned
/// (parked on a socket, a timer, a channel) go on at the next `block_on`; spawns from other
/// threads through [`handle`](Self::handle) run then too. Dropping the runtime cancels what
/// is left, on this thread.
///
/// ```
/// let rt = spindle::Builder::new().build_local().unwrap();
/// let (tx, rx) = spindle::sync::channel::<u32>(1);
/// let waiter = rt.block_on(move || spindle::spawn(move || rx.recv().unwrap() * 2));
/// // `waiter` is parked on the channel between the two calls.
/// let doubled = rt.block_on(move || {
///     tx.send(21).unwrap();
///     waiter.join().unwrap()
/// });
/// assert_eq!(doubled, 42);
/// ```
///
/// Not `Send` or `Sync`: its fibers live on this thread's worker (started fibers never
/// migrate). Use a [`Runtime`] to share one between threads.
pub struct LocalRuntime {
    rt: Runtime,
    /// The one worker's state, made on this thread; boxed so that the thread-local pointer
    /// to it (module `sched::worker`) stays put while the runtime moves on this thread.
    worker: Box<Worker>,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for LocalRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRuntime").field("runtime", &self.rt).finish_non_exhaustive()
    }
}

impl LocalRuntime {
    /// Called by `Builder::build_local` on the building thread.
    pub(super) fn new_on_this_thread(rt: Runtime) -> LocalRuntime {
        let _ = rt.shared.workers[0].thread.set(std::thread::current().id());
        let worker = Box::new(Worker::new(rt.shared.clone(), 0));
        LocalRuntime { rt, worker, _not_send: PhantomData }
    }

    /// Runs `body` on this thread as the runtime's worker until it is done, then returns its
    /// result; meanwhile the runtime's other fibers and tasks run too. `body` is a closure
    /// (run as a fiber, in blocking style) or a future (polled in a fiber), as for
    /// [`Runtime::block_on`]. A panic in it resumes on the caller; the runtime stays usable.
    ///
    /// # Panics
    ///
    /// When called inside a spindle runtime's fiber or task (of this or another runtime):
    /// spawn a fiber and join it instead. When every fiber and task is asleep for good, with
    /// the fiber dump, as [`Runtime::block_on`].
    #[track_caller]
    pub fn block_on<M, B: BlockOn<M>>(&self, body: B) -> B::Output {
        assert!(
            worker::current().is_none(),
            "LocalRuntime::block_on called inside a spindle runtime's fiber or task; spawn a fiber and join it instead"
        );
        let root = fiber::Builder::new().name("block_on").worker(0);
        let handle = spawn_fiber_on(&self.rt.shared, root, move || {
            let _leave = LeaveOnEnd;
            body.run()
        })
        .expect("spawn the block_on fiber");
        let _services = enter_services(self.rt.services.clone());
        let _tokio = enter_tokio(&self.rt.services);
        let shared = &self.rt.shared;
        let ticket = shared.waiters.enter();
        let _leave = super::deadlock::Leave(shared, ticket);
        shared.workers[0].in_loop.store(true, Ordering::Release);
        let exit = self.worker.run_loop();
        shared.workers[0].in_loop.store(false, Ordering::Release);
        assert_eq!(exit, Exit::Left, "a local runtime's loop stopped inside block_on");
        if !handle.is_finished() {
            // Left for a deadlock report (module `sched::deadlock`): the block_on fiber
            // stays parked with the others, for the drop to cancel.
            let report = shared.waiters.failed(ticket);
            panic!(
                "{}",
                report.as_deref().unwrap_or("spindle: the loop was left before the block_on fiber ended")
            );
        }
        join_block_on(handle)
    }

    /// Spawns a fiber on this runtime; it runs in the next `block_on` (inside one, use
    /// [`spindle::spawn`](crate::spawn)).
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.rt.spawn(f)
    }

    /// Spawns `future` as an async task on this runtime; it runs in the next `block_on`.
    pub fn spawn_async<F>(&self, future: F) -> crate::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.rt.spawn_async(future)
    }

    /// Runs `f` on the runtime's blocking thread pool (the first job starts its first
    /// thread).
    pub fn spawn_blocking<F, T>(&self, f: F) -> crate::blocking::BlockingHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.rt.spawn_blocking(f)
    }

    /// A handle that spawns on this runtime from any thread; what it spawns runs while this
    /// thread is inside `block_on`.
    pub fn handle(&self) -> Handle {
        self.rt.handle()
    }

    /// The runtime's shutdown token (see [`Runtime::shutdown_token`]).
    pub fn shutdown_token(&self) -> crate::shutdown::ShutdownToken {
        self.rt.shutdown_token()
    }

    /// Every started, unfinished fiber of the runtime: id, name, what it is parked on and
    /// where it was spawned (see [`Runtime::dump_fibers`]). Read directly from the worker,
    /// which runs only inside `block_on`: the fibers listed are those waiting for the next one.
    pub fn dump_fibers(&self) -> Vec<crate::sched::metrics::FiberInfo> {
        self.worker.dump()
    }

    /// A snapshot of the worker's counters.
    pub fn metrics(&self) -> Vec<crate::sched::metrics::WorkerMetrics> {
        self.rt.metrics()
    }
}

/// Dropped as the `block_on` fiber's body ends, returning or unwinding: the loop is to be
/// left once the fiber has switched away for the last time.
struct LeaveOnEnd;

impl Drop for LeaveOnEnd {
    fn drop(&mut self) {
        if let Some(worker) = worker::current() {
            worker.leave_soon();
        }
    }
}

impl Drop for LocalRuntime {
    fn drop(&mut self) {
        // From now on spawns through a Handle fail; then the loop sees the shutdown and
        // cancels every fiber and task left, here ("cancelled on this thread").
        *self.rt.shared.spawn_gate.write().unwrap_or_else(|e| e.into_inner()) = true;
        self.rt.shared.workers[0].request_shutdown();
        if worker::current().is_some() {
            // Made and dropped inside another runtime's fiber or task ("no nesting"): its
            // `block_on` never ran, so no fiber of it ever started, and `rt`'s drop below
            // completes the unstarted ones as cancelled. Its tasks are cancelled with the
            // worker's queues.
            return;
        }
        let _services = enter_services(self.rt.services.clone());
        let _tokio = enter_tokio(&self.rt.services);
        let exit = self.worker.run_loop();
        debug_assert_eq!(exit, Exit::Stopped);
        // `rt`'s own drop follows: the blocking pool, and whatever was injected after the
        // loop stopped.
    }
}

/// The `block_on` fiber's result: its value, or its panic resumed on the caller
/// (`LocalRuntime::block_on`).
fn join_block_on<T>(handle: JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}
