//! The I/O budget: a fiber or task whose socket operations keep completing without waiting
//! (a listener under a connection storm, a reader whose peer always has data queued) never
//! parks or returns `Pending`, so nothing else on its worker would run, and its worker would
//! not read its reactor: the other sockets would go unserved, however long the stretch lasts
//! (started fibers never move to another worker, and a task being polled holds its worker).
//! tokio bounds the same thing with its per-task coop budget.
//!
//! Invariants:
//!
//! - **Bounded between yields (fibers)**: each blocking-style socket operation that completes
//!   on a fiber, and each future-side one polled from a fiber (`task::block_on` in a fiber),
//!   takes one unit of its worker's budget ([`IO_BUDGET`] units, counted per worker); the
//!   operation that takes the last unit refills it and yields the fiber before returning its
//!   result. A yield that finds other work runs it (a lone fiber's yield stays inline and
//!   still reads the reactor every `BUSY_POLL_INTERVAL` of them).
//! - **Bounded within a poll (tasks)**: each task poll starts with a full budget
//!   (`IoBudget::refill`, called by `run_tasks`); each future-side socket operation
//!   that completes in it takes a unit, and once none is left every socket operation of the
//!   same poll returns `Pending` without trying, after waking the task, which goes to the back
//!   of its queue (tokio's rule: the budget stays spent until the task yields). An operation
//!   refused this way has done nothing, so nothing is lost. An eager first poll
//!   (`task::spawn_eager`, `Worker::poll_eager`) takes a unit too and is part of its
//!   spawner's poll: the eager task's socket operations spend the same budget.
//! - **Timers not held back by long polls**: a task poll that spent its whole budget is
//!   followed at once by the busy worker's look at its timers and reactor (`poll_busy`),
//!   not only after `BUSY_POLL_INTERVAL` polls: a task whose every poll spends the budget
//!   (a peer that floods it, with work per read) would otherwise delay a due timer, such as
//!   the timeout around that very flood, by 64 long polls.
//! - **Only where parking is allowed**: a fiber yields only on a worker, and in debug builds
//!   not inside a `no_park` section, where the yield is skipped (the operation completed; its
//!   result is never lost to a yield or a skip). A plain thread (off any worker) has no
//!   budget.
//! - **Nothing between the result and its caller**: the yield comes after the system call
//!   succeeded, holding its result; a cancellation seen at the yield unwinds as at any other
//!   park point, and the completed operation's effect (bytes read or written) is then what
//!   the unwinding caller loses, as with a read whose fiber is cancelled right after it.

use std::cell::Cell;
use std::task::Context;

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

    /// A task poll starts with a full budget ("bounded within a poll").
    #[inline]
    pub(super) fn refill(&self) {
        self.left.set(IO_BUDGET);
    }

    /// Whether the task poll that just ended spent its whole budget ("timers not held back
    /// by long polls").
    #[inline]
    pub(super) fn spent_in_poll(&self) -> bool {
        self.left.get() == 0
    }

    /// Takes one unit of a task poll's budget for an eager first poll
    /// (`Worker::poll_eager`): false, taking nothing, when none is left.
    #[inline]
    pub(super) fn take_unit(&self) -> bool {
        let left = self.left.get();
        if left == 0 {
            return false;
        }
        self.left.set(left - 1);
        true
    }

    /// Takes one unit for an operation completed in a task's poll, down to zero, where it
    /// stays until the next poll.
    #[inline]
    fn take_polled(&self) {
        let left = self.left.get();
        self.left.set(left.saturating_sub(1));
    }

    /// Takes one unit for an operation completed on a fiber; false when that was the last
    /// unit (the budget is then full again and the fiber must yield).
    #[inline]
    fn take_on_fiber(&self) -> bool {
        let left = self.left.get();
        if left > 1 {
            self.left.set(left - 1);
            true
        } else {
            self.left.set(IO_BUDGET);
            false
        }
    }

    /// Whether a unit is left.
    #[inline]
    fn has_left(&self) -> bool {
        self.left.get() > 0
    }
}

/// The worker's side: the budget's uses that depend on who runs (a fiber or a task's poll).
impl Worker {
    /// Whether a future-side socket operation may try now. From a task's poll with the
    /// budget spent: no (the task is woken to run again later); otherwise yes.
    #[inline]
    fn io_budget_allows(&self, cx: &Context<'_>) -> bool {
        if self.io_budget.has_left() || self.in_fiber() {
            return true;
        }
        cx.waker().wake_by_ref();
        false
    }

    /// Takes one unit for a future-side socket operation that completed: from a fiber as a
    /// blocking-style one; from a task's poll down to zero, where it stays until the next poll.
    #[inline]
    fn take_io_budget_polled(&self) {
        if self.in_fiber() {
            self.take_io_budget();
        } else {
            self.io_budget.take_polled();
        }
    }

    /// Takes one unit for a socket operation that completed on the running fiber; yields the
    /// fiber when that was the last unit.
    #[inline]
    fn take_io_budget(&self) {
        if !self.io_budget.take_on_fiber() {
            self.io_budget_spent();
        }
    }

    /// The budget was spent (and refilled): yield the running fiber, where parking is allowed.
    #[cold]
    #[inline(never)]
    fn io_budget_spent(&self) {
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

/// Called by a future-side socket operation before it tries: `false` when it must return
/// `Pending` (a task's poll spent its budget; the task was woken). Off a worker: always `true`.
#[inline]
pub(crate) fn poll_io_budget(cx: &Context<'_>) -> bool {
    match super::current() {
        Some(worker) => worker.io_budget_allows(cx),
        None => true,
    }
}

/// Called by a future-side socket operation that completed (module doc).
#[inline]
pub(crate) fn consume_polled_io_budget() {
    if let Some(worker) = super::current() {
        worker.take_io_budget_polled();
    }
}
