//! The shared task reactor of a runtime with two or more workers, and who watches it.
//!
//! Sockets first waited on by a task (connections served by `Send` tasks, which any worker
//! may poll) register here instead of with a worker's own driver, so that their events reach
//! whichever worker is idle, not the one that happened to register them ("task sockets share
//! one reactor", module `reactor`). Fibers' sockets stay with their worker, where the fiber
//! lives.
//!
//! # Invariants
//!
//! - **One watcher.** At most one sleeping worker watches the shared reactor: a worker about
//!   to sleep claims the watch ([`SharedIo::try_watch`], one compare-exchange), arms the
//!   one-shot entry of the shared epoll instance in its own (`Driver::arm_shared`), and
//!   gives the watch up when it wakes ([`SharedIo::unwatch`]). The others sleep on their own
//!   reactors only, so a burst of shared events wakes one thread, not every idle one.
//! - **Nothing waits unread for long.** The watch is given up only by an awake worker, which
//!   reads the shared reactor in its busy polls and claims the watch again before it sleeps.
//!   A worker that finds the watch held by an awake worker caps its sleep at
//!   `READ_FOR_OWNER_AFTER` (module `sched::worker::event_loop`), so events that arrive
//!   while the watcher is busy wait at most that long, as on a worker's own reactor.
//! - **A sleeping world has a watcher.** Whenever every worker sleeps, one of them watches:
//!   a worker gives the watch up only while awake, and claims it (if free) before each
//!   sleep, so the last worker to fall asleep either claims it or finds it held by a worker
//!   that is asleep and armed. Model-checked with loom below (the one-shot entry and its
//!   arming modelled under one lock, as the kernel's epoll lock orders them).
//! - **Each event is dispatched once.** The shared epoll instance holds its sockets
//!   edge-triggered, like a worker's: whoever reads an event dispatches it, and no one else
//!   sees it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::Driver;
use crate::loom::AtomicUsize;

/// No worker watches.
const NOBODY: usize = usize::MAX;

/// A runtime's shared task reactor and its watcher.
#[derive(Debug)]
pub(crate) struct SharedIo {
    pub(crate) driver: Arc<Driver>,
    watch: Watch,
}

impl SharedIo {
    pub(crate) fn new() -> std::io::Result<SharedIo> {
        Ok(SharedIo { driver: Arc::new(Driver::new()?), watch: Watch::new() })
    }

    /// See [`Watch::try_watch`].
    pub(crate) fn try_watch(&self, me: usize) -> bool {
        self.watch.try_watch(me)
    }

    /// See [`Watch::unwatch`].
    pub(crate) fn unwatch(&self, me: usize) {
        self.watch.unwatch(me)
    }

    /// See [`Watch::watcher`].
    pub(crate) fn watcher(&self) -> Option<usize> {
        self.watch.watcher()
    }
}

/// Who watches the shared reactor ("one watcher").
#[derive(Debug)]
pub(crate) struct Watch {
    /// The index of the worker that watches it while sleeping, or `NOBODY`.
    watcher: AtomicUsize,
}

impl Watch {
    pub(crate) fn new() -> Watch {
        Watch { watcher: AtomicUsize::new(NOBODY) }
    }

    /// Worker `me` is about to sleep: true if it now watches the shared reactor (it must arm
    /// its entry, then [`unwatch`](Self::unwatch) when it wakes).
    pub(crate) fn try_watch(&self, me: usize) -> bool {
        self.watcher.compare_exchange(NOBODY, me, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Worker `me` is awake again and gives the watch up.
    pub(crate) fn unwatch(&self, me: usize) {
        let _ = self.watcher.compare_exchange(me, NOBODY, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// The watching worker, if any.
    pub(crate) fn watcher(&self) -> Option<usize> {
        let w = self.watcher.load(Ordering::Acquire);
        (w != NOBODY).then_some(w)
    }
}

#[cfg(all(test, spindle_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::{AtomicBool, AtomicUsize as Counter};
    use loom::sync::{Arc, Mutex, Notify};
    use loom::thread;

    /// The shared epoll instance as the workers' one-shot entries see it.
    #[derive(Default)]
    struct Epoll {
        /// An event is ready in the shared reactor.
        pending: bool,
        /// Per worker: its one-shot entry is armed.
        armed: [bool; 2],
    }

    struct Model {
        watch: Watch,
        epoll: Mutex<Epoll>,
        /// Per worker: its epoll_wait returns (its own epoll instance becomes readable).
        wake: [Notify; 2],
        taken: Counter,
        took: Notify,
        shutdown: AtomicBool,
    }

    impl Model {
        /// An event arrives: every armed entry fires once and disarms (EPOLLONESHOT).
        fn event(&self) {
            let mut ep = self.epoll.lock().unwrap();
            ep.pending = true;
            for i in 0..2 {
                if std::mem::take(&mut ep.armed[i]) {
                    self.wake[i].notify();
                }
            }
        }

        /// `Driver::arm_shared`: fires at once if the shared reactor is readable now.
        fn arm(&self, i: usize) {
            let mut ep = self.epoll.lock().unwrap();
            if ep.pending {
                self.wake[i].notify();
            } else {
                ep.armed[i] = true;
            }
        }

        /// `read_shared`: takes the event, if any (edge-triggered: one reader gets it).
        fn read(&self) -> bool {
            std::mem::take(&mut self.epoll.lock().unwrap().pending)
        }

        /// The idle path of `Worker::idle` as far as the shared reactor goes.
        fn worker(&self, i: usize) {
            loop {
                if self.read() {
                    self.taken.fetch_add(1, Ordering::SeqCst);
                    self.took.notify();
                    continue;
                }
                if self.shutdown.load(Ordering::SeqCst) {
                    return;
                }
                let watching = self.watch.try_watch(i);
                if watching {
                    self.arm(i);
                }
                if !self.shutdown.load(Ordering::SeqCst) {
                    self.wake[i].wait();
                }
                if watching {
                    self.watch.unwatch(i);
                }
            }
        }
    }

    /// Two workers that go to sleep and wake in every order, and one event: some worker
    /// takes it. An event left unread while both sleep leaves the main thread waiting
    /// forever, which loom reports as a deadlock.
    #[test]
    fn loom_an_event_in_the_shared_reactor_reaches_a_sleeping_worker() {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        builder.check(|| {
            let model = Arc::new(Model {
                watch: Watch::new(),
                epoll: Mutex::new(Epoll::default()),
                wake: [Notify::new(), Notify::new()],
                taken: Counter::new(0),
                took: Notify::new(),
                shutdown: AtomicBool::new(false),
            });
            let workers: Vec<_> = (0..2)
                .map(|i| {
                    let model = model.clone();
                    thread::spawn(move || model.worker(i))
                })
                .collect();
            model.event();
            while model.taken.load(Ordering::SeqCst) == 0 {
                model.took.wait();
            }
            model.shutdown.store(true, Ordering::SeqCst);
            for w in &model.wake {
                w.notify();
            }
            for w in workers {
                w.join().unwrap();
            }
            assert_eq!(model.taken.load(Ordering::SeqCst), 1);
        });
    }
}
