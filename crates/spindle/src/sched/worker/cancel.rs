//! Shutdown of one worker: every task and fiber left is cancelled, on this thread.
//!
//! Invariants: the module `sched::worker` doc's "shutdown reaches every fiber" and "a
//! started fiber owns itself" (claiming a parked fiber hands us its run reference), and module
//! `task`'s "exactly one canceller" (a task's claim makes a second cancel a no-op).

use super::Worker;
use crate::error::{CancelReason, Cancelled};
use crate::fiber::control::FiberRef;
use crate::sched::registry::FiberPtr;

impl Worker {
    /// Cancels the tasks in this worker's queues and live list, and those in the task
    /// injector. True if there were any.
    fn cancel_tasks(&self) -> bool {
        self.drain_inbox();
        let mut any = false;
        while let Some(task) = self.tasks.pop_any().or_else(|| self.rt.steal_injected_task()) {
            any = true;
            task.cancel();
        }
        let live = self.tasks.take_live();
        any |= !live.is_empty();
        for task in live {
            task.cancel();
        }
        any
    }

    /// Every fiber left on this worker is cancelled. Unstarted ones are dropped with a
    /// [`Cancelled`] result; started ones are resumed with their cancel flag set, which makes
    /// their current suspension point unwind (running destructors) up to the fiber entry.
    pub(super) fn cancel_all(&self) {
        loop {
            // Tasks first: dropping their futures may wake fibers (channels closing), which
            // the code below then cancels too.
            let mut progressed = self.cancel_tasks();
            while let Some(fiber) = self.pop_runnable() {
                progressed = true;
                if fiber.header.started() {
                    fiber.header.set_cancelled(CancelReason::Shutdown);
                    self.resume_from_scheduler(fiber);
                } else {
                    fiber.stage.abort_unstarted(&fiber.header, Box::new(Cancelled::SHUTDOWN));
                }
            }
            let parked: Vec<FiberPtr> = self.switcher.registered();
            if parked.is_empty() && !progressed && !self.has_runnable() {
                break;
            }
            for fiber in parked {
                // SAFETY: a registered pointer is to a live cell (module `sched::registry`,
                // "entries borrow the run reference"), and no fiber runs or is recycled
                // during this loop.
                let header = unsafe { &(*fiber).header };
                if header.park.claim_parked() {
                    header.set_cancelled(CancelReason::Shutdown);
                    // SAFETY: we moved it out of `PARKED`: as its one rescheduler we own the
                    // run reference it forgot when it parked ("a started fiber owns itself").
                    self.fibers.push_back(unsafe { FiberRef::from_raw(fiber) });
                }
                // Otherwise it is runnable and queued (or about to be): the loop gets it.
            }
            if !self.has_runnable() {
                std::thread::yield_now(); // a remote unparker is between its CAS and its push
            }
        }
    }
}
