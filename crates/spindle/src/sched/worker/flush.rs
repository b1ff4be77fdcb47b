//! Deferred flushes: writers that asked to be flushed once this worker's current burst of work
//! is over, so that everything they were given meanwhile leaves in one system call. The writer
//! lives in a layer above (module `net::coalesce`); it reaches the worker through the
//! [`DeferredFlush`] trait and [`Worker::defer_flush`], and the loop calls it back.
//!
//! # Invariants
//!
//! - **No sleep with a deferred flush.** The loop runs the list ([`Worker::run_flushes`])
//!   before it blocks in `epoll_wait` (after its last look at the run queues, with nothing
//!   runnable), at each busy look at the reactor (so a worker that never runs dry still writes
//!   every `BUSY_POLL_INTERVAL` polls or switches), and when it leaves or stops its loop.
//!   Nothing runs between the last run and the sleep that could add an entry: only the
//!   scheduler context's own bookkeeping (timers, wake-ups) runs there, never a poll or a
//!   fiber.
//! - **Owner-only.** The list is touched only on the worker's own thread (a `RefCell` in the
//!   worker, like the rest of its state), and no borrow of it is held while a writer is called
//!   back: the list is taken out first, so a writer may defer again from its callback (it then
//!   waits for the next run).
//! - **Weak entries.** The list never keeps a writer alive: a writer dropped before its turn is
//!   skipped (its owner wrote out what it could when it dropped it, module `net::coalesce`).

use std::sync::Weak;

use super::Worker;

/// A writer with bytes it accepted and has not sent yet.
pub(crate) trait DeferredFlush: Send + Sync {
    /// Sends what is pending, on the worker that deferred it (the scheduler context, no task
    /// or fiber running). Never blocks; a full socket leaves the rest to the writer's owner.
    fn flush_deferred(&self);
}

impl Worker {
    /// Queues `writer` to be flushed before this worker next sleeps or looks at its reactor.
    /// The caller keeps at most one entry queued per writer.
    pub(crate) fn defer_flush(&self, writer: Weak<dyn DeferredFlush>) {
        self.flushes.borrow_mut().push(writer);
    }

    /// An identity of this worker for a writer to remember where it is queued: compared,
    /// never followed.
    pub(crate) fn id(&self) -> usize {
        self as *const Worker as usize
    }

    /// Flushes every deferred writer ("no sleep with a deferred flush"). Returns whether
    /// anything became runnable meanwhile (a writer that failed wakes its owner).
    pub(super) fn run_flushes(&self) -> bool {
        if self.flushes.borrow().is_empty() {
            return false;
        }
        loop {
            let mut batch = std::mem::take(&mut *self.flushes.borrow_mut());
            if batch.is_empty() {
                break;
            }
            for writer in batch.drain(..) {
                if let Some(writer) = writer.upgrade() {
                    writer.flush_deferred();
                }
            }
            // Keep the allocation when nothing was queued during the callbacks.
            let mut list = self.flushes.borrow_mut();
            if list.is_empty() {
                *list = batch;
                break;
            }
        }
        self.has_runnable()
    }

    /// Whether a writer waits for its deferred flush (checked before a sleep).
    pub(super) fn has_deferred_flushes(&self) -> bool {
        !self.flushes.borrow().is_empty()
    }
}
