//! One worker: a thread that runs fibers from its run queue.
//!
//! # Contexts and switches
//!
//! A worker thread runs two kinds of contexts: its own (the *scheduler context*, on the
//! thread's stack, in [`Worker::run`]) and fibers (each on its own stack). A fiber that
//! yields, parks or finishes switches **directly** to the next runnable fiber; only when
//! nothing is runnable does it switch to the scheduler context, which then sleeps until a
//! remote wake-up arrives. A yield between two fibers is therefore one context switch.
//!
//! # Invariants
//!
//! 1. All `Worker` fields are touched only by the worker's own thread; other threads reach
//!    the worker through [`WorkerShared`] (the inbox and the thread handle).
//! 2. `current` holds the fiber that is running, `None` while the scheduler context runs.
//!    No `RefCell` borrow is held across a switch.
//! 3. A started fiber belongs to exactly one worker (`Header::owner`) and is resumed only by
//!    it: a remote unpark goes through the owner's inbox. A fiber is in at most one queue at a
//!    time, and only while it is runnable (park state `IDLE`).
//! 4. The registry holds a reference to every started, unfinished fiber, so a parked fiber's
//!    stack lives until the fiber is resumed, or cancelled at shutdown.
//! 5. A fiber that finished is recycled (stack back to the pool, registry entry dropped) by
//!    whichever context runs next, right after the switch: never on its own stack.
//! 6. Async tasks (module `task`, which states their ground rules) wait in three places: the
//!    worker's stealable queue (`tasks`, a crossbeam deque: the owner pushes and pops, idle
//!    workers steal from the other end), the runtime's task injector, and, for tasks pinned
//!    to this worker, `pinned_tasks` plus the `task_inbox` for wake-ups from other threads.
//!    A worker about to sleep with an empty run queue first takes injected tasks, then steals
//!    from the other workers' queues. `live_tasks` lists the tasks this worker must cancel at
//!    shutdown (it may hold finished ones; they are pruned as it grows). A fourth place is the
//!    task LIFO slot (invariant 9).
//! 7. Shutdown is seen by the scheduler loop, and by fibers every `BUSY_POLL_INTERVAL`
//!    switches (fibers that yield or ping-pong among themselves never return to the loop).
//!    From then on (`stopping`) every switch goes to the scheduler context, so `cancel_all`
//!    marks each fiber cancelled before it runs again: no fiber runs on uncancelled.
//! 8. Fibers that reach a worker's inbox after the worker exited (pinned spawns from another
//!    worker still cancelling) are cancelled by `Runtime::drop` once every worker has joined.
//! 9. **LIFO slots.** The worker has one fiber slot (`lifo_fiber`) and one task slot
//!    (`lifo_task`), touched only by its thread. A fiber that code running on this worker
//!    unparks (a send, a join completing, a lock released) goes into the fiber slot; a task
//!    that code running here wakes (`IDLE → SCHEDULED`, pinned or not) goes into the task
//!    slot. The previous occupant goes to the back of its queue. Everything else keeps FIFO
//!    order: spawns, yields (`yield_now`, a task waking itself during its poll), remote
//!    wake-ups (inboxes, injector), and wake-ups the reactor dispatches (timers, epoll; the
//!    `dispatching` flag), so that a batch of readiness runs in arrival order.
//!    The next fiber to run is the fiber slot's, and the next task to poll the task slot's,
//!    unless `LIFO_CAP` (3) runs in a row came from that slot: then its occupant goes to the
//!    back of its queue and the queue's front runs. So a ping-pong pair gets at most 3
//!    hand-offs before the rest of the queue runs, and `run_tasks` does not count slot polls
//!    against its budget (each budget unit allows at most `LIFO_CAP + 1` polls).
//!    Stealing: the fiber slot holds only started fibers (only a parked fiber is unparked),
//!    which never move anyway (soundness rule 1). The task slot is not stealable. Its task
//!    waits at most until the current task poll ends, or until the running fiber's next
//!    switch (`switch_away` goes to the scheduler context whenever a task is queued, slot
//!    included), the same wait as at the front of the deque; the worker never sleeps with a
//!    full slot (`has_runnable`), and a displaced occupant goes to the stealable queue, which
//!    wakes an idle worker as before. What a thief cannot take is the one task woken during a
//!    poll that then runs long: tokio's known LIFO pitfall, bounded here by the watchdog's
//!    warning about polls over `long_running_budget`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::Instant;

use super::metrics::{bump, FiberInfo, WorkerStats};
use super::registry::Registry;
use super::RuntimeShared;
use crate::fiber::arch;
use crate::fiber::cell::{FiberRef, Header};
use crate::fiber::overflow;
use crate::fiber::sanitizer;
use crate::fiber::stack_pool::StackPool;
use crate::fiber::sync_word::Park;
use crate::fiber::Cancelled;
use crate::reactor::wheel::{TimerKey, TimerWheel};
use crate::reactor::Driver;
use crate::sys::epoll::Event;
use crate::task::TaskRef;

/// A busy worker polls its reactor (non-blocking) every this many switches (a power of two).
const BUSY_POLL_INTERVAL: u32 = 64;

/// A worker with local tasks takes one from the task injector every this many polls.
const INJECTOR_CHECK_INTERVAL: u32 = 61;

/// The most consecutive runs taken from a LIFO slot (invariant 9), as in tokio: then the
/// slot's occupant goes to the back of its queue, so a ping-pong pair cannot starve the rest.
const LIFO_CAP: u8 = 3;

/// Wakes a fiber: the `Waker` of fibers, so that futures, timers and I/O wake them alike.
struct FiberWake(FiberRef);

impl Wake for FiberWake {
    fn wake(self: Arc<Self>) {
        unpark(&self.0);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        unpark(&self.0);
    }
}

/// How long a worker must stay idle before it gives its cached stacks' pages back.
const TRIM_AFTER_IDLE: std::time::Duration = std::time::Duration::from_millis(200);

std::thread_local! {
    /// The worker running on this thread, or null.
    static WORKER: Cell<*const Worker> = const { Cell::new(std::ptr::null()) };
}

/// The current thread's worker, if this thread is a worker.
///
/// The reference is valid for as long as code runs on this worker thread inside
/// [`Worker::run`]: every fiber runs there, and the worker outlives all of them (they finish
/// or are cancelled before `run` returns). Callers must not keep it beyond that, which holds
/// for all crate-internal callers (they use it within one call).
#[inline]
pub(crate) fn current() -> Option<&'static Worker> {
    let ptr = WORKER.with(|w| w.get());
    // SAFETY: WORKER is set by `Worker::run` to a worker that lives on that frame until it
    // clears WORKER again before returning; see the function doc for the lifetime.
    unsafe { ptr.as_ref() }
}

/// A timer on one worker's wheel. A task may move to another worker between polls, so a
/// timer remembers its wheel: cancelling it from another worker is a no-op (it fires there
/// later and wakes its waker once, spuriously).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimerHandle {
    key: TimerKey,
    /// Address of the `WorkerShared` whose wheel holds the timer.
    worker: usize,
}

/// The part of a worker that other threads may touch.
#[derive(Debug)]
pub(crate) struct WorkerShared {
    /// Identifies the runtime, to detect `block_on` from inside its own workers.
    pub(crate) runtime_id: u64,
    /// This worker's index in the runtime.
    pub(crate) index: usize,
    /// Counters and liveness signals (module `metrics`).
    pub(crate) stats: WorkerStats,
    inbox: Mutex<Vec<FiberRef>>,
    /// Pinned tasks woken by other threads.
    task_inbox: Mutex<Vec<TaskRef>>,
    /// The thieves' end of the worker's stealable task queue.
    stealer: crossbeam_deque::Stealer<TaskRef>,
    /// The owner's end, until the worker's thread takes it.
    deque: Mutex<Option<crossbeam_deque::Worker<TaskRef>>>,
    /// The worker's thread, set when it is spawned.
    pub(crate) thread: std::sync::OnceLock<std::thread::ThreadId>,
    pub(crate) shutdown: AtomicBool,
    /// The worker's epoll instance, wake-up eventfd and registrations.
    pub(crate) driver: Driver,
}

impl WorkerShared {
    pub(crate) fn new(runtime_id: u64, index: usize) -> std::io::Result<WorkerShared> {
        let deque = crossbeam_deque::Worker::new_fifo();
        Ok(WorkerShared {
            stealer: deque.stealer(),
            deque: Mutex::new(Some(deque)),
            thread: std::sync::OnceLock::new(),
            runtime_id,
            index,
            stats: WorkerStats::default(),
            inbox: Mutex::new(Vec::new()),
            task_inbox: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            driver: Driver::new()?,
        })
    }

    /// Hands a runnable fiber to this worker from any thread and wakes the worker.
    pub(crate) fn schedule_remote(&self, fiber: FiberRef) {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner()).push(fiber);
        self.driver.publish_remote_work();
    }

    /// Whether the calling thread is this worker's.
    pub(crate) fn is_current_thread(&self) -> bool {
        self.thread.get() == Some(&std::thread::current().id())
    }

    /// Hands a runnable pinned task to this worker from any thread and wakes the worker.
    pub(crate) fn schedule_task_remote(&self, task: TaskRef) {
        self.task_inbox.lock().unwrap_or_else(|e| e.into_inner()).push(task);
        self.driver.publish_remote_work();
    }

    /// Takes what waits in the inbox (after the worker exited: invariant 8).
    pub(crate) fn take_inbox(&self) -> Vec<FiberRef> {
        std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Asks the worker to shut down and wakes it.
    pub(crate) fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.driver.force_wake();
    }
}

/// A worker's thread-local state.
pub(crate) struct Worker {
    pub(crate) shared: Arc<WorkerShared>,
    pub(crate) rt: Arc<RuntimeShared>,
    run_queue: RefCell<VecDeque<FiberRef>>,
    /// Runnable `Send` tasks (invariant 6): polled by the scheduler context, on the thread's
    /// own stack; idle workers steal from the other end.
    tasks: crossbeam_deque::Worker<TaskRef>,
    /// Runnable tasks pinned to this worker (`spawn_local`): never stolen.
    pinned_tasks: RefCell<VecDeque<TaskRef>>,
    /// Tasks this worker cancels at shutdown, including those that wait for a wake-up and
    /// sit in no queue (task ground rule 3). Finished ones are pruned when it doubles.
    live_tasks: RefCell<Vec<TaskRef>>,
    /// `live_tasks` length that triggers the next pruning.
    prune_at: Cell<usize>,
    /// Task polls since the task injector was last checked.
    polls: Cell<u32>,
    current: Cell<Option<FiberRef>>,
    /// Saved stack pointer of the scheduler context while a fiber runs.
    sched_sp: Cell<usize>,
    /// What ASan and TSan know of the scheduler context (zero-sized unless built for them).
    san: sanitizer::Context,
    /// A fiber that finished and awaits recycling by the next context (invariant 5).
    finished: Cell<Option<FiberRef>>,
    pool: RefCell<StackPool>,
    registry: RefCell<Registry>,
    /// Timers of the fibers and futures of this worker.
    timers: RefCell<TimerWheel<Waker>>,
    /// Reused buffers: epoll events, fired timers.
    events: RefCell<Vec<Event>>,
    fired: RefCell<Vec<Waker>>,
    /// Switches since the last non-blocking poll of the reactor (busy workers poll I/O and
    /// timers every `BUSY_POLL_INTERVAL` switches).
    ticks: Cell<u32>,
    /// Shutdown was seen (invariant 7): every switch goes back to the scheduler context, which
    /// stops the loop and cancels what is left.
    stopping: Cell<bool>,
    /// The fiber LIFO slot (invariant 9): the last fiber this worker's code unparked, to run
    /// next; and how many runs in a row were taken from it.
    lifo_fiber: Cell<Option<FiberRef>>,
    lifo_fiber_runs: Cell<u8>,
    /// The task LIFO slot (invariant 9), whether its task is pinned, and how many polls in a
    /// row were taken from it.
    lifo_task: Cell<Option<TaskRef>>,
    lifo_task_pinned: Cell<bool>,
    lifo_task_polls: Cell<u8>,
    /// Set while the reactor dispatches wake-ups (timers, epoll): those keep FIFO order.
    dispatching: Cell<bool>,
}

impl Worker {
    pub(crate) fn new(rt: Arc<RuntimeShared>, index: usize) -> Worker {
        let pool = StackPool::new(rt.config.stack_cache, rt.config.stack_keep_warm);
        let tasks = rt.workers[index]
            .deque
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("a worker's task queue is taken once");
        Worker {
            shared: rt.workers[index].clone(),
            rt,
            run_queue: RefCell::new(VecDeque::new()),
            tasks,
            pinned_tasks: RefCell::new(VecDeque::new()),
            live_tasks: RefCell::new(Vec::new()),
            prune_at: Cell::new(64),
            polls: Cell::new(0),
            current: Cell::new(None),
            sched_sp: Cell::new(0),
            san: {
                // Worker::new runs on the worker's own thread.
                let san = sanitizer::Context::default();
                san.this_thread();
                san
            },
            finished: Cell::new(None),
            pool: RefCell::new(pool),
            registry: RefCell::new(Registry::default()),
            timers: RefCell::new(TimerWheel::new(Instant::now())),
            events: RefCell::new(Vec::with_capacity(256)),
            fired: RefCell::new(Vec::new()),
            ticks: Cell::new(0),
            stopping: Cell::new(false),
            lifo_fiber: Cell::new(None),
            lifo_fiber_runs: Cell::new(0),
            lifo_task: Cell::new(None),
            lifo_task_pinned: Cell::new(false),
            lifo_task_polls: Cell::new(0),
            dispatching: Cell::new(false),
        }
    }

    /// Runs the scheduler context until shutdown is requested, then cancels what is left.
    pub(crate) fn run(&self) {
        let _alt = overflow::AltStack::ensure();
        WORKER.with(|w| w.set(self));
        loop {
            if self.stopping.get() {
                break; // a fiber saw the shutdown between two switches (invariant 7)
            }
            self.run_tasks();
            if let Some(next) = self.pop_runnable() {
                self.resume_from_scheduler(next);
                continue;
            }
            if let Some(next) = self.take_injected() {
                self.resume_from_scheduler(next);
                continue;
            }
            // Checked before taking more tasks: tasks that keep waking themselves would
            // otherwise keep the worker from ever seeing the shutdown.
            if self.shared.shutdown.load(Ordering::Acquire) {
                self.stopping.set(true);
                break;
            }
            if self.has_queued_tasks() || self.find_tasks() {
                continue;
            }
            log::trace!(
                "worker {} idle with {} parked fibers",
                self.shared.index,
                self.registry.borrow().len()
            );
            self.idle();
        }
        self.cancel_all();
        WORKER.with(|w| w.set(std::ptr::null()));
    }

    /// The scheduler context has nothing to run: fire due timers, then block in the reactor
    /// until I/O, a timer or a remote wake-up makes something runnable. Trims the stack pool
    /// once the worker has stayed idle for `TRIM_AFTER_IDLE`.
    fn idle(&self) {
        let now = Instant::now();
        self.fire_timers(now);
        if self.has_runnable() {
            return;
        }
        let next_timer = self.timers.borrow().next_deadline().map(|d| d.saturating_duration_since(now));
        let trim = self.pool.borrow().needs_trim();
        let timeout = match (next_timer, trim) {
            (Some(t), true) => Some(t.min(TRIM_AFTER_IDLE)),
            (Some(t), false) => Some(t),
            (None, true) => Some(TRIM_AFTER_IDLE),
            (None, false) => None,
        };
        let driver = &self.shared.driver;
        // Announce idleness, then look at the injector one last time (RuntimeShared's
        // placement invariant), then at the inbox (SleepGate).
        self.rt.enter_idle(&self.shared);
        if !self.rt.injector_is_empty() || !self.rt.task_injector_is_empty() {
            self.rt.leave_idle(&self.shared);
            return;
        }
        if !driver.begin_sleep() {
            self.rt.leave_idle(&self.shared);
            return; // remote work arrived
        }
        if self.shared.shutdown.load(Ordering::SeqCst) {
            driver.end_sleep();
            self.rt.leave_idle(&self.shared);
            return;
        }
        let stats = &self.shared.stats;
        bump(&stats.sleeps, 1);
        stats.sleeping.store(true, Ordering::Relaxed);
        let slept_from = Instant::now();
        let ready = {
            let mut events = self.events.borrow_mut();
            self.dispatching.set(true);
            let ready = driver.poll(&mut events, timeout).unwrap_or_else(|e| {
                crate::report::error(format_args!("spindle: epoll_wait failed: {e}"));
                0
            });
            self.dispatching.set(false);
            driver.end_sleep();
            self.rt.leave_idle(&self.shared);
            ready
        };
        let after = Instant::now();
        bump(&stats.sleep_ns, u64::try_from((after - slept_from).as_nanos()).unwrap_or(u64::MAX));
        stats.sleeping.store(false, Ordering::Relaxed);
        self.fire_timers(after);
        if trim && ready == 0 && !self.has_runnable() && after - now >= TRIM_AFTER_IDLE {
            self.pool.borrow_mut().trim();
        }
    }

    /// Wakes the owners of every timer that is due (after releasing the wheel: a waker may
    /// add timers).
    fn fire_timers(&self, now: Instant) {
        let mut wakers = {
            let mut timers = self.timers.borrow_mut();
            if timers.is_empty() {
                return;
            }
            let mut buf = std::mem::take(&mut *self.fired.borrow_mut());
            timers.advance(now, |w| buf.push(w));
            buf
        };
        self.dispatching.set(true);
        for w in wakers.drain(..) {
            w.wake();
        }
        self.dispatching.set(false);
        *self.fired.borrow_mut() = wakers;
    }

    /// Counts a switch; every `BUSY_POLL_INTERVAL` of them, polls the reactor without blocking
    /// and looks for a shutdown request (fibers that keep switching among themselves never
    /// return to the scheduler loop, which is where shutdown is otherwise noticed).
    #[inline]
    fn tick(&self) {
        let ticks = self.ticks.get().wrapping_add(1);
        self.ticks.set(ticks);
        if ticks & (BUSY_POLL_INTERVAL - 1) == 0 {
            self.poll_busy();
            self.balance();
            if self.shared.shutdown.load(Ordering::Relaxed) {
                self.stopping.set(true);
            }
        }
    }

    /// A busy worker's look at the reactor: non-blocking, only when something could be due.
    #[cold]
    fn poll_busy(&self) {
        let has_timers = !self.timers.borrow().is_empty();
        if has_timers {
            self.fire_timers(Instant::now());
        }
        if self.shared.driver.has_registrations() {
            let mut events = self.events.borrow_mut();
            self.dispatching.set(true);
            if let Err(e) = self.shared.driver.poll(&mut events, Some(std::time::Duration::ZERO)) {
                crate::report::error(format_args!("spindle: epoll_wait failed: {e}"));
            }
            self.dispatching.set(false);
        }
    }

    /// Adds a timer that wakes `waker` at `deadline`.
    pub(crate) fn add_timer(&self, deadline: Instant, waker: Waker) -> TimerHandle {
        let key = self.timers.borrow_mut().insert(deadline, waker);
        TimerHandle { key, worker: Arc::as_ptr(&self.shared) as usize }
    }

    /// Cancels a timer (no-op if it fired already, or if it is on another worker's wheel).
    pub(crate) fn cancel_timer(&self, timer: TimerHandle) {
        if timer.worker == Arc::as_ptr(&self.shared) as usize {
            let _ = self.timers.borrow_mut().cancel(timer.key);
        }
    }

    /// A waker that unparks the running fiber (cached in its header until it finishes).
    pub(crate) fn current_waker(&self) -> Waker {
        self.with_current(|f| {
            let fiber = f.expect("current_waker outside a fiber");
            let cached = fiber.header.waker.take();
            let waker = cached.unwrap_or_else(|| Waker::from(Arc::new(FiberWake(fiber.clone()))));
            fiber.header.waker.set(Some(waker.clone()));
            waker
        })
    }

    /// Polls the queued tasks: at most as many from the queues as were queued on entry, so
    /// that tasks that keep waking themselves cannot starve the fibers, plus the LIFO slot's
    /// (at most `LIFO_CAP` in a row, invariant 9). Every `INJECTOR_CHECK_INTERVAL` polls one
    /// injected task joins the local queue, so that injected tasks are not starved either.
    fn run_tasks(&self) {
        let mut budget =
            self.pinned_tasks.borrow().len() + self.tasks.len() + usize::from(self.has_lifo_task());
        if budget == 0 {
            return;
        }
        while budget > 0 {
            let Some((task, from_slot)) = self.next_task() else { break };
            if !from_slot {
                budget -= 1;
            }
            bump(&self.shared.stats.tasks_polled, 1);
            bump(&self.shared.stats.progress, 1);
            task.clone().run();
            if !task.is_done() && task.register_once() {
                self.register_task(task);
            }
            let polls = self.polls.get().wrapping_add(1);
            self.polls.set(polls);
            if polls.is_multiple_of(INJECTOR_CHECK_INTERVAL) {
                if let Some(t) = self.rt.steal_injected_task() {
                    self.tasks.push(t);
                }
            }
        }
        self.share_tasks();
    }

    /// With runnable tasks left over and a worker idle, wakes that worker to steal some.
    #[inline]
    fn share_tasks(&self) {
        if self.tasks.len() > 1 && self.rt.has_idle_workers() {
            self.rt.wake_one_idle();
        }
    }

    /// Adds a task to the list this worker cancels at shutdown (task ground rule 3).
    pub(crate) fn register_task(&self, task: TaskRef) {
        let mut live = self.live_tasks.borrow_mut();
        live.push(task);
        if live.len() >= self.prune_at.get() {
            live.retain(|t| !t.is_done());
            self.prune_at.set((live.len() * 2).max(64));
        }
    }

    /// Queues a `Send` task that is runnable: into the LIFO slot when `woken` by this
    /// worker's own code (invariant 9), else at the back of the stealable queue.
    pub(crate) fn schedule_task_local(&self, task: TaskRef, woken: bool) {
        if woken && !self.dispatching.get() {
            self.put_lifo_task(task, false);
        } else {
            self.push_task(task);
        }
    }

    /// Queues a task pinned to this worker, like [`schedule_task_local`](Self::schedule_task_local).
    pub(crate) fn schedule_pinned_local(&self, task: TaskRef, woken: bool) {
        if woken && !self.dispatching.get() {
            self.put_lifo_task(task, true);
        } else {
            self.pinned_tasks.borrow_mut().push_back(task);
        }
    }

    /// Back of the stealable queue; wakes an idle worker when a few tasks wait.
    fn push_task(&self, task: TaskRef) {
        self.tasks.push(task);
        if self.tasks.len() > 2 && self.rt.has_idle_workers() {
            self.rt.wake_one_idle();
        }
    }

    /// Puts a task into the LIFO slot; the previous occupant goes to the back of its queue.
    #[inline]
    fn put_lifo_task(&self, task: TaskRef, pinned: bool) {
        let prev_pinned = self.lifo_task_pinned.replace(pinned);
        if let Some(prev) = self.lifo_task.replace(Some(task)) {
            self.queue_task_back(prev, prev_pinned);
        }
    }

    fn queue_task_back(&self, task: TaskRef, pinned: bool) {
        if pinned {
            self.pinned_tasks.borrow_mut().push_back(task);
        } else {
            self.push_task(task);
        }
    }

    /// The next task to poll, and whether it came from the LIFO slot: the slot's task unless
    /// `LIFO_CAP` polls in a row came from there (then it goes to the back of its queue), else
    /// the pinned queue's, else the stealable queue's.
    fn next_task(&self) -> Option<(TaskRef, bool)> {
        if let Some(task) = self.lifo_task.take() {
            let polls = self.lifo_task_polls.get();
            if polls < LIFO_CAP {
                self.lifo_task_polls.set(polls + 1);
                return Some((task, true));
            }
            self.queue_task_back(task, self.lifo_task_pinned.get());
        }
        self.lifo_task_polls.set(0);
        let pinned = self.pinned_tasks.borrow_mut().pop_front();
        pinned.or_else(|| self.tasks.pop()).map(|t| (t, false))
    }

    /// Whether the task LIFO slot is full (on the switch path: a read, no store).
    #[inline]
    fn has_lifo_task(&self) -> bool {
        // SAFETY: the slot is touched only by this thread (invariant 1) and no reference into
        // it is alive (`Cell` hands out none): reading its discriminant in place is a plain
        // read of an initialised value.
        unsafe { (*self.lifo_task.as_ptr()).is_some() }
    }

    fn has_queued_tasks(&self) -> bool {
        !self.tasks.is_empty() || !self.pinned_tasks.borrow().is_empty() || self.has_lifo_task()
    }

    /// An idle worker looks for tasks: the task injector first, then the other workers'
    /// stealable queues (half of one queue at a time). True if it found some.
    fn find_tasks(&self) -> bool {
        if let Some(t) = self.rt.steal_injected_tasks(&self.tasks) {
            self.tasks.push(t);
            return true;
        }
        let workers = &self.rt.workers;
        let n = workers.len();
        for k in 1..n {
            let victim = &workers[(self.shared.index + k) % n];
            loop {
                let before = self.tasks.len();
                match victim.stealer.steal_batch_and_pop(&self.tasks) {
                    crossbeam_deque::Steal::Success(t) => {
                        let stolen = self.tasks.len() - before + 1;
                        bump(&self.shared.stats.steals, stolen as u64);
                        self.tasks.push(t);
                        return true;
                    }
                    crossbeam_deque::Steal::Empty => break,
                    crossbeam_deque::Steal::Retry => {}
                }
            }
        }
        false
    }

    /// Takes a new fiber from the injector (counted).
    fn take_injected(&self) -> Option<FiberRef> {
        let f = self.rt.steal_injected()?;
        bump(&self.shared.stats.injected_taken, 1);
        Some(f)
    }

    /// This worker's fibers, for `Runtime::dump_fibers` (runs on the worker's thread).
    pub(crate) fn dump(&self) -> Vec<FiberInfo> {
        self.registry
            .borrow()
            .iter()
            .map(|f| FiberInfo {
                id: f.header.id,
                name: f.header.name.as_deref().map(str::to_owned),
                worker: self.shared.index,
                waiting_on: if f.header.park.is_parked() { f.header.waiting_on.get() } else { "runnable" },
            })
            .collect()
    }

    /// Places a new fiber: on this worker when it is pinned (`spawn_local`), when it has nothing else queued (the spawner often
    /// waits for it next: running it here costs no cross-thread hop) or while every worker is
    /// busy; otherwise in the injector, waking an idle worker.
    pub(crate) fn place_new(&self, fiber: FiberRef) {
        if !fiber.header.pinned && self.rt.has_idle_workers() && !self.run_queue.borrow().is_empty() {
            self.rt.inject(fiber);
        } else {
            self.schedule_local(fiber);
        }
    }

    /// A busy worker's share of balancing, every `BUSY_POLL_INTERVAL` switches: hand the
    /// unstarted half of its backlog to the injector when other workers are idle, and take an
    /// injected fiber now and then so that injected work is not starved by local work.
    #[cold]
    fn balance(&self) {
        if self.rt.workers.len() == 1 {
            return;
        }
        if self.rt.has_idle_workers() {
            let mut queue = self.run_queue.borrow_mut();
            let mut give = queue.len() / 2;
            let mut kept = VecDeque::new();
            while give > 0 {
                let Some(f) = queue.pop_back() else { break };
                if f.header.started() || f.header.pinned {
                    // Started fibers never move (soundness rule 1), nor do spawn_local ones.
                    kept.push_front(f);
                } else {
                    give -= 1;
                    bump(&self.shared.stats.shared_out, 1);
                    self.rt.inject(f);
                }
                if kept.len() > 64 {
                    break;
                }
            }
            queue.extend(kept);
        } else if let Some(f) = self.take_injected() {
            self.run_queue.borrow_mut().push_back(f);
        }
        self.share_tasks();
    }

    /// Queues a fiber that is runnable on this worker (local, no synchronisation).
    pub(crate) fn schedule_local(&self, fiber: FiberRef) {
        self.run_queue.borrow_mut().push_back(fiber);
    }

    /// Queues a fiber that this worker's code has just unparked: into the LIFO slot (the
    /// previous occupant goes to the back of the run queue), unless the reactor is
    /// dispatching (invariant 9).
    #[inline]
    fn schedule_woken(&self, fiber: FiberRef) {
        if self.dispatching.get() {
            return self.schedule_local(fiber);
        }
        if let Some(prev) = self.lifo_fiber.replace(Some(fiber)) {
            self.run_queue.borrow_mut().push_back(prev);
        }
    }

    /// Whether a fiber is running on this worker (the caller is that fiber), without cloning it.
    #[inline]
    pub(crate) fn in_fiber(&self) -> bool {
        // SAFETY: `current` is owner-only (we are on the worker's thread) and no reference
        // into the cell is alive; we only read whether it holds a fiber.
        unsafe { (*self.current.as_ptr()).is_some() }
    }

    /// The running fiber, if a fiber is running.
    pub(crate) fn current_fiber(&self) -> Option<FiberRef> {
        let fiber = self.current.take();
        let copy = fiber.clone();
        self.current.set(fiber);
        copy
    }

    /// Runs `f` on the running fiber's header (`None` in the scheduler context).
    #[inline]
    fn with_current<R>(&self, f: impl FnOnce(Option<&FiberRef>) -> R) -> R {
        let fiber = self.current.take();
        let r = f(fiber.as_ref());
        self.current.set(fiber);
        r
    }

    /// Runs the body of the current fiber; called by [`fiber_entry`] on the fiber's stack.
    fn run_current(&self) {
        let cell: *const crate::fiber::cell::FiberCell<dyn crate::fiber::cell::Stage> =
            self.with_current(|f| Arc::as_ptr(f.expect("fiber entry without a fiber")));
        // SAFETY: the registry holds a reference to this started fiber until it finishes
        // (invariant 4), so the cell outlives this call; no RefCell borrow is held while the
        // user's closure runs.
        let cell = unsafe { &*cell };
        if cell.header.is_cancelled() {
            // Cancelled before its first run: complete without running the closure.
            cell.stage.abort_unstarted(&cell.header, Box::new(Cancelled));
            return;
        }
        cell.stage.run(&cell.header);
    }

    /// Takes the next runnable fiber, draining the inbox first if it has something: the LIFO
    /// slot's unless `LIFO_CAP` runs in a row came from there, else the run queue's front.
    #[inline]
    fn pop_runnable(&self) -> Option<FiberRef> {
        if self.shared.driver.has_remote_work() {
            self.drain_inbox();
        }
        if self.has_lifo_fiber() {
            if let Some(fiber) = self.pop_lifo_fiber() {
                return Some(fiber);
            }
        } else if self.lifo_fiber_runs.get() != 0 {
            self.lifo_fiber_runs.set(0);
        }
        self.run_queue.borrow_mut().pop_front()
    }

    /// The fiber LIFO slot's occupant, unless `LIFO_CAP` runs in a row came from the slot:
    /// then it goes to the back of the run queue instead (`None`). Out of line, so that
    /// `pop_runnable` stays small enough to inline into the switch paths.
    #[inline(never)]
    fn pop_lifo_fiber(&self) -> Option<FiberRef> {
        let fiber = self.lifo_fiber.take()?;
        let runs = self.lifo_fiber_runs.get();
        if runs < LIFO_CAP {
            self.lifo_fiber_runs.set(runs + 1);
            return Some(fiber);
        }
        self.lifo_fiber_runs.set(0);
        self.run_queue.borrow_mut().push_back(fiber);
        None
    }

    #[cold]
    fn drain_inbox(&self) {
        if self.shared.driver.take_remote_work() {
            bump(&self.shared.stats.remote_wakeups, 1);
            let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            self.run_queue.borrow_mut().extend(inbox.drain(..));
            drop(inbox);
            let mut tasks = self.shared.task_inbox.lock().unwrap_or_else(|e| e.into_inner());
            self.pinned_tasks.borrow_mut().extend(tasks.drain(..));
        }
    }

    fn has_runnable(&self) -> bool {
        !self.run_queue.borrow().is_empty()
            || self.has_lifo_fiber()
            || self.has_queued_tasks()
            || self.shared.driver.has_remote_work()
    }

    /// Whether the fiber LIFO slot is full (on the switch path: a read, no store).
    #[inline]
    fn has_lifo_fiber(&self) -> bool {
        // SAFETY: as in `has_lifo_task`: owner-only slot, no reference into it alive.
        unsafe { (*self.lifo_fiber.as_ptr()).is_some() }
    }

    /// A stack of `len` bytes from this worker's pool, with an error that says what failed.
    pub(crate) fn alloc_stack(&self, len: usize) -> io::Result<crate::fiber::stack::Stack> {
        self.pool.borrow_mut().get(len).map_err(|err| {
            io::Error::new(err.kind(), format!("could not allocate a {len} byte fiber stack: {err}"))
        })
    }

    /// Makes `fiber` ready to be switched to: on its first run, gives it a stack and an owner.
    /// Returns the stack pointer to switch to, or `None` when it could not start (it is then
    /// completed with the error as its panic payload).
    #[inline]
    fn prepare(&self, fiber: &FiberRef) -> Option<usize> {
        let header = &fiber.header;
        if header.started() {
            return Some(header.sp.get());
        }
        self.start(fiber)
    }

    /// The first-run half of [`prepare`](Self::prepare).
    #[cold]
    #[inline(never)]
    fn start(&self, fiber: &FiberRef) -> Option<usize> {
        let header = &fiber.header;
        // A fiber spawned on a worker got its stack at spawn; one spawned from outside the
        // runtime gets it now, and a failure here can only reach its joiner.
        let stack = match header.stack.take() {
            Some(stack) => stack,
            None => match self.alloc_stack(header.stack_size) {
                Ok(stack) => stack,
                Err(err) => {
                    crate::report::error(format_args!(
                        "spindle: fiber {} ({}): {err}",
                        header.id,
                        header.display_name()
                    ));
                    fiber.stage.abort_unstarted(header, Box::new(err.to_string()));
                    return None;
                }
            },
        };
        // SAFETY: the stack is fresh or recycled (nothing runs on it), 16-aligned at the top,
        // and has a guard page below (Stack's contract).
        let sp = unsafe { arch::init_stack(stack.top(), fiber_entry, std::ptr::null_mut()) };
        header.guard.set(stack.guard());
        header.san.start_fiber(stack.bottom(), stack.top());
        header.stack.set(Some(stack));
        header.sp.set(sp);
        header.set_owner(&self.shared);
        let slot = self.registry.borrow_mut().insert(fiber.clone());
        header.slot.set(slot);
        bump(&self.shared.stats.fibers_started, 1);
        self.shared.stats.parked_fibers.store(self.registry.borrow().len() as u64, Ordering::Relaxed);
        Some(sp)
    }

    /// From the scheduler context: switch into `fiber` until it switches back.
    fn resume_from_scheduler(&self, fiber: FiberRef) {
        let Some(sp) = self.prepare(&fiber) else { return };
        self.note_resume(&fiber.header);
        overflow::set_running(&fiber.header);
        let to: *const sanitizer::Context = &fiber.header.san;
        self.current.set(Some(fiber));
        // SAFETY: `to` is in the header of the fiber `current` now holds, alive until the
        // switch (and the fiber's header outlives its run).
        sanitizer::before_switch(&self.san, unsafe { &*to }, || false);
        // SAFETY: `sched_sp` is our own save slot; `sp` was saved by a switch away from this
        // fiber or made by init_stack, and is resumed once (the fiber was in exactly one
        // queue, invariant 3).
        unsafe { arch::switch(self.sched_sp.as_ptr(), sp, 0) };
        sanitizer::after_switch(&self.san);
        overflow::set_running(std::ptr::null());
        self.shared.stats.running_fiber.store(0, Ordering::Relaxed);
        self.after_switch();
    }

    /// Counts a switch into `header`'s fiber and publishes it as running (for the watchdog).
    #[inline]
    fn note_resume(&self, header: &Header) {
        let stats = &self.shared.stats;
        bump(&stats.fibers_resumed, 1);
        bump(&stats.progress, 1);
        stats.running_fiber.store(header.id, Ordering::Relaxed);
    }

    /// From a fiber: switch to the next runnable fiber, or to the scheduler context. `save`
    /// is the running fiber's stack pointer slot; `me` identifies it, so that if it is the
    /// next runnable one (woken meanwhile, or yielding alone) we simply keep running.
    /// `next`, when given, is the fiber to try first (the caller popped it already).
    #[inline]
    fn switch_away(&self, save: *mut usize, me: *const Header, mut next: Option<FiberRef>) {
        self.tick();
        let (target, to): (usize, *const sanitizer::Context) = loop {
            if self.stopping.get() || self.has_queued_tasks() {
                // Tasks run in the scheduler context, and during shutdown every switch goes
                // there (invariant 7); a fiber we popped goes back first.
                if let Some(n) = next.take() {
                    self.run_queue.borrow_mut().push_front(n);
                }
                self.shared.stats.running_fiber.store(0, Ordering::Relaxed);
                overflow::set_running(std::ptr::null());
                break (self.sched_sp.get(), &self.san);
            }
            match next.take().or_else(|| self.pop_runnable()).or_else(|| self.take_injected()) {
                None => {
                    self.shared.stats.running_fiber.store(0, Ordering::Relaxed);
                    overflow::set_running(std::ptr::null());
                    break (self.sched_sp.get(), &self.san);
                }
                Some(next) if std::ptr::eq(&next.header, me) => {
                    self.current.set(Some(next));
                    return;
                }
                Some(next) => {
                    if let Some(sp) = self.prepare(&next) {
                        self.note_resume(&next.header);
                        overflow::set_running(&next.header);
                        let to: *const sanitizer::Context = &next.header.san;
                        self.current.set(Some(next));
                        break (sp, to);
                    }
                }
            }
        };
        // SAFETY: `me` is the running fiber's header (alive: `current` or `finished` holds
        // it), `to` the scheduler's context or the header of the fiber `current` now holds.
        let (from, to) = unsafe { (&(*me).san, &*to) };
        sanitizer::before_switch(from, to, || self.is_finished_fiber(me));
        // SAFETY: `save` is the running fiber's own slot; `target` is the scheduler context's
        // saved pointer or a runnable fiber's (prepared above), resumed exactly once.
        unsafe { arch::switch(save, target, 0) };
        sanitizer::after_switch(from);
        self.after_switch();
    }

    /// Whether `me` is the fiber that finished and awaits recycling (it leaves for good).
    fn is_finished_fiber(&self, me: *const Header) -> bool {
        let done = self.finished.take();
        let is = done.as_ref().is_some_and(|f| std::ptr::eq(&f.header, me));
        self.finished.set(done);
        is
    }

    /// Recycles a fiber that finished before the switch that brought us here (invariant 5).
    #[inline]
    fn after_switch(&self) {
        let done = self.finished.take();
        if done.is_some() {
            self.recycle(done);
        }
    }

    #[cold]
    #[inline(never)]
    fn recycle(&self, done: Option<FiberRef>) {
        if let Some(done) = done {
            done.header.san.destroy_fiber();
            if let Some(stack) = done.header.stack.take() {
                self.pool.borrow_mut().put(stack);
            }
            self.registry.borrow_mut().remove(done.header.slot.get());
            self.shared.stats.parked_fibers.store(self.registry.borrow().len() as u64, Ordering::Relaxed);
        }
    }

    /// Yields the running fiber: it goes to the back of the run queue.
    pub(crate) fn yield_fiber(&self) {
        let next = self.pop_runnable();
        if next.is_none() && !self.has_queued_tasks() {
            // Nothing else is runnable: keep running, but still look at the reactor now and
            // then, or a fiber spinning on yield_now would starve timers and I/O.
            self.tick();
            if self.stopping.get() {
                // Shutdown: let the scheduler context cancel us (invariant 7).
                let me = self.current.take().expect("yield_now outside a fiber on a worker");
                let header: *const Header = &me.header;
                let save = me.header.sp.as_ptr();
                self.schedule_local(me);
                self.switch_away(save, header, None);
            }
            return check_cancel(self);
        }
        // Another fiber, or queued tasks (`switch_away` then goes to the scheduler context
        // to poll them: a fiber spinning on yield_now must not starve the tasks either).
        let me = self.current.take().expect("yield_now outside a fiber on a worker");
        let header: *const Header = &me.header;
        let save = me.header.sp.as_ptr();
        self.schedule_local(me);
        self.switch_away(save, header, next);
        check_cancel(self);
    }

    /// Parks the running fiber until [`unpark`] (or returns at once if a permit is pending).
    pub(crate) fn park_fiber(&self, reason: &'static str) {
        let me = self.current.take().expect(
            "a blocking spindle call (channel, lock, join, sleep, socket) was made outside a fiber on a \
             worker thread, e.g. from an async task: use the async API there",
        );
        let header: *const Header = &me.header;
        if me.header.is_cancelled() || me.header.park.park() == Park::Return {
            self.current.set(Some(me));
            return check_cancel(self);
        }
        me.header.waiting_on.set(reason);
        let save = me.header.sp.as_ptr();
        // The registry keeps the fiber alive while parked (invariant 4).
        drop(me);
        self.switch_away(save, header, None);
        check_cancel(self);
    }

    /// Ends the running fiber: the next context recycles it. Never returns.
    fn finish(&self) -> ! {
        let me = self.current.take().expect("finish outside a fiber");
        // Break the fiber -> waker -> fiber cycle now that nothing can wait on its behalf.
        drop(me.header.waker.take());
        let header: *const Header = &me.header;
        let save = me.header.sp.as_ptr();
        let previous = self.finished.replace(Some(me));
        debug_assert!(previous.is_none(), "two finished fibers awaiting recycling");
        self.switch_away(save, header, None);
        unreachable!("a finished fiber was resumed");
    }

    /// Shutdown: cancels the tasks in this worker's queues and live list, and those in the
    /// task injector (task ground rule 3). True if there were any.
    fn cancel_tasks(&self) -> bool {
        self.drain_inbox();
        let mut any = false;
        loop {
            let slot = self.lifo_task.take();
            let pinned = slot.or_else(|| self.pinned_tasks.borrow_mut().pop_front());
            let Some(task) = pinned.or_else(|| self.tasks.pop()).or_else(|| self.rt.steal_injected_task())
            else {
                break;
            };
            any = true;
            task.cancel();
        }
        let live = std::mem::take(&mut *self.live_tasks.borrow_mut());
        any |= !live.is_empty();
        for task in live {
            task.cancel();
        }
        any
    }

    /// Shutdown: every fiber left on this worker is cancelled. Unstarted ones are dropped with
    /// a [`Cancelled`] result; started ones are resumed with their cancel flag set, which makes
    /// their current suspension point unwind (running destructors) up to the fiber entry.
    fn cancel_all(&self) {
        loop {
            // Tasks first: dropping their futures may wake fibers (channels closing), which
            // the code below then cancels too.
            let mut progressed = self.cancel_tasks();
            while let Some(fiber) = self.pop_runnable() {
                progressed = true;
                if fiber.header.started() {
                    fiber.header.set_cancelled();
                    self.resume_from_scheduler(fiber);
                } else {
                    fiber.stage.abort_unstarted(&fiber.header, Box::new(Cancelled));
                }
            }
            let parked: Vec<FiberRef> = self.registry.borrow().iter().cloned().collect();
            if parked.is_empty() && !progressed && !self.has_runnable() {
                break;
            }
            for fiber in parked {
                let header = &fiber.header;
                if header.park.claim_parked() {
                    header.set_cancelled();
                    self.schedule_local(fiber);
                }
                // Otherwise it is runnable and queued (or about to be): the loop gets it.
            }
            if !self.has_runnable() {
                std::thread::yield_now(); // a remote unparker is between its CAS and its push
            }
        }
    }
}

/// Unwinds the running fiber if the runtime is cancelling it (and it is not unwinding yet).
fn check_cancel(worker: &Worker) {
    let cancelled = worker.with_current(|f| {
        f.filter(|f| f.header.is_cancelled()).map(|f| (f.header.id, f.header.display_name().to_owned()))
    });
    if let Some((id, name)) = cancelled {
        if !std::thread::panicking() {
            crate::fiber::cancel::begin(id, &name);
            std::panic::resume_unwind(Box::new(Cancelled));
        }
    }
}

/// Wakes a parked fiber, or leaves a permit if it is not parked. Callable from any thread.
pub(crate) fn unpark(fiber: &FiberRef) {
    if !fiber.header.park.unpark() {
        return;
    }
    // We moved it PARKED -> IDLE: rescheduling it is our duty, on its own worker.
    let owner = fiber.header.owner().expect("a parked fiber has an owner");
    match current() {
        Some(worker) if std::ptr::eq(Arc::as_ptr(&worker.shared), owner) => {
            worker.schedule_woken(fiber.clone())
        }
        _ => owner.schedule_remote(fiber.clone()),
    }
}

/// The first function of every fiber, entered by the first switch onto its stack.
unsafe extern "C" fn fiber_entry(_arg: usize, _data: *mut u8) -> ! {
    let worker = current().expect("fiber started outside a worker");
    worker.with_current(|f| sanitizer::after_switch(&f.expect("a starting fiber is current").header.san));
    worker.after_switch();
    worker.run_current();
    worker.finish()
}
