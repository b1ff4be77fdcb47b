//! A worker's async tasks: the stealable queue, the pinned queue, the task LIFO slot, the
//! live list, polling them, and stealing from other workers when idle.
//!
//! Invariants: the module `sched::worker` doc's "where tasks wait", "LIFO slots" and
//! "batched tasks"; the tasks' own rules are module `task`'s; **busy with tasks, still reading the reactor**: a
//! worker that keeps polling tasks without reaching its idle pass (tasks that keep waking
//! each other or themselves) looks at its reactor and fires its due timers every
//! `BUSY_POLL_INTERVAL` task polls, as it does every that many fiber switches (module
//! `sched::worker::event_loop`): on a runtime of one worker, a task looping on
//! `yield_now().await` kept every timer and socket of the worker waiting for ever. It also
//! looks after every poll that spent the task's whole I/O budget (module
//! `sched::worker::coop`, "timers not held back by long polls").

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use super::event_loop::BUSY_POLL_INTERVAL;
use super::lifo::LifoSlot;
use super::{Queued, Worker};
use crate::sched::metrics::{bump, WorkerStats};
use crate::sched::task_ref::TaskRef;
use crate::sched::RuntimeShared;

/// A worker wakes an idle worker to steal from it when more than this many tasks wait in its
/// stealable queue. A wake-up costs the two threads about as much CPU as a few short polls,
/// and with the shared task reactor an idle worker receives new events itself (module
/// `reactor::shared_io`), while an idle worker that saw another awake looks for work to
/// steal every `READ_FOR_OWNER_AFTER` (500 µs) anyway: only a backlog of about that much
/// work is worth a wake-up. Lower thresholds raised hello_2w's p99 (`docs/perf/http.md`,
/// "The shared task reactor").
const SHARE_ABOVE: usize = 64;

/// A worker with local tasks takes one from the task injector every this many polls.
const INJECTOR_CHECK_INTERVAL: u32 = 61;

/// The task queues of one worker.
pub(super) struct TaskQueue {
    /// Runnable `Send` tasks, polled by the scheduler context on the thread's own stack; idle
    /// workers steal from the other end.
    deque: crossbeam_deque::Worker<TaskRef>,
    /// Runnable tasks pinned to this worker (`spawn_local`): never stolen.
    pinned: RefCell<VecDeque<TaskRef>>,
    /// The task LIFO slot, and whether its task is pinned.
    lifo: LifoSlot<(TaskRef, bool)>,
    /// Tasks this worker cancels at shutdown, including those that wait for a wake-up and
    /// sit in no queue ("exactly one canceller"). Finished ones are pruned when it doubles.
    live: RefCell<Vec<TaskRef>>,
    /// `live` length that triggers the next pruning.
    prune_at: Cell<usize>,
    /// Task polls since the task injector was last checked.
    polls: Cell<u32>,
    /// Task polls since the worker last read its reactor ("busy with tasks, still reading the
    /// reactor"); reset by every read.
    since_reactor_read: Cell<u32>,
    /// An eager first poll is under way ("eager polls do not nest", `poll_eager`).
    eager: Cell<bool>,
}

impl TaskQueue {
    pub(super) fn new(deque: crossbeam_deque::Worker<TaskRef>) -> TaskQueue {
        TaskQueue {
            deque,
            pinned: RefCell::new(VecDeque::new()),
            lifo: LifoSlot::new(),
            live: RefCell::new(Vec::new()),
            prune_at: Cell::new(64),
            polls: Cell::new(0),
            since_reactor_read: Cell::new(0),
            eager: Cell::new(false),
        }
    }

    /// Whether a task is queued here (on the switch path: reads only).
    #[inline]
    pub(super) fn has_queued(&self) -> bool {
        self.lifo.is_full() || !self.deque.is_empty() || !self.pinned.borrow().is_empty()
    }

    pub(super) fn extend_pinned(&self, tasks: impl Iterator<Item = TaskRef>) {
        self.pinned.borrow_mut().extend(tasks);
    }

    /// Takes any queued task, for shutdown.
    pub(super) fn pop_any(&self) -> Option<TaskRef> {
        let slot = self.lifo.take().map(|(t, _)| t);
        slot.or_else(|| self.pinned.borrow_mut().pop_front()).or_else(|| self.deque.pop())
    }

    /// Takes the live list, for shutdown.
    pub(super) fn take_live(&self) -> Vec<TaskRef> {
        std::mem::take(&mut *self.live.borrow_mut())
    }

    /// How many polls `Worker::run_tasks` may take from the queues now: as many as are
    /// queued, the LIFO slot's included.
    pub(super) fn queued_len(&self) -> usize {
        self.pinned.borrow().len() + self.deque.len() + usize::from(self.lifo.is_full())
    }

    /// Puts a woken task (and whether it is pinned) into the LIFO slot; returns the previous
    /// occupant, which the caller queues at the back.
    #[inline]
    pub(super) fn put_woken(&self, task: (TaskRef, bool)) -> Option<(TaskRef, bool)> {
        self.lifo.put(task)
    }

    /// Queues a task at the back of the pinned or stealable queue. True when the stealable
    /// queue is now long enough to be worth an idle worker's steal (`SHARE_ABOVE`).
    #[inline]
    pub(super) fn push_back(&self, task: TaskRef, pinned: bool) -> bool {
        if pinned {
            self.pinned.borrow_mut().push_back(task);
            false
        } else {
            self.deque.push(task);
            self.deque.len() > SHARE_ABOVE
        }
    }

    /// Adds a task to the list this worker cancels at shutdown ("exactly one canceller").
    pub(super) fn register(&self, task: TaskRef) {
        let mut live = self.live.borrow_mut();
        live.push(task);
        if live.len() >= self.prune_at.get() {
            live.retain(|t| !t.is_done());
            self.prune_at.set((live.len() * 2).max(64));
        }
    }

    /// The next task to poll, and whether it came from the LIFO slot: the slot's task unless
    /// `LIFO_CAP` polls in a row came from there (then it goes to the back of its queue), else
    /// the pinned queue's, else the stealable queue's.
    /// `requeue` queues the slot's task at the back.
    #[inline]
    fn next(&self, requeue: impl FnOnce(TaskRef, bool)) -> Option<(TaskRef, bool)> {
        if let Some((task, _)) = self.lifo.pop(|(task, pinned)| requeue(task, pinned)) {
            return Some((task, true));
        }
        let pinned = self.pinned.borrow_mut().pop_front();
        pinned.or_else(|| self.deque.pop()).map(|t| (t, false))
    }

    /// Counts a task poll; every `INJECTOR_CHECK_INTERVAL` of them one task of `rt`'s
    /// injector joins the stealable queue, so that injected tasks are not starved.
    #[inline]
    fn after_poll(&self, rt: &RuntimeShared) {
        let polls = self.polls.get().wrapping_add(1);
        self.polls.set(polls);
        if polls.is_multiple_of(INJECTOR_CHECK_INTERVAL) {
            if let Some(t) = rt.steal_injected_task() {
                self.deque.push(t);
            }
        }
    }

    /// Counts a task poll without a read of the reactor; returns how many there were since
    /// the last read ("busy with tasks, still reading the reactor").
    #[inline]
    fn count_unread_poll(&self) -> u32 {
        let unread = self.since_reactor_read.get() + 1;
        self.since_reactor_read.set(unread);
        unread
    }

    /// The worker has just read its reactor.
    #[inline]
    pub(super) fn note_reactor_read(&self) {
        self.since_reactor_read.set(0);
    }

    /// With runnable tasks left over and a worker of `rt` idle, wakes that worker to steal
    /// some.
    #[inline]
    pub(super) fn share(&self, rt: &RuntimeShared) {
        if self.deque.len() > SHARE_ABOVE && rt.has_idle_workers() {
            rt.wake_one_idle();
        }
    }

    /// An idle worker (the one at `index` in `rt`, counting in `stats`) looks for tasks: the
    /// task injector first, then the other workers' stealable queues (half of one queue at a
    /// time). True if it found some.
    pub(super) fn steal(&self, rt: &RuntimeShared, index: usize, stats: &WorkerStats) -> bool {
        let deque = &self.deque;
        if let Some(t) = rt.steal_injected_tasks(deque) {
            deque.push(t);
            return true;
        }
        let workers = &rt.workers;
        let n = workers.len();
        for k in 1..n {
            let victim = &workers[(index + k) % n];
            loop {
                let before = deque.len();
                match victim.stealer.steal_batch_and_pop(deque) {
                    crossbeam_deque::Steal::Success(t) => {
                        let stolen = deque.len() - before + 1;
                        bump(&stats.steals, stolen as u64);
                        deque.push(t);
                        return true;
                    }
                    crossbeam_deque::Steal::Empty => break,
                    crossbeam_deque::Steal::Retry => {}
                }
            }
        }
        false
    }

    /// Whether an eager first poll is under way ("eager polls do not nest",
    /// `Worker::poll_eager`).
    #[inline]
    fn eager_poll_under_way(&self) -> bool {
        self.eager.get()
    }

    /// Polls `task` as an eager first poll, flagged as under way meanwhile, and registers it
    /// if it is not done.
    fn poll_eager(&self, task: &TaskRef) {
        self.eager.set(true);
        // `run` catches the future's panic, so the flag is always reset.
        task.run();
        self.eager.set(false);
        if !task.is_done() && task.register_once() {
            self.register(task.clone());
        }
    }
}

impl Worker {
    /// **queue** a runnable task on this worker: into the LIFO slot when `Woken` by this
    /// worker's own code and the reactor is not dispatching ("LIFO slots"), else at the back
    /// of the pinned or stealable queue.
    #[inline]
    pub(crate) fn queue_task(&self, task: TaskRef, pinned: bool, how: Queued) {
        if how == Queued::Woken && !self.dispatching.get() {
            if let Some((prev, prev_pinned)) = self.tasks.put_woken((task, pinned)) {
                self.queue_task_back(prev, prev_pinned);
            }
        } else {
            self.queue_task_back(task, pinned);
        }
    }

    /// At the back of its queue; a long stealable queue wakes an idle worker to steal.
    #[inline]
    fn queue_task_back(&self, task: TaskRef, pinned: bool) {
        if self.tasks.push_back(task, pinned) && self.rt.has_idle_workers() {
            self.rt.wake_one_idle();
        }
    }

    /// Adds a task to the list this worker cancels at shutdown ("exactly one canceller").
    pub(crate) fn register_task(&self, task: TaskRef) {
        self.tasks.register(task);
    }

    /// Polls a task that was just spawned, at once, inside the running task's poll, when that
    /// takes nothing from anyone (module `task`, "eager first polls"): this runtime has one
    /// worker (no other worker could have taken the task from the queue), no other task waits
    /// on it (the new task would otherwise overtake them), the caller is a task's poll on it
    /// (not a fiber), the poll's I/O budget has a unit left, which the eager poll takes (a
    /// poll that spawns eagerly in a loop ends up queueing), no eager poll is under way (they
    /// do not nest: the worker's stack holds at most two polls), and the worker is not
    /// shutting down (a task spawned from a destructor during shutdown is queued and
    /// cancelled unpolled, as `spawn_async`'s). True if it polled the task; false if the
    /// caller must queue it, as a task still `SCHEDULED`.
    pub(crate) fn poll_eager(&self, task: &TaskRef) -> bool {
        if self.rt.workers.len() != 1
            || self.tasks.has_queued()
            || self.stopping.get()
            || self.in_fiber()
            || self.tasks.eager_poll_under_way()
            || !self.io_budget.take_unit()
        {
            return false;
        }
        bump(&self.shared.stats.tasks_polled, 1);
        bump(&self.shared.stats.progress, 1);
        self.tasks.poll_eager(task);
        true
    }

    /// Polls the queued tasks: at most as many from the queues as were queued on entry, so
    /// that tasks that keep waking themselves cannot starve the fibers, plus the LIFO slot's
    /// (at most `LIFO_CAP` in a row). Every `INJECTOR_CHECK_INTERVAL` polls one injected task
    /// joins the local queue, so that injected tasks are not starved either.
    pub(super) fn run_tasks(&self) {
        let q = &self.tasks;
        let mut budget = q.queued_len();
        if budget == 0 {
            return;
        }
        while budget > 0 {
            let Some((task, from_slot)) = q.next(|t, pinned| self.queue_task_back(t, pinned)) else { break };
            if !from_slot {
                budget -= 1;
            }
            bump(&self.shared.stats.tasks_polled, 1);
            bump(&self.shared.stats.progress, 1);
            self.io_budget.refill();
            task.run();
            if !task.is_done() && task.register_once() {
                q.register(task);
            }
            // A poll that spent its whole I/O budget was a long one (128 completed socket
            // operations and whatever work came with them): look at the timers and the
            // reactor now rather than after `BUSY_POLL_INTERVAL` such polls ("timers not
            // held back by long polls").
            if q.count_unread_poll() >= BUSY_POLL_INTERVAL || self.io_budget.spent_in_poll() {
                self.poll_busy(); // resets `since_reactor_read`
            }
            q.after_poll(&self.rt);
        }
        q.share(&self.rt);
    }

    /// An idle worker looks for tasks (`TaskQueue::steal`). True if it found some.
    pub(super) fn find_tasks(&self) -> bool {
        self.tasks.steal(&self.rt, self.shared.index, &self.shared.stats)
    }
}
