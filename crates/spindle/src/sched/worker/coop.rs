//! The I/O budget: a fiber whose socket operations keep completing without waiting (a
//! listener under a connection storm, a reader whose peer always has data queued) never
//! parks, so nothing else on its worker would run, and its worker would not read its reactor:
//! the other fibers' sockets would go unserved, however long the stretch lasts (started fibers
//! never move to another worker). tokio bounds the same thing with its per-task coop budget.
//!
//! Invariants:
//!
//! - **Bounded between yields**: each blocking-style socket operation that completes on a
//!   fiber takes one unit of its worker's budget ([`IO_BUDGET`] units, counted per worker
//!   across fibers); the operation that takes the last unit refills it and yields the fiber
//!   before returning its result. So at most `IO_BUDGET` operations complete on a worker
//!   between two budget yields, and a yield that finds other work runs it (a lone fiber's
//!   yield stays inline and still reads the reactor every `BUSY_POLL_INTERVAL` of them).
//! - **Only where parking is allowed**: the budget is taken only by a fiber on a worker (a
//!   task's poll and a plain thread never yield here: their operations never reach this
//!   module), and in debug builds not inside a `no_park` section, where the yield is skipped
//!   (the operation completed; its result is never lost to a yield or a skip).
//! - **Nothing between the result and its caller**: the yield comes after the system call
//!   succeeded, holding its result; a cancellation seen at the yield unwinds as at any other
//!   park point, and the completed operation's effect (bytes read or written) is then what
//!   the unwinding caller loses, as with a read whose fiber is cancelled right after it.

use std::cell::Cell;

use super::Worker;

/// Socket operations a worker's fibers may complete between two budget yields (tokio's
/// per-task budget is 128 too).
pub(crate) const IO_BUDGET: u32 = 128;

/// A worker's I/O budget (see the module doc).
#[derive(Debug)]
pub(crate) struct IoBudget {
    left: Cell<u32>,
}

impl IoBudget {
    pub(crate) fn new() -> IoBudget {
        IoBudget { left: Cell::new(IO_BUDGET) }
    }
}

impl Worker {
    /// Takes one unit for a socket operation that completed on the running fiber; yields the
    /// fiber when that was the last unit.
    #[inline]
    fn take_io_budget(&self) {
        let left = self.io_budget.left.get();
        if left > 1 {
            self.io_budget.left.set(left - 1);
        } else {
            self.io_budget_spent();
        }
    }

    #[cold]
    #[inline(never)]
    fn io_budget_spent(&self) {
        self.io_budget.left.set(IO_BUDGET);
        if self.in_fiber() && !crate::fiber::no_park_held() {
            self.yield_fiber();
        }
    }
}

/// Called by a blocking-style socket operation that completed: takes a unit of the current
/// worker's budget when a fiber runs there (module doc).
#[inline]
pub(crate) fn consume_io_budget() {
    if let Some(worker) = super::current() {
        worker.take_io_budget();
    }
}
