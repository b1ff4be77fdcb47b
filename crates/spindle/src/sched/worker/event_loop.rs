//! The event loop of a worker: the scheduler context's loop, sleeping in the reactor when
//! nothing is runnable, and the busy worker's periodic look at the reactor.
//!
//! Invariants: the module `sched::worker` doc's "shutdown reaches every fiber"; **no sleep
//! with work waiting**: before blocking in `epoll_wait` the worker announces itself idle, then
//! looks at the injectors one last time (the runtime's placement invariants, module
//! `sched::idle`, loom-checked), then at its inbox (module `reactor::sleep_gate`); and **no
//! reactor left unread while a worker idles**: a worker about to sleep first reads the
//! reactor of any awake worker that has not read its own for `READ_FOR_OWNER_AFTER` (a long
//! computation, or the kernel preempted it), and dispatches those events here (their tasks
//! run here; their fibers go home through inboxes: reactor "read for a busy owner"); while
//! another worker is awake it sleeps at most that long, so it looks again. The watchdog
//! wakes a sleeping worker when an awake one has left its reactor unread for longer (the
//! case where everyone slept, then one woke and got stuck). A busy worker reads its reactor
//! and fires its due timers every `BUSY_POLL_INTERVAL` fiber switches, and every that many
//! task polls without a read in between or after a task poll that spent its whole I/O
//! budget (modules `sched::worker::task_queue`, `sched::worker::coop`). The shared task
//! reactor (module `reactor::shared_io`) is watched by one sleeping worker ("one watcher"),
//! read by busy workers at those looks, and covered by the same watchdog rescue. **Clocks by
//! need**: a pass of the loop reads the precise clock only for pending timers and for the
//! reactor-read stamp the other workers compare (runtimes of two or more workers); the
//! sleep statistics and the trim of idle caches read the coarse clock (module
//! `sys::coarse_clock`), a quarter of the cost. **No sleep with a deferred flush**: the
//! writers that deferred their flush (module `sched::worker::flush`) are flushed before the
//! idle pass, at each busy look at the reactor, and when the loop is left or stopped.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Worker, WORKER};
use crate::fiber::overflow;
use crate::reactor::shared_ready;
use crate::sched::metrics::bump;
use crate::sys::coarse_clock;
use crate::sys::epoll::Event;

/// Clears this thread's current worker when dropped (the loop's end, or an unwind out of it).
struct ClearOnExit;

impl Drop for ClearOnExit {
    fn drop(&mut self) {
        WORKER.with(|w| w.set(std::ptr::null()));
    }
}

/// How [`Worker::run_loop`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Shutdown: every fiber and task was cancelled.
    Stopped,
    /// A fiber asked to leave ([`Worker::leave_soon`]); everything stays for the next run.
    Left,
}

/// A busy worker polls its reactor (non-blocking) every this many fiber switches (a power of
/// two), and every this many task polls without a read of its reactor in between.
pub(super) const BUSY_POLL_INTERVAL: u32 = 64;

/// How long a worker must stay idle before it gives its cached stacks' pages back.
const TRIM_AFTER_IDLE: Duration = Duration::from_millis(200);

/// One kernel tick at the slowest common rate (CONFIG_HZ=100): how far a span measured with
/// the coarse clock may fall short of the real one.
const COARSE_MARGIN: Duration = Duration::from_millis(10);

/// How long an awake worker may leave its reactor unread before an idle worker reads it for
/// it ("no reactor left unread while a worker idles"): well under the kernel's 4 ms tick, so
/// that the connections of a preempted worker do not wait for its next time slice.
const READ_FOR_OWNER_AFTER: Duration = Duration::from_micros(500);

impl Worker {
    /// Runs the scheduler context until shutdown is requested, then cancels what is left.
    pub(crate) fn run(&self) {
        let exit = self.run_loop();
        debug_assert_eq!(exit, Exit::Stopped, "a worker thread's loop is left only at shutdown");
    }

    /// Runs the scheduler context on this thread until shutdown is requested (then cancels
    /// what is left: [`Exit::Stopped`]) or a fiber calls [`leave_soon`](Self::leave_soon)
    /// ([`Exit::Left`], everything left in place: "leaving the loop").
    pub(crate) fn run_loop(&self) -> Exit {
        let _alt = overflow::AltStack::ensure();
        WORKER.with(|w| w.set(self));
        // Cleared however the loop ends: a local runtime's thread goes on after it.
        let _current = ClearOnExit;
        // This thread's idle moments trim its control block cache: it may keep a burst.
        crate::fiber::block_cache::on_worker_thread();
        let exit = loop {
            if self.stopping.get() {
                if self.leaving.replace(false) {
                    self.stopping.set(false);
                    break Exit::Left;
                }
                break Exit::Stopped; // a fiber saw the shutdown between two switches
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
                break Exit::Stopped;
            }
            if self.tasks.has_queued() || self.find_tasks() {
                continue;
            }
            if self.stopping.get() {
                // A fiber that a task's poll started switched to the `block_on` fiber, which
                // ended ("leaving the loop"), or saw the shutdown: the top of the loop decides,
                // never a sleep in the reactor first.
                continue;
            }
            // Everything runnable has run: send what the writers gathered meanwhile. A
            // writer that failed may have woken its owner.
            if self.run_flushes() {
                continue;
            }
            log::trace!(
                "worker {} idle with {} parked fibers",
                self.shared.index,
                self.switcher.registered_len()
            );
            self.idle();
        };
        // Whoever resumes or drops the rest, the bytes already gathered go out now.
        self.run_flushes();
        if exit == Exit::Stopped {
            self.cancel_all();
        }
        exit
    }

    /// Called by the fiber running on this worker: once it has switched away, the scheduler
    /// context leaves the loop ("leaving the loop"). A local runtime's `block_on` fiber calls
    /// it as it ends.
    pub(crate) fn leave_soon(&self) {
        self.leaving.set(true);
        self.stopping.set(true);
    }

    /// The scheduler context has nothing to run: fire due timers, then block in the reactor
    /// until I/O, a timer or a remote wake-up makes something runnable. Trims the stack pool
    /// once the worker has stayed idle for `TRIM_AFTER_IDLE`.
    fn idle(&self) {
        // The precise clock only for timers ("clocks by need"): with none pending, the
        // statistics and the trim read the coarse one.
        let mut now = None;
        if !self.timers.is_empty() {
            let at = Instant::now();
            now = Some(at);
            self.fire_timers(at);
            if self.has_runnable() {
                return;
            }
        }
        let others_awake = self.read_for_awake_workers();
        if self.has_runnable() {
            return;
        }
        let next_timer = self
            .next_timer_deadline()
            .map(|d| d.saturating_duration_since(*now.get_or_insert_with(Instant::now)));
        let trim = self.switcher.pool_needs_trim();
        let timeout = match (next_timer, trim) {
            (Some(t), true) => Some(t.min(TRIM_AFTER_IDLE)),
            (Some(t), false) => Some(t),
            (None, true) => Some(TRIM_AFTER_IDLE),
            (None, false) => None,
        };
        // Another worker is awake: look at its reactor again soon.
        let timeout = match (timeout, others_awake) {
            (Some(t), true) => Some(t.min(READ_FOR_OWNER_AFTER)),
            (None, true) => Some(READ_FOR_OWNER_AFTER),
            (t, false) => t,
        };
        let driver = &self.shared.driver;
        // Announce idleness, then look at the injectors one last time, then at the inbox.
        self.rt.enter_idle(&self.shared);
        if !self.rt.injector_is_empty() || !self.rt.task_injector_is_empty() {
            self.rt.leave_idle(&self.shared);
            return;
        }
        debug_assert!(!self.has_deferred_flushes(), "a worker may not sleep with a deferred flush");
        let (watching, timeout) = self.watch_shared_io(timeout);
        if !driver.begin_sleep() {
            self.unwatch_shared_io(watching);
            self.rt.leave_idle(&self.shared);
            return; // remote work arrived
        }
        if self.shared.shutdown.load(Ordering::SeqCst) {
            driver.end_sleep();
            self.unwatch_shared_io(watching);
            self.rt.leave_idle(&self.shared);
            return;
        }
        let stats = &self.shared.stats;
        bump(&stats.sleeps, 1);
        self.shared.sleep_untimed.store(timeout.is_none(), Ordering::Relaxed);
        stats.sleeping.store(true, Ordering::Release);
        // The sleep statistics and the trim: the coarse clock, before and after.
        let slept_from = coarse_clock::now_ns();
        let (ready, slept_to) = {
            let mut events = self.events.borrow_mut();
            let waited = driver.wait(&mut events, timeout);
            let slept_to = coarse_clock::now_ns();
            // Busy again before dispatching: a wake-up that queues tasks and looks for an
            // idle worker to share them with must not find (and wake) this one.
            driver.end_sleep();
            self.unwatch_shared_io(watching);
            self.rt.leave_idle(&self.shared);
            // The stamp the other workers read (runtimes of two or more) is precise.
            if self.publishes_reactor_reads() {
                self.note_reactor_read_at(Instant::now());
            } else {
                self.tasks.note_reactor_read();
            }
            self.dispatching.set(true);
            let mut ready = match waited {
                Ok(()) => driver.dispatch(&events, true),
                Err(e) => {
                    crate::report::error(format_args!("spindle: epoll_wait failed: {e}"));
                    0
                }
            };
            if shared_ready(&events) {
                ready += self.read_shared(&mut events);
            }
            self.dispatching.set(false);
            (ready, slept_to)
        };
        let slept = slept_to.saturating_sub(slept_from);
        bump(&stats.sleep_ns, slept);
        stats.sleeping.store(false, Ordering::Relaxed);
        if !self.timers.is_empty() {
            self.fire_timers(Instant::now());
        }
        // A tick's margin: a coarse span may read one tick short of the wait it measured.
        let trim_after = u64::try_from((TRIM_AFTER_IDLE - COARSE_MARGIN).as_nanos()).unwrap_or(u64::MAX);
        if trim && ready == 0 && !self.has_runnable() && slept >= trim_after {
            self.switcher.trim_pool();
            crate::fiber::block_cache::trim();
        }
    }

    /// Counts a switch; every `BUSY_POLL_INTERVAL` of them, polls the reactor without blocking,
    /// balances, and looks for a shutdown request (fibers that keep switching among themselves
    /// never return to the loop, which is where shutdown is otherwise noticed).
    #[inline]
    pub(super) fn count_switch(&self) {
        let switches = self.switches.get().wrapping_add(1);
        self.switches.set(switches);
        if switches & (BUSY_POLL_INTERVAL - 1) == 0 {
            self.poll_busy();
            self.balance();
            if self.shared.shutdown.load(Ordering::Relaxed) {
                self.stopping.set(true);
            }
        }
    }

    /// A busy worker's look at the reactor: non-blocking, only when something could be due.
    /// Every `BUSY_POLL_INTERVAL` fiber switches, and every that many task polls without a
    /// read of the reactor in between or after a task poll that spent its whole I/O budget
    /// (module `sched::worker::task_queue`).
    #[cold]
    pub(super) fn poll_busy(&self) {
        // A worker that never runs dry still sends what its writers gathered.
        self.run_flushes();
        if !self.timers.is_empty() {
            self.fire_timers(Instant::now());
        }
        if self.shared.driver.has_registrations() {
            let mut events = self.events.borrow_mut();
            self.dispatching.set(true);
            if let Err(e) = self.shared.driver.poll(&mut events, Some(Duration::ZERO)) {
                crate::report::error(format_args!("spindle: epoll_wait failed: {e}"));
            }
            self.dispatching.set(false);
        }
        if self.rt.io.as_ref().is_some_and(|io| io.driver.has_registrations()) {
            let mut events = self.events.borrow_mut();
            self.dispatching.set(true);
            self.read_shared(&mut events);
            self.dispatching.set(false);
        }
        self.note_reactor_read();
    }

    /// Before sleeping: claims the watch of the shared task reactor if nobody holds it and
    /// arms it in this worker's epoll instance (module `reactor::shared_io`, "one watcher").
    /// Returns whether this worker watches, and the sleep's timeout: capped at
    /// `READ_FOR_OWNER_AFTER` when an awake worker holds the watch ("nothing waits unread
    /// for long").
    fn watch_shared_io(&self, timeout: Option<Duration>) -> (bool, Option<Duration>) {
        let Some(io) = &self.rt.io else { return (false, timeout) };
        let me = self.shared.index;
        if io.try_watch(me) {
            if let Err(e) = self.shared.driver.arm_shared(&io.driver) {
                crate::report::error(format_args!("spindle: epoll_ctl failed: {e}"));
            }
            return (true, timeout);
        }
        let watcher_awake =
            io.watcher().is_some_and(|w| !self.rt.workers[w].stats.sleeping.load(Ordering::Relaxed));
        if watcher_awake {
            return (false, Some(timeout.map_or(READ_FOR_OWNER_AFTER, |t| t.min(READ_FOR_OWNER_AFTER))));
        }
        (false, timeout)
    }

    /// Awake again: gives up the watch of the shared task reactor, if this worker held it.
    fn unwatch_shared_io(&self, watching: bool) {
        if let (true, Some(io)) = (watching, &self.rt.io) {
            io.unwatch(self.shared.index);
        }
    }

    /// Reads the runtime's shared task reactor without blocking (a worker's driver said it
    /// has events) and wakes its waiters: their tasks run here ("task sockets share one
    /// reactor"). Returns how many registrations were ready.
    fn read_shared(&self, events: &mut Vec<Event>) -> usize {
        let Some(io) = &self.rt.io else { return 0 };
        match io.driver.poll_shared(events) {
            Ok(n) => n,
            Err(e) => {
                crate::report::error(format_args!("spindle: epoll_wait failed: {e}"));
                0
            }
        }
    }

    /// Publishes that this worker has just read its reactor.
    fn note_reactor_read(&self) {
        if self.publishes_reactor_reads() {
            self.note_reactor_read_at(Instant::now());
        } else {
            self.tasks.note_reactor_read();
        }
    }

    /// [`note_reactor_read`](Self::note_reactor_read) with the time already read.
    fn note_reactor_read_at(&self, at: Instant) {
        self.tasks.note_reactor_read();
        if self.publishes_reactor_reads() {
            let at =
                u64::try_from(at.saturating_duration_since(self.rt.started).as_nanos()).unwrap_or(u64::MAX);
            self.shared.stats.reactor_read_at.store(at, Ordering::Relaxed);
        }
    }

    /// Whether anyone reads this worker's reactor-read stamp: the other workers ("no reactor
    /// left unread while a worker idles") and the watchdog's rescue, which both need two
    /// workers or more. A runtime of one worker skips it: the time arithmetic would cost every
    /// pass of the loop, and a tcp pingpong round trip makes two.
    #[inline]
    fn publishes_reactor_reads(&self) -> bool {
        self.rt.workers.len() >= 2
    }

    /// Reads, for them, the reactors of the awake workers that have not read their own for
    /// `READ_FOR_OWNER_AFTER` ("no reactor left unread while a worker idles"). Returns whether
    /// another worker is awake.
    fn read_for_awake_workers(&self) -> bool {
        if self.rt.workers.len() < 2 {
            return false;
        }
        let now = u64::try_from(self.rt.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let limit = u64::try_from(READ_FOR_OWNER_AFTER.as_nanos()).unwrap_or(u64::MAX);
        let mut awake = false;
        for other in self.rt.workers.iter().filter(|w| w.index != self.shared.index) {
            let stats = &other.stats;
            if stats.sleeping.load(Ordering::Relaxed) || other.shutdown.load(Ordering::Relaxed) {
                continue;
            }
            awake = true;
            let unread = now.saturating_sub(stats.reactor_read_at.load(Ordering::Relaxed));
            if unread < limit || !other.driver.has_registrations() {
                continue;
            }
            let mut events = self.events.borrow_mut();
            self.dispatching.set(true);
            let mut found = other.driver.poll_for_owner(&mut events).unwrap_or(0);
            if shared_ready(&events) {
                found += self.read_shared(&mut events);
            }
            self.dispatching.set(false);
            if found > 0 {
                bump(&self.shared.stats.reactor_reads_for_others, 1);
            }
        }
        awake
    }
}
