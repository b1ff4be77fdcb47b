//! A task's state word: who may poll it, whether it is queued, whether it is done.
//!
//! `IDLE` (waiting for a wake-up, in no queue), `SCHEDULED` (in exactly one queue),
//! `RUNNING` (one worker polls it, or a canceller holds it), `NOTIFIED` (woken during its
//! poll), `DONE` (output or cancellation stored). Transitions, all by compare-exchange or by
//! the single holder of `RUNNING`:
//!
//! - `IDLE → SCHEDULED`: a waker ([`TaskState::wake`]) or an abort ([`TaskState::schedule_idle`]),
//!   which then queues the task;
//! - `SCHEDULED → RUNNING`: the worker that took it from a queue ([`TaskState::start_poll`]);
//! - `RUNNING → NOTIFIED`: a waker during the poll;
//! - `RUNNING → IDLE` after a `Pending` poll, or `NOTIFIED → SCHEDULED` (the poller requeues
//!   it) ([`TaskState::end_poll`]);
//! - `IDLE | SCHEDULED → RUNNING`: a shutdown claim ([`TaskState::claim`]);
//! - `RUNNING → DONE`: the holder, once the output or the cancellation is stored.
//!
//! # Invariants
//!
//! - **One poller at a time.** `RUNNING` is granted to one party by compare-exchange; only its
//!   holder touches the task's future and output.
//! - **One queue entry.** Only the party that moves a task into `SCHEDULED` queues it, so a
//!   task is in at most one queue, and a `RUNNING` task is in none (it is never stolen
//!   mid-poll).
//! - **No lost wake-up.** A wake-up during a poll (`NOTIFIED`) makes the poller requeue the
//!   task; one after it (`IDLE`) queues it.
//! - **Done is final.** Nothing leaves `DONE`; a wake-up or a claim of a done task is a no-op.
//!
//! Modelled with loom below.

use std::sync::atomic::Ordering;

use crate::loom::{AtomicBool, AtomicU8};

const IDLE: u8 = 0;
const SCHEDULED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const DONE: u8 = 4;

/// What the poller does after a `Pending` poll.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum AfterPoll {
    /// Nobody woke it: it waits for a wake-up (`IDLE`).
    Wait,
    /// Woken during the poll: it is `SCHEDULED` again and the poller must queue it.
    Requeue,
}

/// The outcome of a shutdown claim.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Claim {
    /// The caller now holds `RUNNING`: it drops the future and completes the task.
    Claimed,
    /// Already done: nothing to do.
    Done,
    /// Another worker is polling it: try again once its poll has ended.
    Busy,
}

/// A task's state word and its abort flag.
#[derive(Debug)]
pub(crate) struct TaskState {
    word: AtomicU8,
    aborted: AtomicBool,
}

impl TaskState {
    /// A new task: `SCHEDULED`, since its spawner queues it at once.
    pub(crate) fn new() -> TaskState {
        TaskState { word: AtomicU8::new(SCHEDULED), aborted: AtomicBool::new(false) }
    }

    /// A waker: true when it moved the task `IDLE → SCHEDULED` and must now queue it.
    #[inline]
    pub(crate) fn wake(&self) -> bool {
        let mut state = self.word.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => SCHEDULED,
                RUNNING => NOTIFIED,
                _ => return false, // already queued, already notified, or done
            };
            match self.word.compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return state == IDLE,
                Err(actual) => state = actual,
            }
        }
    }

    /// `IDLE → SCHEDULED` only (an abort that wants the future dropped soon): true when the
    /// caller must queue the task.
    #[inline]
    pub(crate) fn schedule_idle(&self) -> bool {
        self.word.compare_exchange(IDLE, SCHEDULED, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// A worker that took the task from a queue: true when it now holds `RUNNING`; false when
    /// the task was cancelled meanwhile (it is done).
    #[inline]
    pub(crate) fn start_poll(&self) -> bool {
        self.word.compare_exchange(SCHEDULED, RUNNING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// The poller, after a `Pending` poll.
    #[inline]
    pub(crate) fn end_poll(&self) -> AfterPoll {
        if self.word.compare_exchange(RUNNING, IDLE, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            AfterPoll::Wait
        } else {
            // NOTIFIED: only the RUNNING holder leaves it, so a plain store suffices.
            self.word.store(SCHEDULED, Ordering::Release);
            AfterPoll::Requeue
        }
    }

    /// Shutdown: takes `RUNNING` from an idle or queued task.
    pub(crate) fn claim(&self) -> Claim {
        let mut state = self.word.load(Ordering::Acquire);
        loop {
            match state {
                DONE => return Claim::Done,
                IDLE | SCHEDULED => {
                    match self.word.compare_exchange(state, RUNNING, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => return Claim::Claimed,
                        Err(actual) => state = actual,
                    }
                }
                _ => return Claim::Busy,
            }
        }
    }

    /// The `RUNNING` holder, once the output or the cancellation is stored.
    #[inline]
    pub(crate) fn set_done(&self) {
        // A read-modify-write, not a plain store: a waker's compare-exchange `RUNNING →
        // NOTIFIED` racing with it must be ordered before or after it as a whole, so DONE is
        // never overwritten ("done is final"; a plain store let loom find that interleaving).
        self.word.swap(DONE, Ordering::AcqRel);
    }

    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.word.load(Ordering::Acquire) == DONE
    }

    /// Marks the task aborted (its handle's `abort`).
    #[inline]
    pub(crate) fn set_aborted(&self) {
        self.aborted.store(true, Ordering::Release);
    }

    #[inline]
    pub(crate) fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }
}

#[cfg(all(test, spindle_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    /// A waker races with a poll that returns `Pending`: the task ends up queued exactly once
    /// (by the waker, or requeued by the poller), never zero times (a lost wake-up) nor twice.
    #[test]
    fn loom_wake_during_poll_is_not_lost() {
        loom::model(|| {
            let state = Arc::new(TaskState::new());
            assert!(state.start_poll());
            let queued = Arc::new(AtomicUsize::new(0));
            let waker = {
                let (state, queued) = (state.clone(), queued.clone());
                thread::spawn(move || {
                    if state.wake() {
                        queued.fetch_add(1, Ordering::Relaxed);
                    }
                })
            };
            if state.end_poll() == AfterPoll::Requeue {
                queued.fetch_add(1, Ordering::Relaxed);
            }
            waker.join().unwrap();
            assert_eq!(queued.load(Ordering::Relaxed), 1, "queued exactly once after the wake");
            assert!(state.start_poll(), "the queued task can be polled");
        });
    }

    /// Two wakers of an idle task: exactly one queues it.
    #[test]
    fn loom_two_wakers_queue_once() {
        loom::model(|| {
            let state = Arc::new(TaskState::new());
            assert!(state.start_poll());
            assert_eq!(state.end_poll(), AfterPoll::Wait);
            let queued = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (state, queued) = (state.clone(), queued.clone());
                    thread::spawn(move || {
                        if state.wake() {
                            queued.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(queued.load(Ordering::Relaxed), 1);
        });
    }

    /// A shutdown claim races with a waker and a poller: the claim and the poll never both
    /// hold RUNNING, and once the canceller completed the task nothing queues it again.
    #[test]
    fn loom_claim_excludes_poll_and_done_is_final() {
        loom::model(|| {
            let state = Arc::new(TaskState::new());
            let polled = Arc::new(AtomicUsize::new(0));
            let poller = {
                let (state, polled) = (state.clone(), polled.clone());
                thread::spawn(move || {
                    if state.start_poll() {
                        polled.fetch_add(1, Ordering::Relaxed);
                        // The poll's end: the counter drops while RUNNING is still held.
                        polled.fetch_sub(1, Ordering::Relaxed);
                        let _ = state.end_poll();
                    }
                })
            };
            let waker = {
                let state = state.clone();
                thread::spawn(move || {
                    let _ = state.wake();
                })
            };
            loop {
                match state.claim() {
                    Claim::Claimed => {
                        assert_eq!(polled.load(Ordering::Relaxed), 0, "claimed during a poll");
                        state.set_done();
                        break;
                    }
                    Claim::Done => unreachable!("nobody else completes"),
                    Claim::Busy => thread::yield_now(),
                }
            }
            poller.join().unwrap();
            waker.join().unwrap();
            assert!(state.is_done(), "done is final");
            assert!(!state.wake(), "a done task is never queued again");
            assert_eq!(state.claim(), Claim::Done);
        });
    }
}
