//! [`WorkerShared`]: the part of a worker that other threads touch — its inboxes, the
//! thieves' end of its task queue, its reactor driver, its counters and its shutdown flag.
//!
//! Invariant: **remote work is published, then announced.** A sender pushes into an inbox
//! under its lock, then publishes remote work on the driver (module `reactor::sleep_gate`,
//! loom-checked), which wakes the worker only if it sleeps; the worker drains the inboxes
//! when it sees the announcement. No wake-up is lost and an awake worker costs no syscall.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::fiber::control::FiberRef;
use crate::reactor::Driver;
use crate::sched::metrics::WorkerStats;
use crate::sched::task_ref::TaskRef;

/// The part of a worker that other threads may touch.
#[derive(Debug)]
pub(crate) struct WorkerShared {
    /// Identifies the runtime, to detect `block_on` from inside its own workers.
    pub(crate) runtime_id: u64,
    /// This worker's index in the runtime.
    pub(crate) index: usize,
    /// Counters and liveness signals (module `metrics`).
    pub(crate) stats: WorkerStats,
    /// Fibers woken or placed here by other threads.
    inbox: Mutex<Vec<FiberRef>>,
    /// Pinned tasks woken by other threads.
    task_inbox: Mutex<Vec<TaskRef>>,
    /// The worker's run queue of fibers, which the watchdog takes over while the worker is
    /// held (module `handoff`).
    pub(crate) run_queue: Arc<super::fiber_queue::RunQueue>,
    /// The thieves' end of the worker's stealable task queue.
    pub(super) stealer: crossbeam_deque::Stealer<TaskRef>,
    /// The owner's end, until the worker's thread takes it.
    deque: Mutex<Option<crossbeam_deque::Worker<TaskRef>>>,
    /// The worker's thread, set when it is spawned.
    pub(crate) thread: std::sync::OnceLock<std::thread::ThreadId>,
    pub(crate) shutdown: AtomicBool,
    /// Whether the worker's loop runs (a local runtime's only inside `block_on`): the
    /// watchdog and the deadlock detector look only at workers in their loop.
    pub(crate) in_loop: AtomicBool,
    /// Set with `stats.sleeping` when the sleep has no timeout: no timer is pending here
    /// (module `sched::deadlock`).
    pub(crate) sleep_untimed: AtomicBool,
    /// The worker thread's kernel id (0 until it runs), for the watchdog's look at what it
    /// is blocked in (module `sched::stuck`).
    pub(crate) tid: std::sync::atomic::AtomicI32,
    /// The worker's epoll instance, wake-up eventfd and registrations (an `Arc`: sockets
    /// registered with it keep it as their home).
    pub(crate) driver: Arc<Driver>,
}

impl WorkerShared {
    pub(crate) fn new(runtime_id: u64, index: usize) -> std::io::Result<WorkerShared> {
        let deque = crossbeam_deque::Worker::new_fifo();
        Ok(WorkerShared {
            run_queue: Arc::new(super::handoff::HandoffCell::new(std::collections::VecDeque::new())),
            stealer: deque.stealer(),
            deque: Mutex::new(Some(deque)),
            thread: std::sync::OnceLock::new(),
            in_loop: AtomicBool::new(false),
            sleep_untimed: AtomicBool::new(false),
            tid: std::sync::atomic::AtomicI32::new(0),
            runtime_id,
            index,
            stats: WorkerStats::default(),
            inbox: Mutex::new(Vec::new()),
            task_inbox: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            driver: Arc::new(Driver::new()?),
        })
    }

    /// **send**: hands a runnable fiber to this worker from any thread and wakes the worker.
    pub(crate) fn send_fiber(&self, fiber: FiberRef) {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner()).push(fiber);
        self.driver.publish_remote_work();
    }

    /// **send**: hands a runnable pinned task to this worker from any thread and wakes it.
    pub(crate) fn send_task(&self, task: TaskRef) {
        self.task_inbox.lock().unwrap_or_else(|e| e.into_inner()).push(task);
        self.driver.publish_remote_work();
    }

    /// Moves what waits in the inboxes into the owner's queues (owner only).
    pub(super) fn drain_inboxes(
        &self,
        fibers: impl FnOnce(std::vec::Drain<'_, FiberRef>),
        tasks: impl FnOnce(std::vec::Drain<'_, TaskRef>),
    ) {
        let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        fibers(inbox.drain(..));
        drop(inbox);
        let mut inbox = self.task_inbox.lock().unwrap_or_else(|e| e.into_inner());
        tasks(inbox.drain(..));
    }

    /// Whether the calling thread is this worker's.
    pub(crate) fn is_current_thread(&self) -> bool {
        self.thread.get() == Some(&std::thread::current().id())
    }

    /// Takes the fibers left in the inbox after the worker exited, for `Runtime::drop` to
    /// cancel ("shutdown reaches every fiber").
    pub(crate) fn take_inbox(&self) -> Vec<FiberRef> {
        std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The owner's end of the task queue, taken once by the worker's thread.
    pub(super) fn take_deque(&self) -> crossbeam_deque::Worker<TaskRef> {
        self.deque
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("a worker's task queue is taken once")
    }

    /// Asks the worker to shut down and wakes it.
    pub(crate) fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.driver.close();
        self.driver.force_wake();
    }
}
