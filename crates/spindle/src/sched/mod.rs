//! The runtime: worker threads started when it is built, each running fibers.
//!
//! M:N: `worker_threads` workers, all started when the runtime is built, each an event loop
//! with its own run queue, reactor, timers and stack pool. New fibers carry no stack and no
//! owner until their first run, so any worker may start them: a spawn stays on the spawning
//! worker while every worker is busy, and goes to the shared injector (waking one idle worker)
//! when some worker is idle. A busy worker also hands part of its unstarted backlog to the
//! injector when others are idle. A started fiber is resumed only by its owner (remote
//! wake-ups go through the owner's inbox). See [`RuntimeShared`] for the invariants.
//!
//! Shutdown (dropping the [`Runtime`]): each worker stops taking new work, cancels fibers that
//! never started (their join handles get a [`Cancelled`](crate::fiber::Cancelled) error) and
//! resumes every started fiber with its cancel flag set, so it unwinds from its suspension
//! point (`park`, `yield_now`, a blocking channel operation) and runs its destructors. Fibers
//! that only switch among themselves (yield loops, endless ping-pong) see the shutdown within
//! a few dozen switches. Fibers spawned during shutdown (from a destructor) are cancelled
//! too, even when pinned to a worker that has already stopped. A fiber that never reaches a
//! suspension point (an endless computation) keeps the drop from returning, as a thread that
//! never ends keeps `join` from returning.

pub(crate) mod block_on;
pub(crate) mod caller;
pub(crate) mod handle;
pub(crate) mod idle;
pub(crate) mod metrics;
pub(crate) mod registry;
pub(crate) mod worker;

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use crate::fiber::cell::FiberRef;
use crate::fiber::stack::normalize_size;
use crate::fiber::{self, JoinHandle};
use crate::task::TaskRef;
pub use block_on::BlockOn;
pub use handle::{Handle, RuntimeClosed};
use worker::{Worker, WorkerShared};

/// Default fiber stack size: address space, committed lazily page by page.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// Settings shared by all workers of a runtime.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) stack_size: usize,
    pub(crate) stack_cache: usize,
    pub(crate) stack_keep_warm: usize,
}

/// The runtime-wide part every worker sees: the other workers, the injector of new work, and
/// the idle count that decides where new fibers go.
///
/// # Placement invariants
///
/// - The injector holds only fibers that have not started (and so may run on any worker); the
///   task injector holds runnable `Send` tasks (which may run on any worker between polls).
/// - A worker about to sleep sets its idle flag, then (SeqCst fence) checks the injectors;
///   a producer pushes to an injector, then (SeqCst fence) claims an idle worker and
///   publishes remote work to it (reactor `SleepGate`). Either the worker sees the new work
///   or the producer sees the idle worker: nothing waits in an injector while a worker
///   sleeps. At most one worker is woken per injected item (no thundering herd). The
///   protocol is module `idle`, loom-checked.
#[derive(Debug)]
pub(crate) struct RuntimeShared {
    pub(crate) id: u64,
    pub(crate) config: Config,
    pub(crate) workers: Vec<Arc<WorkerShared>>,
    injector: crossbeam_deque::Injector<FiberRef>,
    /// Runnable `Send` tasks woken or spawned outside the workers.
    task_injector: crossbeam_deque::Injector<TaskRef>,
    /// Which workers are idle (module `idle`).
    idle: idle::IdleSet,
    /// Set by `Runtime::drop` once every worker has stopped: tasks injected from then on are
    /// cancelled by whoever injects them (task ground rule 3).
    closed: AtomicBool,
    /// Threads for `spawn_blocking`.
    pub(crate) blocking: Arc<crate::blocking::BlockingPool>,
    /// When the runtime was built (for the busy-time metric).
    started: std::time::Instant,
    /// Set (under the write lock) when `Runtime::drop` begins; spawns through a [`Handle`]
    /// hold the read lock from their check to their push, so that every spawn either lands
    /// before the workers stop (and is run or cancelled by them) or fails (module `handle`).
    pub(crate) spawn_gate: std::sync::RwLock<bool>,
    /// The runtime's graceful-shutdown signal (module `shutdown`).
    pub(crate) shutdown: crate::shutdown::ShutdownToken,
}

impl RuntimeShared {
    /// Queues a new (unstarted) fiber where any worker can take it, waking one idle worker.
    pub(crate) fn inject(&self, fiber: FiberRef) {
        debug_assert!(!fiber.header.started(), "only unstarted fibers may move between workers");
        self.injector.push(fiber);
        self.wake_one_idle();
    }

    /// Queues a runnable `Send` task where any worker can take it, waking one idle worker;
    /// after shutdown, cancels it instead.
    pub(crate) fn inject_task(&self, task: TaskRef) {
        self.task_injector.push(task);
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.closed.load(Ordering::Relaxed) {
            // Runtime::drop may have drained the injector before our push.
            self.cancel_injected_tasks();
            return;
        }
        self.wake_one_idle();
    }

    /// Takes one injected task, if any.
    pub(crate) fn steal_injected_task(&self) -> Option<TaskRef> {
        loop {
            match self.task_injector.steal() {
                crossbeam_deque::Steal::Success(t) => return Some(t),
                crossbeam_deque::Steal::Empty => return None,
                crossbeam_deque::Steal::Retry => {}
            }
        }
    }

    /// Takes a batch of injected tasks into `dest` and returns one more, if any.
    pub(crate) fn steal_injected_tasks(&self, dest: &crossbeam_deque::Worker<TaskRef>) -> Option<TaskRef> {
        loop {
            match self.task_injector.steal_batch_and_pop(dest) {
                crossbeam_deque::Steal::Success(t) => return Some(t),
                crossbeam_deque::Steal::Empty => return None,
                crossbeam_deque::Steal::Retry => {}
            }
        }
    }

    pub(crate) fn task_injector_is_empty(&self) -> bool {
        self.task_injector.is_empty()
    }

    fn cancel_injected_tasks(&self) {
        while let Some(task) = self.steal_injected_task() {
            task.cancel();
        }
    }

    /// Queues a new pinned fiber on worker `index % workers` (locally when that is the
    /// calling worker).
    pub(crate) fn submit_to(&self, index: usize, fiber: FiberRef) {
        debug_assert!(fiber.header.pinned && !fiber.header.started());
        let target = &self.workers[index % self.workers.len()];
        match worker::current() {
            Some(w) if Arc::ptr_eq(&w.shared, target) => w.schedule_local(fiber),
            _ => target.schedule_remote(fiber),
        }
    }

    /// Whether some worker is idle (then new work should be shared rather than kept local).
    #[inline]
    pub(crate) fn has_idle_workers(&self) -> bool {
        self.idle.any()
    }

    /// After a push to a shared queue: claims one idle worker, if any, and wakes it.
    pub(crate) fn wake_one_idle(&self) {
        if let Some(i) = self.idle.claim_one() {
            self.workers[i].driver.publish_remote_work();
        }
    }

    /// Takes an injected fiber, if any.
    pub(crate) fn steal_injected(&self) -> Option<FiberRef> {
        loop {
            match self.injector.steal() {
                crossbeam_deque::Steal::Success(f) => return Some(f),
                crossbeam_deque::Steal::Empty => return None,
                crossbeam_deque::Steal::Retry => {}
            }
        }
    }

    pub(crate) fn injector_is_empty(&self) -> bool {
        self.injector.is_empty()
    }

    /// Marks `worker` idle (before its last look at the injector).
    pub(crate) fn enter_idle(&self, worker: &WorkerShared) {
        self.idle.enter(worker.index);
    }

    /// Clears `worker`'s idle flag (unless a producer already did).
    pub(crate) fn leave_idle(&self, worker: &WorkerShared) {
        self.idle.leave(worker.index);
    }
}

/// Configures and builds a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    worker_threads: Option<usize>,
    long_running_budget: Option<std::time::Duration>,
    max_blocking_threads: usize,
    blocking_keep_alive: std::time::Duration,
    stack_size: usize,
    stack_cache: usize,
    stack_keep_warm: usize,
    thread_name: String,
    malloc_top_pad: Option<usize>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            worker_threads: None,
            long_running_budget: Some(std::time::Duration::from_millis(100)),
            max_blocking_threads: 512,
            blocking_keep_alive: std::time::Duration::from_secs(10),
            stack_size: DEFAULT_STACK_SIZE,
            stack_cache: 65_536,
            stack_keep_warm: 256,
            thread_name: "spindle-worker".to_owned(),
            malloc_top_pad: Some(crate::sys::malloc::DEFAULT_TOP_PAD),
        }
    }

    /// Warn (through the `log` facade) when a fiber or task runs longer than `budget` without
    /// yielding; `None` turns the watchdog thread off. Default: 100 ms.
    pub fn long_running_budget(&mut self, budget: Option<std::time::Duration>) -> &mut Builder {
        self.long_running_budget = budget;
        self
    }

    /// The most threads `spawn_blocking` may run at once (default 512); more jobs queue.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn max_blocking_threads(&mut self, n: usize) -> &mut Builder {
        assert!(n > 0, "max_blocking_threads must be at least 1");
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking thread waits for a job before it exits (default 10 s).
    pub fn blocking_keep_alive(&mut self, keep_alive: std::time::Duration) -> &mut Builder {
        self.blocking_keep_alive = keep_alive;
        self
    }

    /// Number of worker threads, each an event loop running fibers and tasks (default: the
    /// number of CPUs this process may use). All are started when the runtime is built.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn worker_threads(&mut self, n: usize) -> &mut Builder {
        assert!(n > 0, "a spindle runtime needs at least one worker thread");
        self.worker_threads = Some(n);
        self
    }

    /// Default stack size of the fibers of this runtime, guard page included (rounded up to
    /// whole pages; 16 KiB to 1 GiB). [`fiber::Builder::stack_size`] overrides it per fiber.
    pub fn stack_size(&mut self, bytes: usize) -> &mut Builder {
        self.stack_size = bytes;
        self
    }

    /// How many free stacks each worker keeps mapped once it goes idle (default 65,536): above
    /// it, an idle worker unmaps the chunks (64 stacks each) whose stacks are all free. A free
    /// stack beyond `stack_keep_warm` costs address space only (256 KiB each by default,
    /// reserved with `MAP_NORESERVE`), no memory; a large cache lets bursts of tens of
    /// thousands of fibers reuse mappings instead of paying `mmap`/`munmap` each time.
    pub fn stack_cache(&mut self, stacks: usize) -> &mut Builder {
        self.stack_cache = stacks;
        self
    }

    /// How many of the most recently released stacks keep their pages (default 256); the
    /// others give their pages back to the kernel with `madvise(MADV_DONTNEED)`, in batches,
    /// when the worker goes idle (and while it is busy, once more than `stack_cache + 1,024`
    /// stacks were released since the last batch).
    pub fn stack_keep_warm(&mut self, stacks: usize) -> &mut Builder {
        self.stack_keep_warm = stacks;
        self
    }

    /// Name prefix of the worker threads (default `spindle-worker`).
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Builder {
        self.thread_name = name.into();
        self
    }

    /// glibc only: the free memory each allocator arena keeps at its top instead of giving
    /// it back to the kernel (`mallopt(M_TOP_PAD)`), set once per process by the first
    /// runtime built. Default 8 MiB: glibc's per-thread arenas, which worker threads use,
    /// otherwise return memory on every free that leaves more than 128 KiB on top, so code
    /// that allocates and frees a few hundred KiB or a few MiB per request pays a `madvise`
    /// and a page fault per page on every request (module `sys::malloc`). An arena keeps that
    /// much only once it has grown that far (glibc's own dynamic trim threshold lets the main
    /// thread's arena keep up to 64 MiB). `None` leaves glibc's setting
    /// alone; a `MALLOC_TOP_PAD_` environment variable always wins. Other C libraries: no-op.
    pub fn malloc_top_pad(&mut self, bytes: Option<usize>) -> &mut Builder {
        self.malloc_top_pad = bytes;
        self
    }

    /// Starts the worker threads and returns the runtime.
    pub fn build(&self) -> io::Result<Runtime> {
        static RUNTIME_IDS: AtomicU64 = AtomicU64::new(1);
        let config = Config {
            stack_size: normalize_size(self.stack_size)?,
            stack_cache: self.stack_cache,
            stack_keep_warm: self.stack_keep_warm,
        };
        fiber::overflow::install_handler();
        fiber::cancel::install_hook();
        if let Some(pad) = self.malloc_top_pad {
            crate::sys::malloc::set_top_pad(pad);
        }
        let id = RUNTIME_IDS.fetch_add(1, Ordering::Relaxed);
        let n = self.worker_threads.unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()));
        let workers =
            (0..n).map(|i| WorkerShared::new(id, i).map(Arc::new)).collect::<io::Result<Vec<_>>>()?;
        let shared = Arc::new(RuntimeShared {
            id,
            config,
            workers,
            injector: crossbeam_deque::Injector::new(),
            task_injector: crossbeam_deque::Injector::new(),
            idle: idle::IdleSet::new(n),
            closed: AtomicBool::new(false),
            started: std::time::Instant::now(),
            spawn_gate: std::sync::RwLock::new(false),
            blocking: Arc::new(crate::blocking::BlockingPool::new(
                self.max_blocking_threads,
                self.blocking_keep_alive,
                format!("{}-blocking", self.thread_name),
            )),
            shutdown: crate::shutdown::ShutdownToken::new(),
        });
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let rt = shared.clone();
            let spawned = thread::Builder::new()
                .name(format!("{}-{i}", self.thread_name))
                .spawn(move || Worker::new(rt, i).run());
            match spawned {
                Ok(handle) => {
                    let _ = shared.workers[i].thread.set(handle.thread().id());
                    threads.push(handle);
                }
                Err(e) => {
                    // Stop the workers already started before reporting the error.
                    drop(Runtime { shared, threads, watchdog: None });
                    return Err(e);
                }
            }
        }
        let watchdog = match self.long_running_budget {
            Some(budget) if !budget.is_zero() => {
                let stop = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
                let (rt, stop2) = (Arc::downgrade(&shared), stop.clone());
                thread::Builder::new()
                    .name(format!("{}-watchdog", self.thread_name))
                    .spawn(move || metrics::watchdog(rt, budget, stop2))
                    .ok()
                    .map(|h| (stop, h))
            }
            _ => None,
        };
        Ok(Runtime { shared, threads, watchdog })
    }
}

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
    threads: Vec<thread::JoinHandle<()>>,
    watchdog: Option<(StopSignal, thread::JoinHandle<()>)>,
}

/// Tells the watchdog thread to stop (a flag and the condvar it sleeps on).
type StopSignal = Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>;

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
    /// waits for): spawn and join instead.
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
        match handle.join() {
            Ok(value) => value,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    /// Spawns a fiber on this runtime from any thread.
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
        self.shared.blocking.spawn(f)
    }

    /// A snapshot of every worker's counters.
    pub fn metrics(&self) -> Vec<metrics::WorkerMetrics> {
        self.shared.workers.iter().map(|w| w.stats.snapshot(w.index, self.shared.started)).collect()
    }

    /// Every started, unfinished fiber of the runtime: id, name, owner worker and what it is
    /// parked on. Each worker lists its own fibers (in a task on its loop), so the call waits
    /// for every worker to get there: from a fiber it parks, from a thread it blocks.
    pub fn dump_fibers(&self) -> Vec<metrics::FiberInfo> {
        let handles: Vec<_> = self
            .shared
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

    /// A cheap, cloneable handle that spawns on this runtime from any thread (module docs of
    /// [`Handle`]).
    pub fn handle(&self) -> Handle {
        Handle::new(self.shared.clone())
    }

    /// The runtime's shutdown token: servers and loops on the runtime watch it (inside the
    /// runtime, [`shutdown::token`](crate::shutdown::token) returns the same token), and
    /// [`shutdown_timeout`](Self::shutdown_timeout) triggers it.
    pub fn shutdown_token(&self) -> crate::shutdown::ShutdownToken {
        self.shared.shutdown.clone()
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
        let token = self.shared.shutdown.clone();
        token.trigger();
        let drained = token.wait_drained(Some(std::time::Instant::now() + timeout));
        drop(self);
        drained
    }

    /// Number of worker threads.
    pub fn worker_threads(&self) -> usize {
        self.shared.workers.len()
    }

    pub(crate) fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Hands a new fiber to the workers (through the injector).
    pub(crate) fn submit(&self, fiber: crate::fiber::cell::FiberRef) {
        self.shared.inject(fiber);
    }

    /// Hands a new pinned fiber to worker `index % workers`.
    pub(crate) fn submit_to(&self, index: usize, fiber: crate::fiber::cell::FiberRef) {
        self.shared.submit_to(index, fiber);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // From now on spawns through a Handle fail instead of queueing work nobody will run.
        *self.shared.spawn_gate.write().unwrap_or_else(|e| e.into_inner()) = true;
        if let Some((stop, handle)) = self.watchdog.take() {
            *crate::sync::lock(&stop.0) = true;
            stop.1.notify_all();
            let _ = handle.join();
        }
        for w in &self.shared.workers {
            w.request_shutdown();
        }
        let mut panicked = false;
        for thread in self.threads.drain(..) {
            panicked |= thread.join().is_err();
        }
        self.shared.blocking.shutdown();
        // Fibers injected but never taken by a worker, and pinned ones sent to a worker that
        // had already exited (worker invariant 8): complete them as cancelled.
        while let Some(fiber) = self.shared.steal_injected() {
            fiber.stage.abort_unstarted(&fiber.header, Box::new(crate::fiber::Cancelled));
        }
        for w in &self.shared.workers {
            for fiber in w.take_inbox() {
                if fiber.header.started() {
                    // Every started fiber finished in its worker's cancel_all; a stale entry
                    // can only be a wake-up of a finished fiber, which has nothing left to run.
                    debug_assert!(fiber.header.is_complete(), "a started fiber outlived its worker");
                } else {
                    fiber.stage.abort_unstarted(&fiber.header, Box::new(crate::fiber::Cancelled));
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
