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
//! - **Each event is dispatched once.** The shared epoll instance holds its sockets
//!   edge-triggered, like a worker's: whoever reads an event dispatches it, and no one else
//!   sees it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::Driver;

/// No worker watches.
const NOBODY: usize = usize::MAX;

/// A runtime's shared task reactor and its watcher.
#[derive(Debug)]
pub(crate) struct SharedIo {
    pub(crate) driver: Arc<Driver>,
    /// The index of the worker that watches it while sleeping, or `NOBODY`.
    watcher: AtomicUsize,
}

impl SharedIo {
    pub(crate) fn new() -> std::io::Result<SharedIo> {
        Ok(SharedIo { driver: Arc::new(Driver::new()?), watcher: AtomicUsize::new(NOBODY) })
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
