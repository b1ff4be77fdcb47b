//! [`Builder`]: configures a runtime and starts its worker threads.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use super::local::LocalRuntime;
use super::multi_thread::Runtime;
use super::tokio_context::enter_tokio;
use crate::fiber;
use crate::fiber::stack::normalize_size;
use crate::sched::worker::{Worker, WorkerShared};
use crate::sched::{idle, metrics, Config, RuntimeShared, DEFAULT_STACK_SIZE};
use crate::services::{enter_worker, Services};

/// Configures and builds a [`Runtime`].
#[derive(Debug, Clone)]
pub struct Builder {
    worker_threads: Option<usize>,
    long_running_budget: Option<std::time::Duration>,
    max_blocking_threads: usize,
    max_file_threads: Option<usize>,
    blocking_keep_alive: std::time::Duration,
    stack_size: usize,
    stack_cache: usize,
    stack_keep_warm: usize,
    thread_name: String,
    malloc_top_pad: Option<usize>,
    /// Whether workers run inside the tokio bridge's context (feature `tokio-compat`).
    #[cfg(feature = "tokio-compat")]
    tokio_context: bool,
    start_paused: bool,
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
            max_file_threads: None,
            blocking_keep_alive: std::time::Duration::from_secs(10),
            stack_size: DEFAULT_STACK_SIZE,
            stack_cache: 65_536,
            stack_keep_warm: 256,
            thread_name: "spindle-worker".to_owned(),
            malloc_top_pad: Some(crate::sys::malloc::DEFAULT_TOP_PAD),
            #[cfg(feature = "tokio-compat")]
            tokio_context: true,
            start_paused: false,
        }
    }

    /// Feature `tokio-compat`: whether the workers run inside the tokio bridge's context
    /// (default: yes), so that tokio-only code runs unchanged in fibers and tasks (module
    /// [`compat`](crate::compat)). The bridge's thread is started with the runtime then.
    #[cfg(feature = "tokio-compat")]
    pub fn tokio_context(&mut self, enter: bool) -> &mut Builder {
        self.tokio_context = enter;
        self
    }

    /// Warn (through the `log` facade, or tracing) when a fiber or task runs longer than
    /// `budget` without yielding, saying what the worker's thread is doing (computing, or
    /// blocked in which system call); the same watchdog thread reports a runtime asleep for
    /// good ("all fibers are asleep - deadlock!", failing its `block_on`). `None` turns the
    /// watchdog thread off, on every runtime flavour. Default: 100 ms.
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

    /// The most threads that run file system calls at once: those of [`crate::fs`] and, with
    /// the `hook` feature, `std::fs`'s calls made in fibers (default: four per worker). More
    /// calls queue. File calls copy data and take the process's memory-map lock on page
    /// faults, so a few threads per core keep a disk busy without crowding the workers off
    /// their cores, which hundreds of threads copying at once do.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn max_file_threads(&mut self, n: usize) -> &mut Builder {
        assert!(n > 0, "max_file_threads must be at least 1");
        self.max_file_threads = Some(n);
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
    /// stack beyond `stack_keep_warm` costs address space only (256 KiB each by default in
    /// optimized builds, reserved with `MAP_NORESERVE`), no memory; a large cache lets bursts of tens of
    /// thousands of fibers reuse mappings instead of paying `mmap`/`munmap` each time.
    pub fn stack_cache(&mut self, stacks: usize) -> &mut Builder {
        self.stack_cache = stacks;
        self
    }

    /// How many of the most recently released stacks keep their pages (default 256); the
    /// others give their pages back to the kernel with `madvise(MADV_DONTNEED)`, in batches,
    /// when the worker goes idle. While it is busy, every `stack_cache + 1,024` releases, the
    /// free stacks that no fiber took in that window give their pages back too; stacks it
    /// keeps reusing keep theirs.
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

    /// Starts the runtime with its clock paused, for tests of timing logic (default off): see
    /// [`time::pause`](crate::time::pause) for what a paused clock does. Paused time needs a
    /// runtime of one worker, so a paused start without [`worker_threads`](Self::worker_threads)
    /// gets one worker (and `build` fails with `InvalidInput` if more were asked for).
    /// `#[spindle::test(start_paused = true)]` sets it.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let rt = spindle::Builder::new().start_paused(true).build().unwrap();
    /// let waited = rt.block_on(|| {
    ///     let start = spindle::time::now();
    ///     spindle::time::sleep(Duration::from_secs(3600)); // returns at once, an hour later
    ///     spindle::time::now() - start
    /// });
    /// assert_eq!(waited, Duration::from_secs(3600));
    /// ```
    pub fn start_paused(&mut self, paused: bool) -> &mut Builder {
        self.start_paused = paused;
        self
    }

    /// Starts the worker threads and returns the runtime.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a [paused start](Self::start_paused) with more than one worker; the
    /// system's error when a thread, an epoll instance or an eventfd cannot be made.
    pub fn build(&self) -> io::Result<Runtime> {
        let default =
            if self.start_paused { 1 } else { thread::available_parallelism().map_or(1, |n| n.get()) };
        let n = self.worker_threads.unwrap_or(default);
        if self.start_paused && n > 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "Builder::start_paused: paused time needs a runtime of one worker (worker_threads(1) or build_local)",
            ));
        }
        let (shared, services) = self.parts(n)?;
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (rt, worker_services) = (shared.clone(), services.clone());
            let spawned = thread::Builder::new().name(format!("{}-{i}", self.thread_name)).spawn(move || {
                // For the thread's whole life: every fiber and task of it runs inside.
                let _tokio = enter_tokio(&worker_services);
                enter_worker(worker_services);
                let shared = rt.workers[i].clone();
                let worker = Worker::new(rt, i);
                shared.in_loop.store(true, Ordering::Release);
                worker.run();
                shared.in_loop.store(false, Ordering::Release);
            });
            match spawned {
                Ok(handle) => {
                    let _ = shared.workers[i].thread.set(handle.thread().id());
                    threads.push(handle);
                }
                Err(e) => {
                    // Stop the workers already started before reporting the error.
                    drop(Runtime { shared, services, threads, watchdog: None });
                    return Err(e);
                }
            }
        }
        let watchdog = self.watchdog(&shared, &services, false);
        Ok(Runtime { shared, services, threads, watchdog })
    }

    /// Starts the watchdog thread (unless `long_running_budget` is `None` or zero): the
    /// warning about a worker held too long, and the deadlock detector.
    fn watchdog(
        &self,
        shared: &Arc<RuntimeShared>,
        services: &Arc<Services>,
        local: bool,
    ) -> Option<(metrics::StopSignal, thread::JoinHandle<()>)> {
        let budget = self.long_running_budget.filter(|b| !b.is_zero())?;
        let stop = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (rt, stop2) = (Arc::downgrade(shared), stop.clone());
        let outside = super::deadlock::RuntimeOutside { services: Arc::downgrade(services), local };
        let detector = crate::sched::deadlock::Detector::new(Box::new(outside));
        thread::Builder::new()
            .name(format!("{}-watchdog", self.thread_name))
            .spawn(move || metrics::watchdog(rt, budget, stop2, detector))
            .ok()
            .map(|h| (stop, h))
    }

    /// Builds a [`LocalRuntime`]: one worker, which is the thread calling its `block_on`,
    /// and no worker thread started (module docs of [`LocalRuntime`]). Every setting applies
    /// ([`thread_name`](Self::thread_name) names the watchdog's and the blocking pool's
    /// threads); [`long_running_budget`](Self::long_running_budget)`(None)` leaves out the
    /// watchdog thread, so that the process stays single-threaded.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if [`worker_threads`](Self::worker_threads) asked for more than one:
    /// a local runtime's one worker is its thread. Otherwise as [`build`](Self::build).
    pub fn build_local(&self) -> io::Result<LocalRuntime> {
        if self.worker_threads.is_some_and(|n| n > 1) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "Builder::build_local: a local runtime has one worker, the thread calling block_on; \
                 worker_threads must be 1 or unset (use build for a pool of workers)",
            ));
        }
        let (shared, services) = self.parts(1)?;
        let watchdog = self.watchdog(&shared, &services, true);
        Ok(LocalRuntime::new_on_this_thread(Runtime { shared, services, threads: Vec::new(), watchdog }))
    }

    /// What every runtime has: the shared state of `n` workers and the services.
    fn parts(&self, n: usize) -> io::Result<(Arc<RuntimeShared>, Arc<Services>)> {
        // The interposed libc functions stay in every program that builds a runtime.
        #[cfg(feature = "hook")]
        crate::hook::interposed::link();
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
        let clock = Arc::new(crate::sched::clock::Clock::new(n, self.start_paused));
        let workers =
            (0..n).map(|i| WorkerShared::new(id, i).map(Arc::new)).collect::<io::Result<Vec<_>>>()?;
        let io = if n >= 2 {
            let io = crate::reactor::shared_io::SharedIo::new()?;
            for w in &workers {
                w.driver.add_shared(&io.driver)?;
            }
            Some(io)
        } else {
            None
        };
        let shared = Arc::new(RuntimeShared {
            id,
            config,
            workers,
            io,
            injector: crossbeam_deque::Injector::new(),
            task_injector: crossbeam_deque::Injector::new(),
            idle: idle::IdleSet::new(n),
            closed: AtomicBool::new(false),
            started: std::time::Instant::now(),
            clock: clock.clone(),
            spawn_gate: std::sync::RwLock::new(false),
            waiters: Default::default(),
        });
        let services = Arc::new(Services {
            blocking: Arc::new(crate::blocking::BlockingPool::new(
                self.max_blocking_threads,
                self.blocking_keep_alive,
                format!("{}-blocking", self.thread_name),
                clock.clone(),
            )),
            files: Arc::new(crate::blocking::BlockingPool::new(
                self.max_file_threads.unwrap_or(4 * n),
                self.blocking_keep_alive,
                format!("{}-file", self.thread_name),
                clock,
            )),
            shutdown: crate::shutdown::ShutdownToken::new(),
            #[cfg(feature = "tokio-compat")]
            tokio_context: self.tokio_context,
        });
        #[cfg(feature = "tokio-compat")]
        if self.tokio_context {
            // Started now rather than at a worker's first need: its thread exists from here on.
            crate::compat::bridge();
        }
        Ok((shared, services))
    }
}

// The runtimes' default constructors live beside the builder they call, so that the runtimes'
// own files do not depend on it.

impl Runtime {
    /// A runtime with the default settings.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }
}

impl LocalRuntime {
    /// A local runtime with the default settings; see [`Builder::build_local`].
    pub fn new() -> io::Result<LocalRuntime> {
        Builder::new().build_local()
    }
}
