//! A worker's timers: the wheel (module `reactor::wheel`) of the wakers of its fibers' and
//! futures' deadlines, fired by the loop.
//!
//! Invariants: **owner-only** (the wheel lives in `Worker` and is touched only by its thread);
//! **wakers run after the wheel is released** (a waker may add timers); **a timer remembers its
//! wheel** — a task may move to another worker between polls, so cancelling a timer from
//! another worker is a no-op (it fires there later and wakes its waker once, spuriously);
//! **the wheel knows what it fired**: `fired_up_to` is the latest `now` the wheel was advanced
//! to, recorded before the fired wakers run, so a timer of this wheel whose deadline is later
//! than it has not fired and is still on the wheel ([`Worker::timer_not_due`]: a future polled
//! again on this worker needs no clock read to know it must keep waiting). That rests on the
//! wheel never firing a timer before its deadline, however far away (module `reactor::wheel`).
//!
//! **The runtime's clock** (module `sched::clock`): the wheel is advanced to the clock's
//! readings, and the loop sleeps until the real instant at which the clock reaches the next
//! timer ([`Worker::next_timer_deadline`]); both are the real clock unless the runtime's time
//! was paused. A paused clock **auto-advances**: when the loop has nothing to run,
//! `next_timer_deadline` asks for a non-blocking look at the reactor (`auto_advance` set), and
//! the `fire_timers` after it moves the clock to the next timer if that look made nothing
//! runnable either, then fires it.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::task::Waker;
use std::time::Instant;

use super::Worker;
use crate::reactor::wheel::{TimerKey, TimerWheel};
use crate::sched::clock::{self, Idle};

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
    /// paused clock may auto-advance at the next `fire_timers` ("the runtime's clock").
    auto_advance: Cell<bool>,
}

impl Timers {
    pub(super) fn new() -> Timers {
        // Every wheel counts from the same origin, the grid a paused clock stays on.
        let origin = clock::epoch();
        Timers {
            wheel: RefCell::new(TimerWheel::new(origin)),
            fired: RefCell::new(Vec::new()),
            fired_up_to: Cell::new(origin),
            auto_advance: Cell::new(false),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.wheel.borrow().is_empty()
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.wheel.borrow().next_deadline()
    }
}

impl Worker {
    /// Adds a timer that wakes `waker` at `deadline`.
    pub(crate) fn add_timer(&self, deadline: Instant, waker: Waker) -> TimerHandle {
        let key = self.timers.wheel.borrow_mut().insert(deadline, waker);
        TimerHandle { key, worker: Arc::as_ptr(&self.shared) as usize }
    }

    /// Cancels a timer (no-op if it fired already, or if it is on another worker's wheel).
    pub(crate) fn cancel_timer(&self, timer: TimerHandle) {
        if timer.worker == Arc::as_ptr(&self.shared) as usize {
            let _ = self.timers.wheel.borrow_mut().cancel(timer.key);
        }
    }

    /// Whether `timer` is on this worker's wheel and not due by the wheel's last advance:
    /// then it is still there, and fires (waking its waker) at a later advance ("the wheel
    /// knows what it fired"). False when it may have fired, or is another worker's: the
    /// caller reads the clock.
    #[inline]
    pub(crate) fn timer_not_due(&self, timer: TimerHandle, deadline: Instant) -> bool {
        timer.worker == Arc::as_ptr(&self.shared) as usize && deadline > self.timers.fired_up_to.get()
    }

    /// When the idle loop must wake up for its next timer, as a real instant (`None`: no
    /// timer). With a paused clock: now, after which [`fire_timers`](Self::fire_timers) may
    /// auto-advance ("the runtime's clock").
    pub(super) fn next_timer_deadline(&self) -> Option<Instant> {
        let next = self.timers.next_deadline()?;
        match self.rt.clock.on_idle(next) {
            Idle::SleepUntil(real) => Some(real),
            Idle::AutoAdvance => {
                self.timers.auto_advance.set(true);
                Some(Instant::now())
            }
        }
    }

    /// Fires the timers due on the runtime's clock now: for `time::advance`, which has just
    /// moved a paused clock (called from a fiber or task of this worker, which holds no
    /// borrow of the wheel).
    pub(crate) fn fire_due_timers(&self) {
        if !self.timers.is_empty() {
            self.fire_timers(Instant::now());
        }
    }

    /// Wakes the owners of every timer that is due (after releasing the wheel). `now` is a
    /// real instant; the wheel is advanced to the runtime's clock at that instant.
    pub(super) fn fire_timers(&self, now: Instant) {
        let clock = &self.rt.clock;
        let now = if clock.is_shifted() {
            if self.timers.auto_advance.replace(false) && !self.has_runnable() {
                if let Some(next) = self.timers.next_deadline() {
                    clock.advance_to(next);
                }
            }
            clock.at(now)
        } else {
            now
        };
        let mut wakers = {
            let mut wheel = self.timers.wheel.borrow_mut();
            if wheel.is_empty() {
                return;
            }
            let mut buf = std::mem::take(&mut *self.timers.fired.borrow_mut());
            wheel.advance(now, |w| buf.push(w));
            // Before the wakers run: a future they wake must see its timer as fired.
            if now > self.timers.fired_up_to.get() {
                self.timers.fired_up_to.set(now);
            }
            buf
        };
        self.dispatching.set(true);
        for w in wakers.drain(..) {
            w.wake();
        }
        self.dispatching.set(false);
        *self.timers.fired.borrow_mut() = wakers;
    }
}
