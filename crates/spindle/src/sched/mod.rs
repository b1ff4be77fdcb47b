//! The runtime: worker threads started when it is built, each running fibers.
//!
//! This issue's scheduler has one worker. The pieces are shaped for the M:N scheduler that
//! follows: new fibers carry no stack and no owner until their first run (so a worker that
//! did not create them may start them), a started fiber is resumed only by its owner (remote
//! wake-ups go through the owner's inbox), and every worker has its own stack pool.
//!
//! Shutdown (dropping the [`Runtime`]): each worker stops taking new work, cancels fibers that
//! never started (their join handles get a [`Cancelled`](crate::fiber::Cancelled) error) and
//! resumes every started fiber with its cancel flag set, so it unwinds from its suspension
//! point (`park`, `yield_now`, a blocking channel operation) and runs its destructors. A
//! fiber that never reaches a suspension point (an endless computation) keeps the drop from
//! returning, as a thread that never ends keeps `join` from returning.

pub(crate) mod registry;
pub(crate) mod worker;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use crate::fiber::stack::normalize_size;
use crate::fiber::{self, JoinHandle};
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

/// Configures and builds a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    stack_size: usize,
    stack_cache: usize,
    stack_keep_warm: usize,
    thread_name: String,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            stack_size: DEFAULT_STACK_SIZE,
            stack_cache: 65_536,
            stack_keep_warm: 256,
            thread_name: "spindle-worker".to_owned(),
        }
    }

    /// Default stack size of the fibers of this runtime, guard page included (rounded up to
    /// whole pages; 16 KiB to 1 GiB). [`fiber::Builder::stack_size`] overrides it per fiber.
    pub fn stack_size(&mut self, bytes: usize) -> &mut Builder {
        self.stack_size = bytes;
        self
    }

    /// How many released stacks each worker keeps for reuse (default 65,536); more are unmapped.
    /// A cached stack that the worker has trimmed costs address space only (256 KiB each
    /// by default, reserved with `MAP_NORESERVE`), no memory; a large cache lets bursts of
    /// tens of thousands of fibers reuse mappings instead of paying `mmap`/`munmap` each time.
    pub fn stack_cache(&mut self, stacks: usize) -> &mut Builder {
        self.stack_cache = stacks;
        self
    }

    /// How many of the cached stacks keep their pages when a worker goes idle (default 256);
    /// the others give their pages back to the kernel with `madvise(MADV_DONTNEED)`.
    pub fn stack_keep_warm(&mut self, stacks: usize) -> &mut Builder {
        self.stack_keep_warm = stacks;
        self
    }

    /// Name prefix of the worker threads (default `spindle-worker`).
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Builder {
        self.thread_name = name.into();
        self
    }

    /// Starts the worker thread and returns the runtime.
    pub fn build(&self) -> io::Result<Runtime> {
        static RUNTIME_IDS: AtomicU64 = AtomicU64::new(1);
        let config = Arc::new(Config {
            stack_size: normalize_size(self.stack_size)?,
            stack_cache: self.stack_cache,
            stack_keep_warm: self.stack_keep_warm,
        });
        fiber::overflow::install_handler();
        let id = RUNTIME_IDS.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(WorkerShared::new(id)?);
        let worker_shared = shared.clone();
        let worker_config = config.clone();
        let handle = thread::Builder::new()
            .name(format!("{}-0", self.thread_name))
            .spawn(move || Worker::new(worker_shared, worker_config).run())?;
        Ok(Runtime { config, worker: shared, thread: Some(handle) })
    }
}

/// A spindle runtime: its worker thread runs fibers until the runtime is dropped.
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
    config: Arc<Config>,
    worker: Arc<WorkerShared>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Runtime {
    /// A runtime with the default settings.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// Runs `f` as a fiber on this runtime and blocks the calling thread until it returns,
    /// then returns its result. A panic in `f` resumes on the caller.
    ///
    /// # Panics
    ///
    /// When called from a fiber of this same runtime (that would block the worker the fiber
    /// waits for): spawn and join instead.
    pub fn block_on<F, T>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if let Some(worker) = worker::current() {
            assert!(
                worker.shared.runtime_id != self.worker.runtime_id,
                "Runtime::block_on called from a fiber of the same runtime; spawn a fiber and join it instead"
            );
        }
        let handle =
            fiber::Builder::new().name("block_on").spawn_on(self, f).expect("spawn the block_on fiber");
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
        crate::task::spawn_on(self.worker.clone(), future)
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Hands a new fiber to a worker (the only one, for now).
    pub(crate) fn submit(&self, fiber: crate::fiber::cell::FiberRef) {
        self.worker.schedule_remote(fiber);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.worker.request_shutdown();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() && !thread::panicking() {
                panic!("a spindle worker thread panicked");
            }
        }
    }
}
