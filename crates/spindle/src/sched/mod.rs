//! The scheduler: the workers of a runtime and what they share (module `runtime` builds and
//! owns them).
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

/// The scheduler as `park` and `sync` see it (their one way in).
pub(crate) mod api;
pub(crate) mod caller;
pub(crate) mod clock;
pub(crate) mod deadlock;
pub(crate) mod idle;
pub(crate) mod metrics;
pub(crate) mod registry;
pub(crate) mod stuck;
pub(crate) mod task_ref;
pub(crate) mod task_state;
pub(crate) mod worker;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::fiber::control::FiberRef;
use task_ref::TaskRef;
use worker::{Queued, WorkerShared};

/// Default fiber stack size, guard page included: address space, committed lazily page by
/// page. 256 KiB in optimized builds; 2 MiB in builds with debug assertions (a `cargo test`
/// or `cargo run` without `--release`), whose unoptimized frames are several times larger:
/// there a flate2 compressor alone (~300 KiB) is built on the stack before it is boxed, so
/// code that fits in 256 KiB once optimized would overflow in a test build. The threads of
/// a tokio runtime have 2 MiB.
pub const DEFAULT_STACK_SIZE: usize = if cfg!(debug_assertions) { 2 * 1024 * 1024 } else { 256 * 1024 };

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
    /// The shared task reactor, with two or more workers: sockets first waited on by a task
    /// register here, and whichever worker is idle reads it ("task sockets share one
    /// reactor", module `reactor`).
    pub(crate) io: Option<crate::reactor::shared_io::SharedIo>,
    pub(crate) injector: crossbeam_deque::Injector<FiberRef>,
    /// Runnable `Send` tasks woken or spawned outside the workers.
    pub(crate) task_injector: crossbeam_deque::Injector<TaskRef>,
    /// Which workers are idle (module `idle`).
    pub(crate) idle: idle::IdleSet,
    /// Set by `Runtime::drop` once every worker has stopped: tasks injected from then on are
    /// cancelled by whoever injects them (module `task`, "exactly one canceller").
    pub(crate) closed: AtomicBool,
    /// When the runtime was built (for the busy-time metric).
    pub(crate) started: std::time::Instant,
    /// The runtime's clock: real, or paused in tests (module `clock`). Shared with the
    /// blocking pools, whose jobs hold a paused clock's auto-advance.
    pub(crate) clock: Arc<clock::Clock>,
    /// Set (under the write lock) when `Runtime::drop` begins; spawns through a [`Handle`]
    /// hold the read lock from their check to their push, so that every spawn either lands
    /// before the workers stop (and is run or cancelled by them) or fails (module `handle`).
    pub(crate) spawn_gate: std::sync::RwLock<bool>,
    /// The threads waiting in `block_on`, and the deadlocks declared (module `deadlock`).
    pub(crate) waiters: BlockOnWaiters,
}

/// The threads waiting in a runtime's `block_on` (counted by the deadlock detector as
/// quiet), and the deadlock reports that fail them.
#[derive(Debug, Default)]
pub(crate) struct BlockOnWaiters {
    state: std::sync::Mutex<WaitersState>,
}

#[derive(Debug, Default)]
struct WaitersState {
    threads: Vec<(u64, std::thread::Thread)>,
    next_ticket: u64,
    /// The last report, and the ticket count when it was made: waiters with a smaller
    /// ticket fail with it.
    declared: Option<(u64, std::sync::Arc<str>)>,
}

impl BlockOnWaiters {
    /// Registers the calling thread as waiting in `block_on`; returns its ticket.
    pub(crate) fn enter(&self) -> u64 {
        let mut state = crate::lock::lock(&self.state);
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.threads.push((ticket, std::thread::current()));
        ticket
    }

    /// The waiter `ticket` leaves.
    pub(crate) fn leave(&self, ticket: u64) {
        crate::lock::lock(&self.state).threads.retain(|(t, _)| *t != ticket);
    }

    /// How many threads wait in `block_on` now.
    pub(crate) fn count(&self) -> usize {
        crate::lock::lock(&self.state).threads.len()
    }

    /// Fails every waiter registered so far with `report`, and wakes them.
    pub(crate) fn fail_all(&self, report: std::sync::Arc<str>) {
        let mut state = crate::lock::lock(&self.state);
        state.declared = Some((state.next_ticket, report));
        for (_, thread) in &state.threads {
            thread.unpark();
        }
    }

    /// The report that fails waiter `ticket`, if one was made since it registered.
    pub(crate) fn failed(&self, ticket: u64) -> Option<std::sync::Arc<str>> {
        let state = crate::lock::lock(&self.state);
        state.declared.as_ref().filter(|(upto, _)| ticket < *upto).map(|(_, report)| report.clone())
    }
}

impl RuntimeShared {
    /// **inject** a new (unstarted) fiber where any worker can take it, waking one idle
    /// worker.
    pub(crate) fn inject_fiber(&self, fiber: FiberRef) {
        debug_assert!(!fiber.header.started(), "only unstarted fibers may move between workers");
        self.injector.push(fiber);
        self.wake_one_idle();
    }

    /// **inject** a runnable `Send` task where any worker can take it, waking one idle
    /// worker; after shutdown, cancels it instead.
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
        // Two loads, where crossbeam's steal starts with a SeqCst fence: an idle worker asks
        // on every pass of its loop. A task injected just after this look is not lost: the
        // worker looks again after announcing that it is idle (`Worker::idle`).
        if self.task_injector.is_empty() {
            return None;
        }
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

    pub(crate) fn cancel_injected_tasks(&self) {
        while let Some(task) = self.steal_injected_task() {
            task.cancel();
        }
    }

    /// Places a new pinned fiber on worker `index % workers`: **queue** when that is the
    /// calling worker, else **send**.
    pub(crate) fn place_pinned(&self, index: usize, fiber: FiberRef) {
        debug_assert!(fiber.header.is_pinned() && !fiber.header.started());
        let target = &self.workers[index % self.workers.len()];
        match worker::current() {
            Some(w) if Arc::ptr_eq(&w.shared, target) => w.queue_fiber(fiber, Queued::Back),
            _ => target.send_fiber(fiber),
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
    pub(crate) fn steal_injected_fiber(&self) -> Option<FiberRef> {
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
