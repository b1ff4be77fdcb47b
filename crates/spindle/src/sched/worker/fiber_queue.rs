//! A worker's runnable fibers: [`FiberQueue`] (the run queue and the fiber LIFO slot) with
//! its own methods, and the worker's placement decisions around it: the inbox hand-over,
//! where new fibers go, and the balancing of unstarted fibers between workers: by the worker
//! itself (`Worker::balance`, `FiberQueue::give_backlog`), and by the watchdog while a fiber
//! holds the worker (`hand_off_held`, the safety net, through the queue's cell: module
//! `handoff`).
//!
//! Invariants: the module `sched::worker` doc's "fibers stay home" (only unstarted, unpinned
//! fibers ever leave this queue for the injector) and "LIFO slots"; module `handoff`'s "one
//! side at a time" (every access to the queue is a borrow of its cell).

use std::collections::VecDeque;
use std::sync::Arc;

use super::handoff::HandoffCell;
use super::lifo::LifoSlot;
use super::{Queued, Worker, WorkerShared};
use crate::fiber::control::{FiberRef, Header};
use crate::sched::metrics::{bump, WorkerStats};
use crate::sched::RuntimeShared;

/// A worker's run queue: borrowed by its owner, taken over by the watchdog while the owner
/// is held (module `handoff`). Shared with [`WorkerShared`](super::WorkerShared).
pub(crate) type RunQueue = HandoffCell<VecDeque<FiberRef>>;

/// The run queue and the fiber LIFO slot.
pub(super) struct FiberQueue {
    queue: Arc<RunQueue>,
    lifo: LifoSlot<FiberRef>,
}

impl FiberQueue {
    pub(super) fn new(queue: Arc<RunQueue>) -> FiberQueue {
        FiberQueue { queue, lifo: LifoSlot::new() }
    }

    /// Always inlined: out of line, the call and the borrow's bookkeeping around it cost a
    /// yield more instructions than the push itself.
    #[inline(always)]
    pub(super) fn push_back(&self, fiber: FiberRef) {
        self.queue.borrow_mut().push_back(fiber);
    }

    /// Puts back a fiber that was popped but not run.
    #[inline]
    pub(super) fn push_front(&self, fiber: FiberRef) {
        self.queue.borrow_mut().push_front(fiber);
    }

    /// Prefetches (from inside a borrow of the queue, when a fiber was just taken from its
    /// front) what the next switches will touch of the fibers at the front of the run
    /// queue: the stack line the front fiber resumes from (or, unstarted, the top its first
    /// frame is written to), read from its header, which the switch before prefetched; and the
    /// header of the fiber behind it. A worker cycling through thousands of fibers otherwise
    /// waits for each one's header and stack line in turn.
    #[inline]
    fn prefetch_front(queue: &VecDeque<FiberRef>) {
        if queue.len() < PREFETCH_MIN_QUEUE {
            // A short queue's fibers are in cache already: the prefetches would only cost.
            return;
        }
        if let Some(front) = queue.front() {
            let header = &front.header;
            let sp = header.sp.get();
            if sp != 0 {
                for line in 0..4 {
                    prefetch((sp as *const u8).wrapping_add(line * 64));
                }
            } else {
                // SAFETY: owner-only (module `fiber::control`): an unstarted fiber in this
                // worker's queue is touched only by this thread while it borrows the queue
                // (a taker moves it only outside the borrows, module `handoff`); read in
                // place, not moved.
                if let Some(stack) = unsafe { &*header.stack.as_ptr() } {
                    prefetch(stack.top().wrapping_sub(64));
                }
            }
        }
        if let Some(second) = queue.get(1) {
            let header: *const Header = &second.header;
            for line in 0..4 {
                prefetch(header.cast::<u8>().wrapping_add(line * 64));
            }
        }
    }

    /// Takes every fiber of the run queue out (the worker is going away).
    pub(super) fn take_all(&self) -> VecDeque<FiberRef> {
        std::mem::take(&mut *self.queue.borrow_mut())
    }

    #[inline]
    pub(super) fn has_runnable(&self) -> bool {
        self.lifo.is_full() || !self.queue.borrow().is_empty()
    }

    /// Whether the run queue is empty (the LIFO slot aside).
    #[inline]
    pub(super) fn queue_is_empty(&self) -> bool {
        self.queue.borrow().is_empty()
    }

    /// Puts a woken fiber into the LIFO slot; returns the previous occupant, which the
    /// caller queues at the back.
    #[inline]
    pub(super) fn put_woken(&self, fiber: FiberRef) -> Option<FiberRef> {
        self.lifo.put(fiber)
    }

    /// Whether the fiber of `header` can only ever run on the worker whose `WorkerShared` is
    /// `home`, which owns this queue (`Worker::keeps_for_join`): it started there (started
    /// fibers stay home), or it has not started and is the newest fiber of this run queue,
    /// which only the owner's thread can move and which is pinned here now.
    #[inline]
    pub(super) fn keeps_for_join(&self, header: &Header, home: *const WorkerShared) -> bool {
        let owner = header.owner_ptr();
        if !owner.is_null() {
            return std::ptr::eq(owner, home);
        }
        let queue = self.queue.borrow();
        match queue.back() {
            Some(newest) if std::ptr::eq(&newest.header, header) => {
                // Only `give_backlog` (on this thread) could hand it to the injector, and it
                // keeps pinned fibers: the fiber starts here.
                header.pin();
                true
            }
            _ => false,
        }
    }

    /// Takes the next runnable fiber: the LIFO slot's unless `LIFO_CAP` runs in a row came
    /// from there, else the run queue's front.
    #[inline]
    pub(super) fn pop(&self) -> Option<FiberRef> {
        let slot = self.lifo.pop_outlined(|fiber| self.push_back(fiber));
        slot.or_else(|| {
            let mut queue = self.queue.borrow_mut();
            let next = queue.pop_front();
            Self::prefetch_front(&queue);
            next
        })
    }

    /// Appends fibers taken from the inbox.
    pub(super) fn extend(&self, fibers: impl Iterator<Item = FiberRef>) {
        self.queue.borrow_mut().extend(fibers);
    }

    /// Hands the unstarted, unpinned half of the run queue to `rt`'s injector (started
    /// fibers stay home, `spawn_local` ones too), counting them in `stats`.
    #[inline]
    pub(super) fn give_backlog(&self, rt: &RuntimeShared, stats: &WorkerStats) {
        let mut queue = self.queue.borrow_mut();
        let mut give = queue.len() / 2;
        let mut kept = VecDeque::new();
        while give > 0 {
            let Some(f) = queue.pop_back() else { break };
            if f.header.started() || f.header.is_pinned() {
                // Started fibers never move ("fibers stay home"), nor do spawn_local ones.
                kept.push_front(f);
            } else {
                give -= 1;
                bump(&stats.shared_out, 1);
                rt.inject_fiber(f);
            }
            if kept.len() > 64 {
                break;
            }
        }
        queue.extend(kept);
    }
}

impl Worker {
    /// **queue** a runnable fiber on this worker: at the back, or, when `Woken` by this
    /// worker's own code and the reactor is not dispatching, into the LIFO slot (the previous
    /// occupant goes to the back).
    #[inline]
    pub(crate) fn queue_fiber(&self, fiber: FiberRef, how: Queued) {
        if how == Queued::Woken && !self.dispatching.get() {
            if let Some(prev) = self.fibers.put_woken(fiber) {
                self.fibers.push_back(prev);
            }
        } else {
            self.fibers.push_back(fiber);
        }
    }

    /// Places a new fiber: on this worker when it is pinned (`spawn_local`), when it has
    /// nothing else queued (the spawner often waits for it next: running it here costs no
    /// cross-thread hop) or while every worker is busy; otherwise in the injector, waking an
    /// idle worker.
    pub(crate) fn place_new(&self, fiber: FiberRef) {
        // The local checks first: the idle set is shared by all workers.
        if !fiber.header.is_pinned() && !self.fibers.queue_is_empty() && self.rt.has_idle_workers() {
            self.rt.inject_fiber(fiber);
        } else {
            self.queue_fiber(fiber, Queued::Back);
        }
    }

    /// Whether the fiber of `header`, which a fiber of this worker is about to join, can
    /// only ever run on this worker's thread from now on, so that its completion cannot race
    /// the join (module `park::completion`, "a joiner at home"): it started here (started
    /// fibers stay home), or it has not started and is the newest fiber of this worker's run
    /// queue (the spawn just before a join), which only this thread can move and which is
    /// pinned here now. A fiber elsewhere (the injector, another worker) gives false.
    #[inline]
    pub(crate) fn keeps_for_join(&self, header: &Header) -> bool {
        self.fibers.keeps_for_join(header, Arc::as_ptr(&self.shared))
    }

    /// Takes the next runnable fiber, draining the inbox first if it has something.
    #[inline]
    pub(super) fn pop_runnable(&self) -> Option<FiberRef> {
        if self.shared.driver.has_remote_work() {
            self.drain_inbox();
        }
        self.fibers.pop()
    }

    /// Moves remote work (fibers and pinned tasks sent here) into the local queues.
    #[cold]
    pub(super) fn drain_inbox(&self) {
        if self.shared.driver.take_remote_work() {
            bump(&self.shared.stats.remote_wakeups, 1);
            self.shared
                .drain_inboxes(|fibers| self.fibers.extend(fibers), |tasks| self.tasks.extend_pinned(tasks));
        }
    }

    /// Takes a new fiber from the injector (counted). An empty injector is seen with two
    /// loads: crossbeam's `steal` finds it empty only after a `SeqCst` fence, a cost every
    /// fiber that finishes or parks with nothing runnable here would pay. Missing a fiber
    /// pushed meanwhile is harmless: nobody sleeps on this look (a worker about to sleep looks
    /// again after announcing it is idle, module `sched::idle`).
    #[inline]
    pub(super) fn take_injected(&self) -> Option<FiberRef> {
        if self.rt.injector_is_empty() {
            return None;
        }
        let f = self.rt.steal_injected_fiber()?;
        bump(&self.shared.stats.injected_taken, 1);
        Some(f)
    }

    /// A busy worker's share of balancing, every `BUSY_POLL_INTERVAL` switches: hand the
    /// unstarted half of its backlog to the injector when other workers are idle, and take an
    /// injected fiber now and then so that injected work is not starved by local work.
    #[cold]
    pub(super) fn balance(&self) {
        if self.rt.workers.len() == 1 {
            return;
        }
        if self.rt.has_idle_workers() {
            self.fibers.give_backlog(&self.rt, &self.shared.stats);
        } else if let Some(f) = self.take_injected() {
            self.fibers.push_back(f);
        }
        self.tasks.share(&self.rt);
    }
}

/// The safety net (module `handoff`): the watchdog found `held` held by one fiber past its
/// budget. Takes the fibers of its run queue that have not started and are not pinned, and
/// hands them to the other workers through the injector (started fibers stay home); wakes an
/// idle worker to steal `held`'s queued tasks. Returns how many fibers moved, or `None` when
/// the queue could not be taken (the worker was using it, or the process has no barrier).
pub(crate) fn hand_off_held(rt: &crate::sched::RuntimeShared, held: &super::WorkerShared) -> Option<usize> {
    if rt.workers.len() < 2 {
        return None; // nobody to hand work to
    }
    let moved = held.run_queue.take_over(|queue| {
        let mut moved = Vec::new();
        let mut kept = VecDeque::with_capacity(queue.len());
        for f in queue.drain(..) {
            if f.header.started() || f.header.is_pinned() {
                kept.push_back(f);
            } else {
                moved.push(f);
            }
        }
        *queue = kept;
        moved
    })?;
    let n = moved.len();
    // The owner bumps this counter only inside its borrows of the queue (`give_backlog`), never
    // at the same time as a take-over: no update is lost.
    held.stats.shared_out.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    for fiber in moved {
        rt.inject_fiber(fiber);
    }
    if !held.stealer.is_empty() {
        rt.wake_one_idle();
    }
    Some(n)
}

/// The run queue length from which `prefetch_front` prefetches: below it, the queued fibers'
/// headers and stack lines stay in cache between their runs, and the prefetches would only
/// add to every switch (`docs/perf/context-switch.md`, the yield hand-off).
const PREFETCH_MIN_QUEUE: usize = 16;

/// A hint to load the cache line at `at`; never faults, whatever the address.
#[inline(always)]
fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` only hints; it does not fault on any address (SSE is baseline on
    // x86_64).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
