//! `spawn_blocking`: run blocking code (file I/O, a C library, a long computation) on a
//! separate pool of threads, so that it does not stall a worker's fibers and tasks.

// # Invariants
//
// - The pool belongs to its runtime. It starts with no thread, adds one whenever a job
//   arrives and no thread is idle, up to `max_threads` (then jobs queue), and a thread that
//   stays idle for `keep_alive` exits. So an idle runtime holds no blocking threads.
// - Each job's result goes to one [`BlockingHandle`] through the completion cell that fibers
//   and tasks use too (module `fiber::completion`); the job's panic is caught and handed over
//   as its `Err`.
// - Shutdown: the runtime tells the pool to stop; queued jobs that never started complete
//   with a `Cancelled` payload; running jobs finish on their threads (a thread cannot be
//   interrupted), and their handles still get the results.
// - A job counts as in flight on the runtime's clock from its spawn until just before its
//   result is published (run or cancelled): a paused clock does not auto-advance meanwhile
//   (module `sched::clock`).

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use crate::error::{Cancelled, JoinError};
use crate::lock::lock;
use crate::park::completion::{Completion, Joiner};
use crate::sched::clock::Clock;

type Job = Box<dyn FnOnce(bool) + Send>;

struct PoolState {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
    shutdown: bool,
}

/// A runtime's pool of blocking threads.
pub(crate) struct BlockingPool {
    state: Mutex<PoolState>,
    available: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
    /// The runtime's clock: a paused clock does not auto-advance while a job is in flight
    /// (module `sched::clock`).
    clock: Arc<Clock>,
}

impl fmt::Debug for BlockingPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = lock(&self.state);
        f.debug_struct("BlockingPool").field("threads", &s.threads).field("queued", &s.queue.len()).finish()
    }
}

impl BlockingPool {
    pub(crate) fn new(
        max_threads: usize,
        keep_alive: Duration,
        thread_name: String,
        clock: Arc<Clock>,
    ) -> BlockingPool {
        BlockingPool {
            state: Mutex::new(PoolState { queue: VecDeque::new(), threads: 0, idle: 0, shutdown: false }),
            available: Condvar::new(),
            max_threads,
            keep_alive,
            thread_name,
            clock,
        }
    }

    pub(crate) fn spawn<F, T>(self: &Arc<Self>, f: F) -> BlockingHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let cell = Arc::new(JobCell::<T>::new());
        let done = cell.clone();
        let clock = self.clock.clone();
        clock.job_started();
        // `run` is false when the pool shut down before the job started.
        let job: Job = Box::new(move |run| {
            let result =
                if run { catch_unwind(AssertUnwindSafe(f)) } else { Err(Box::new(Cancelled::SHUTDOWN) as _) };
            // Before the result wakes anyone: a paused clock may move again.
            clock.job_finished();
            done.complete(result);
        });
        let mut state = lock(&self.state);
        if state.shutdown {
            drop(state);
            job(false);
            return BlockingHandle::new(cell);
        }
        state.queue.push_back(job);
        if state.idle > 0 {
            self.available.notify_one();
        } else if state.threads < self.max_threads {
            state.threads += 1;
            let pool = self.clone();
            let spawned =
                thread::Builder::new().name(self.thread_name.clone()).spawn(move || pool.worker_loop());
            if let Err(e) = spawned {
                state.threads -= 1;
                crate::report::error(format_args!(
                    "spindle: spawn_blocking could not start a thread ({e}); the job waits for a free one"
                ));
                if state.threads == 0 {
                    // Nothing will ever run it: fail it now rather than hang its handle.
                    let job = state.queue.pop_back().expect("just pushed");
                    drop(state);
                    job(false);
                }
            }
        }
        BlockingHandle::new(cell)
    }

    fn worker_loop(self: Arc<Self>) {
        let mut state = lock(&self.state);
        loop {
            if let Some(job) = state.queue.pop_front() {
                drop(state);
                job(true);
                state = lock(&self.state);
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            let (next, timeout) =
                self.available.wait_timeout(state, self.keep_alive).unwrap_or_else(|e| e.into_inner());
            state = next;
            state.idle -= 1;
            if timeout.timed_out() && state.queue.is_empty() {
                break;
            }
        }
        state.threads -= 1;
    }

    /// Its threads, when every one of them waits for a job and none is queued (a job could
    /// wake a fiber: module `sched::deadlock`); `None` otherwise.
    pub(crate) fn quiet_threads(&self) -> Option<usize> {
        let state = lock(&self.state);
        (state.queue.is_empty() && state.idle == state.threads).then_some(state.threads)
    }

    /// Stops the pool: queued jobs complete as cancelled, idle threads exit.
    pub(crate) fn shutdown(&self) {
        let jobs: Vec<Job> = {
            let mut state = lock(&self.state);
            state.shutdown = true;
            state.queue.drain(..).collect()
        };
        self.available.notify_all();
        for job in jobs {
            job(false);
        }
    }
}

/// A job's result and its completion (module `fiber::completion`).
struct JobCell<T> {
    completion: Completion,
    /// Written once by the job before `completion` completes; read once by the joiner after.
    result: std::cell::UnsafeCell<Option<thread::Result<T>>>,
}

// SAFETY: `result` is written by the job's thread before the completion is published
// (release) and read only by the single joiner after it observed completion (acquire), the
// completion protocol of module `fiber::completion`; T moves between those threads.
unsafe impl<T: Send> Sync for JobCell<T> {}

impl<T> JobCell<T> {
    fn new() -> JobCell<T> {
        JobCell { completion: Completion::new(), result: std::cell::UnsafeCell::new(None) }
    }

    fn complete(&self, result: thread::Result<T>) {
        // SAFETY: only the job writes, once, before publishing completion (see the Sync impl).
        unsafe { *self.result.get() = Some(result) };
        self.completion.complete();
    }
}

/// The result of a [`spawn_blocking`](crate::spawn_blocking) job: wait for it with
/// [`join`](Self::join) (parks a fiber, blocks a thread) or `.await` it.
pub struct BlockingHandle<T> {
    cell: Arc<JobCell<T>>,
    joiner: Joiner,
    /// The result was taken (a poll after completion is a misuse).
    taken: bool,
}

impl<T> BlockingHandle<T> {
    fn new(cell: Arc<JobCell<T>>) -> BlockingHandle<T> {
        BlockingHandle { cell, joiner: Joiner::default(), taken: false }
    }

    fn take(&mut self) -> Result<T, JoinError> {
        self.taken = true;
        // SAFETY: completion was observed (acquire) and this handle is the single joiner.
        let result = unsafe { (*self.cell.result.get()).take() };
        result.expect("a spawn_blocking result taken twice").map_err(JoinError::from_payload)
    }

    /// Waits for the job; `Err` says it panicked, or was cancelled because the runtime shut
    /// down before it started.
    #[track_caller]
    pub fn join(mut self) -> Result<T, JoinError> {
        crate::sched::caller::blocking_caller("spawn_blocking join");
        self.cell.completion.join(&self.joiner, "spawn_blocking join");
        self.take()
    }

    /// Waits at most `timeout` for the job: `Ok` with what [`join`](Self::join) gives, or
    /// `Err` with the handle back if it is still running.
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = spindle::Runtime::new().unwrap();
    /// let h = rt.spawn_blocking(|| std::thread::sleep(Duration::from_millis(50)));
    /// let h = h.join_timeout(Duration::from_millis(1)).unwrap_err();
    /// h.join().unwrap();
    /// ```
    #[track_caller]
    pub fn join_timeout(
        self,
        timeout: std::time::Duration,
    ) -> Result<Result<T, JoinError>, BlockingHandle<T>> {
        match crate::park::wait::deadline_in(timeout) {
            Some(deadline) => self.join_deadline(deadline),
            None => Ok(self.join()),
        }
    }

    /// Waits until `deadline` at the latest; see [`join_timeout`](Self::join_timeout).
    #[track_caller]
    pub fn join_deadline(
        mut self,
        deadline: std::time::Instant,
    ) -> Result<Result<T, JoinError>, BlockingHandle<T>> {
        crate::sched::caller::blocking_caller("spawn_blocking join (with timeout)");
        if self.cell.completion.wait_until(&self.joiner, deadline, "spawn_blocking join (with timeout)") {
            Ok(self.take())
        } else {
            Err(self)
        }
    }

    /// Whether the job has finished.
    pub fn is_finished(&self) -> bool {
        self.cell.completion.is_complete()
    }
}

impl<T> Future for BlockingHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        let this = self.get_mut();
        assert!(!this.taken, "a BlockingHandle polled after it completed");
        match this.cell.completion.poll(&this.joiner, cx) {
            Poll::Ready(()) => Poll::Ready(this.take()),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> fmt::Debug for BlockingHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingHandle").field("finished", &self.is_finished()).finish()
    }
}
