//! A worker's timers: the wheel (module `reactor::wheel`) of the wakers of its fibers' and
//! futures' deadlines, fired by the loop.
//!
//! Invariants: **owner-only** (the wheel lives in `Worker` and is touched only by its thread);
//! **wakers run after the wheel is released** (a waker may add timers); **a timer remembers its
//! wheel** — a task may move to another worker between polls, so cancelling a timer from
//! another worker is a no-op (it fires there later and wakes its waker once, spuriously);
//! **the wheel knows what it fired**: `fired_up_to` is the latest `now` the wheel was advanced
//! to, recorded before the fired wakers run, so a timer of this wheel whose deadline is later
//! than it has not fired and is still on the wheel ([`Timers::not_due`]: a future polled
//! again on this worker needs no clock read to know it must keep waiting). That rests on the
//! wheel never firing a timer before its deadline, however far away (module `reactor::wheel`).
//!
//! **The runtime's clock** (module `sched::clock`): the wheel is advanced to the clock's
//! readings, and the loop sleeps until the real instant at which the clock reaches the next
//! timer ([`Timers::next_wake`]); both are the real clock unless the runtime's time
//! was paused. A paused clock **auto-advances**: when the loop has nothing to run,
//! `next_wake` asks for a non-blocking look at the reactor (`auto_advance` set), and
//! the `take_due` after it moves the clock to the next timer if that look made nothing
//! runnable either, then fires it.

use std::cell::{Cell, RefCell};
use std::task::Waker;
use std::time::Instant;

use crate::reactor::wheel::{TimerKey, TimerWheel};
use crate::sched::clock::{self, Clock, Idle};

/// A timer on one worker's wheel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimerHandle {
    key: TimerKey,
    /// Address of the `WorkerShared` whose wheel holds the timer.
    worker: usize,
}

/// The wheel and a reused buffer of fired wakers.
pub(super) struct Timers {
    wheel: RefCell<TimerWheel<Waker>>,
    fired: RefCell<Vec<Waker>>,
    /// The latest `now` the wheel was advanced to ("the wheel knows what it fired").
    fired_up_to: Cell<Instant>,
    /// Set when the idle loop was told to look at its reactor without blocking so that a
    /// paused clock may auto-advance at the next `take_due` ("the runtime's clock").
    auto_advance: Cell<bool>,
    /// Address of the owner's `WorkerShared`, which its handles carry ("a timer remembers its
    /// wheel").
    owner: usize,
}

impl Timers {
    /// The timers of the worker whose `WorkerShared` is at `owner`.
    pub(super) fn new(owner: usize) -> Timers {
        // Every wheel counts from the same origin, the grid a paused clock stays on.
        let origin = clock::epoch();
        Timers {
            wheel: RefCell::new(TimerWheel::new(origin)),
            fired: RefCell::new(Vec::new()),
            fired_up_to: Cell::new(origin),
            auto_advance: Cell::new(false),
            owner,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.wheel.borrow().is_empty()
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.wheel.borrow().next_deadline()
    }

    /// Adds a timer that wakes `waker` at `deadline`.
    pub(super) fn add(&self, deadline: Instant, waker: Waker) -> TimerHandle {
        let key = self.wheel.borrow_mut().insert(deadline, waker);
        TimerHandle { key, worker: self.owner }
    }

    /// Cancels a timer (no-op if it fired already, or if it is on another worker's wheel).
    pub(super) fn cancel(&self, timer: TimerHandle) {
        if timer.worker == self.owner {
            let _ = self.wheel.borrow_mut().cancel(timer.key);
        }
    }

    /// Whether `timer` is on this wheel and not due by the wheel's last advance: then it is
    /// still there, and fires (waking its waker) at a later advance ("the wheel knows what it
    /// fired"). False when it may have fired, or is another worker's: the caller reads the
    /// clock.
    #[inline]
    pub(super) fn not_due(&self, timer: TimerHandle, deadline: Instant) -> bool {
        timer.worker == self.owner && deadline > self.fired_up_to.get()
    }

    /// When the idle loop must wake up for its next timer, as a real instant (`None`: no
    /// timer), on the runtime's `clock`. With a paused clock: now, after which
    /// [`take_due`](Self::take_due) may auto-advance ("the runtime's clock").
    pub(super) fn next_wake(&self, clock: &Clock) -> Option<Instant> {
        let next = self.next_deadline()?;
        match clock.on_idle(next) {
            Idle::SleepUntil(real) => Some(real),
            Idle::AutoAdvance => {
                self.auto_advance.set(true);
                Some(Instant::now())
            }
        }
    }

    /// Takes the wakers of every timer due at `now` (a real instant), the wheel advanced to
    /// the runtime's `clock` at that instant; `None` when the wheel is empty. A paused clock
    /// that may auto-advance moves to the next timer first when `idle` says nothing else is
    /// runnable. The caller wakes them once the wheel is released ("wakers run after the
    /// wheel is released") and hands the buffer back ([`give_back`](Self::give_back)).
    pub(super) fn take_due(
        &self,
        now: Instant,
        clock: &Clock,
        idle: impl FnOnce() -> bool,
    ) -> Option<Vec<Waker>> {
        let now = if clock.is_shifted() {
            if self.auto_advance.replace(false) && idle() {
                if let Some(next) = self.next_deadline() {
                    clock.advance_to(next);
                }
            }
            clock.at(now)
        } else {
            now
        };
        let mut wheel = self.wheel.borrow_mut();
        if wheel.is_empty() {
            return None;
        }
        let mut buf = std::mem::take(&mut *self.fired.borrow_mut());
        wheel.advance(now, |w| buf.push(w));
        // Before the wakers run: a future they wake must see its timer as fired.
        if now > self.fired_up_to.get() {
            self.fired_up_to.set(now);
        }
        Some(buf)
    }

    /// The emptied buffer of [`take_due`](Self::take_due), kept for the next advance.
    pub(super) fn give_back(&self, buf: Vec<Waker>) {
        *self.fired.borrow_mut() = buf;
    }
}
