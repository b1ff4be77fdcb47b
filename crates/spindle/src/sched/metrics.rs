//! Run-time observability: per-worker counters, a dump of the fibers each worker holds, and a
//! watchdog that warns when a fiber or task runs too long without yielding.
//!
//! # Invariants
//!
//! - Every counter of [`WorkerStats`] has one writer, its worker's thread, which bumps it with
//!   a relaxed load and store (no locked instruction on the hot path); readers on other threads
//!   see a recent value, never a torn one.
//! - The watchdog only reads: a worker's `progress` counter (bumped at every switch and task
//!   poll) and whether it is inside `epoll_wait`. A worker that is awake, not idle, and whose
//!   counter has not moved for longer than the budget is running one fiber or task that has not
//!   yielded; the watchdog logs a warning naming the fiber id it published, once per stall,
//!   and what the worker's thread is doing (computing, or blocked in which system call:
//!   module `stuck`). A local runtime's worker is watched only while its loop runs.
//! - The watchdog also looks for a runtime asleep for good (module `deadlock`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counters of one worker (single writer: the worker's thread).
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    pub(crate) fibers_resumed: AtomicU64,
    pub(crate) fibers_started: AtomicU64,
    pub(crate) tasks_polled: AtomicU64,
    pub(crate) injected_taken: AtomicU64,
    pub(crate) shared_out: AtomicU64,
    pub(crate) steals: AtomicU64,
    pub(crate) sleeps: AtomicU64,
    pub(crate) remote_wakeups: AtomicU64,
    pub(crate) sleep_ns: AtomicU64,
    pub(crate) parked_fibers: AtomicU64,
    /// Bumped at every switch and task poll: the watchdog's sign of life.
    pub(crate) progress: AtomicU64,
    /// The fiber running now (0 in the scheduler context).
    pub(crate) running_fiber: AtomicU64,
    /// Where the fiber last resumed was spawned (null before the first): read with
    /// `running_fiber` by the watchdog, which names it.
    pub(crate) running_site: std::sync::atomic::AtomicPtr<std::panic::Location<'static>>,
    /// True while the worker sleeps in the reactor.
    pub(crate) sleeping: AtomicBool,
    /// When the worker last read its own reactor (nanoseconds since the runtime started):
    /// idle workers read it for it past `READ_FOR_OWNER_AFTER` (module `sched::worker::event_loop`).
    pub(crate) reactor_read_at: AtomicU64,
    /// Times this worker read another worker's reactor for it and found events.
    pub(crate) reactor_reads_for_others: AtomicU64,
}

/// Adds `n` to a single-writer counter without a locked instruction.
#[inline]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// A snapshot of one worker's counters, from [`Runtime::metrics`](crate::Runtime::metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// The worker's index in the runtime.
    pub index: usize,
    /// Context switches into fibers (each resumption of a fiber counts once).
    pub fibers_resumed: u64,
    /// Fibers that made their first run on this worker.
    pub fibers_started: u64,
    /// Polls of async tasks.
    pub tasks_polled: u64,
    /// New fibers this worker took from the shared injector (work stolen from others or
    /// submitted from outside).
    pub injected_taken: u64,
    /// Unstarted fibers this worker handed to the injector for idle workers.
    pub shared_out: u64,
    /// Runnable tasks this worker stole from other workers' queues.
    pub steals: u64,
    /// Times the worker went to sleep in `epoll_wait`.
    pub sleeps: u64,
    /// Times another thread's work woke or reached it (inbox drains).
    pub remote_wakeups: u64,
    /// Times it read the reactor of another worker that had left its own unread (busy or
    /// preempted) and found events there, whose tasks it then ran.
    pub reactor_reads_for_others: u64,
    /// Time spent awake (running fibers, tasks and the loop itself) since the runtime started.
    /// Its sleeps are measured with the kernel's coarse clock (one tick's resolution each,
    /// exact on average over many), which costs a quarter of a precise read.
    pub busy: Duration,
    /// Started fibers that have not finished (parked or runnable) on this worker.
    pub live_fibers: u64,
}

/// One fiber in a [`Runtime::dump_fibers`](crate::Runtime::dump_fibers) listing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FiberInfo {
    pub id: u64,
    pub name: Option<String>,
    /// The worker that owns it.
    pub worker: usize,
    /// `"runnable"`, or what it is parked on: `"channel recv"`, `"sleep"`, `"socket read"`...
    pub waiting_on: &'static str,
    /// Where it was spawned: the source location of the call to the spawn function.
    pub spawned_at: &'static std::panic::Location<'static>,
}

impl WorkerStats {
    pub(crate) fn snapshot(&self, index: usize, started: Instant) -> WorkerMetrics {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let slept = Duration::from_nanos(r(&self.sleep_ns));
        WorkerMetrics {
            index,
            fibers_resumed: r(&self.fibers_resumed),
            fibers_started: r(&self.fibers_started),
            tasks_polled: r(&self.tasks_polled),
            injected_taken: r(&self.injected_taken),
            shared_out: r(&self.shared_out),
            steals: r(&self.steals),
            sleeps: r(&self.sleeps),
            remote_wakeups: r(&self.remote_wakeups),
            reactor_reads_for_others: r(&self.reactor_reads_for_others),
            busy: started.elapsed().saturating_sub(slept),
            live_fibers: r(&self.parked_fibers),
        }
    }
}

/// Watches the workers of a runtime for fibers or tasks that do not yield.
/// Tells the watchdog thread to stop (a flag and the condvar it sleeps on).
pub(crate) type StopSignal = std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>;

pub(crate) fn watchdog(
    rt: std::sync::Weak<super::RuntimeShared>,
    budget: Duration,
    stop: StopSignal,
    mut deadlocks: super::deadlock::Detector,
) {
    let mut last: Vec<(u64, Instant, bool)> = Vec::new();
    loop {
        {
            let (lock, cvar) = &*stop;
            let guard = crate::lock::lock(lock);
            let (guard, _) = cvar.wait_timeout(guard, budget / 2).unwrap_or_else(|e| e.into_inner());
            if *guard {
                return;
            }
        }
        let Some(rt) = rt.upgrade() else { return };
        if last.len() != rt.workers.len() {
            last = vec![(u64::MAX, Instant::now(), false); rt.workers.len()];
        }
        rescue_unread_reactors(&rt);
        for (w, seen) in rt.workers.iter().zip(last.iter_mut()) {
            let stats = &w.stats;
            let progress = stats.progress.load(Ordering::Relaxed);
            // A local runtime's worker runs only inside `block_on`.
            let in_loop = w.in_loop.load(Ordering::Relaxed);
            if progress != seen.0 || stats.sleeping.load(Ordering::Relaxed) || !in_loop {
                *seen = (progress, Instant::now(), false);
                continue;
            }
            let stalled = seen.1.elapsed();
            if stalled >= budget && !seen.2 {
                seen.2 = true; // once per stall
                               // The safety net: what may move leaves the held worker (module
                               // `sched::worker::handoff`).
                let handed = super::worker::hand_off_held(&rt, w).filter(|&n| n > 0);
                let handed = handed.map_or_else(String::new, |n| {
                    format!("; {n} fibers that had not started were handed to the other workers")
                });
                let fiber = stats.running_fiber.load(Ordering::Relaxed);
                let site = stats.running_site.load(Ordering::Relaxed);
                let doing = super::stuck::describe(w.tid.load(Ordering::Relaxed))
                    .map_or_else(String::new, |d| format!("; {d}"));
                if fiber != 0 {
                    // SAFETY: a non-null site is a `&'static Location` a switch published.
                    let site =
                        unsafe { site.as_ref() }.map_or_else(String::new, |l| format!(", spawned at {l}"));
                    crate::report::warn(format_args!(
                        "spindle: fiber {fiber} has held worker {} for {} ms without yielding \
                         (budget {} ms{site}){doing}{handed}; long computations belong in \
                         spawn_blocking, and a foreign blocking call (a std lock, another \
                         executor's block_on) blocks the whole worker",
                        w.index,
                        stalled.as_millis(),
                        budget.as_millis()
                    ));
                } else {
                    crate::report::warn(format_args!(
                        "spindle: a task or the event loop has held worker {} for {} ms without \
                         yielding (budget {} ms){doing}{handed}",
                        w.index,
                        stalled.as_millis(),
                        budget.as_millis()
                    ));
                }
            }
        }
        deadlocks.look(&rt);
    }
}

/// How long a worker that is awake may leave its reactor unread before the watchdog wakes a
/// sleeping worker to read it for it. Idle workers that saw another worker awake when they
/// went to sleep look on their own (every `READ_FOR_OWNER_AFTER`); this covers the rest: all
/// workers asleep, then one woke and got stuck (a handler computing for long).
const RESCUE_AFTER: Duration = Duration::from_millis(10);

/// Wakes one sleeping worker if some awake worker has left its reactor (or the unwatched
/// shared task reactor) unread for longer than `RESCUE_AFTER`; the woken worker reads that
/// reactor first thing in its idle path, and takes the watch of the shared one.
fn rescue_unread_reactors(rt: &super::RuntimeShared) {
    if rt.workers.len() < 2 {
        return;
    }
    let now = u64::try_from(rt.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let limit = u64::try_from(RESCUE_AFTER.as_nanos()).unwrap_or(u64::MAX);
    // An awake worker reads the shared task reactor in its busy polls too: if it is stuck,
    // the shared reactor may have nobody reading it (module `reactor::shared_io`).
    let shared = rt.io.as_ref().is_some_and(|io| io.driver.has_registrations() && io.watcher().is_none());
    let stuck = rt.workers.iter().any(|w| {
        !w.stats.sleeping.load(Ordering::Relaxed)
            && (shared || w.driver.has_registrations())
            && now.saturating_sub(w.stats.reactor_read_at.load(Ordering::Relaxed)) > limit
    });
    if stuck {
        if let Some(sleeper) = rt.workers.iter().find(|w| w.stats.sleeping.load(Ordering::Relaxed)) {
            sleeper.driver.force_wake();
        }
    }
}
