//! A task's state word: who may poll it, whether it is queued, whether it is aborted,
//! registered or done, whether its joiner waits, and how many references it has, all in one
//! `usize`.
//!
//! ```text
//!  usize::BITS - 1                         6   5   4   3 2   1   0
//! +-----------------------------------------+---+---+-----+---+---+
//! |              reference count            |REG|ABT| LIFE|JW |CPL|
//! +-----------------------------------------+---+---+-----+---+---+
//! ```
//!
//! - `COMPLETE` (bit 0): the output or the cancellation is stored. Set once, by the holder
//!   of `RUNNING`, in the same read-modify-write that ends `RUNNING`; never cleared. It is the
//!   join cell's `COMPLETE` (module `fiber::completion`).
//! - `JOIN_WAITER` (bit 1): the joiner's waiter is in the cell's slot. Set once, by the single
//!   joiner, with `fetch_or` (the join cell's `WAITER`).
//! - `LIFECYCLE` (bits 2–3), meaningful while `COMPLETE` is clear: `IDLE` (waiting for a
//!   wake-up, in no queue), `SCHEDULED` (in exactly one queue), `RUNNING` (one worker polls
//!   it, or a canceller holds it), `NOTIFIED` (woken during its poll). Zero once complete.
//! - `ABORTED` (bit 4): the join handle's `abort` ran. Set once, never cleared.
//! - `REGISTERED` (bit 5): the task is in some worker's live list ("exactly one canceller",
//!   module `task`). Set once, at spawn for a pinned task, else by the first worker that saw
//!   the task wait.
//! - the reference count (bits 6 and up, in units of `REF_ONE`): the join handle, each queue
//!   or live-list entry, each waker that is not a poll's borrowed one. The party that takes
//!   the count to zero frees the task.
//!
//! Lifecycle transitions, all by compare-exchange on the whole word (the other bits change
//! concurrently, so none of them is a plain store):
//!
//! - `IDLE → SCHEDULED`: a waker ([`TaskState::wake`]) or an abort
//!   ([`TaskState::schedule_idle`]), which then queues the task;
//! - `SCHEDULED → RUNNING`: the worker that took it from a queue ([`TaskState::start_poll`]);
//! - `RUNNING → NOTIFIED`: a waker during the poll;
//! - `RUNNING → IDLE` after a `Pending` poll, or `NOTIFIED → SCHEDULED` (the poller requeues
//!   it) ([`TaskState::end_poll`]);
//! - `IDLE | SCHEDULED → RUNNING`: a shutdown claim ([`TaskState::claim`]);
//! - `RUNNING | NOTIFIED → COMPLETE`: the holder, once the output or the cancellation is
//!   stored ([`TaskState::complete`]).
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
//! - **Done is final.** Nothing clears `COMPLETE`; a wake-up or a claim of a done task is a
//!   no-op.
//! - **The join bits follow the join cell's rules.** `COMPLETE` and `JOIN_WAITER` are the
//!   join cell's bits (module `fiber::completion`, "result before COMPLETE", "whoever sets
//!   the second bit owns the slot"); the word is shared, so the cell's plain stores are never
//!   used on it ("a shared word takes no plain store"): completion is a read-modify-write
//!   here that reports whether a waiter was registered.
//! - **The last reference frees.** A reference is added only by a party that holds one (a
//!   `Relaxed` increment suffices, as for `Arc`); a decrement is a release, and the party
//!   whose decrement took the count to zero acquires every earlier access before it frees
//!   the task. A count that would overflow its bits aborts the process.
//!
//! Modelled with loom below.

use std::sync::atomic::Ordering;

use crate::fiber::completion::{Completion, COMPLETE, WAITER};
use crate::loom::AtomicUsize;

/// The join cell's `WAITER`, under this word's name.
const JOIN_WAITER: usize = WAITER;
const LIFECYCLE: usize = 0b11 << 2;
const IDLE: usize = 0;
const SCHEDULED: usize = 1 << 2;
const RUNNING: usize = 2 << 2;
const NOTIFIED: usize = 3 << 2;
const ABORTED: usize = 1 << 4;
const REGISTERED: usize = 1 << 5;
const REF_SHIFT: u32 = 6;
/// One reference.
const REF_ONE: usize = 1 << REF_SHIFT;
/// The count bits.
const REF_MASK: usize = !(REF_ONE - 1);
/// A count beyond this aborts ("the last reference frees"), with room left for the
/// increments that race with the check.
const REF_MAX: usize = REF_MASK >> 1;

const _: () = assert!((COMPLETE | JOIN_WAITER) & (LIFECYCLE | ABORTED | REGISTERED | REF_MASK) == 0);
const _: () = assert!((LIFECYCLE | ABORTED | REGISTERED) & REF_MASK == 0);

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

/// A task's state word, inside its join cell (the word also holds the join bits); `W` is the
/// join cell's waiter.
#[derive(Debug)]
pub(crate) struct TaskState<W = crate::fiber::waiter::Waiter> {
    join: Completion<W>,
}

impl<W> TaskState<W> {
    /// A new task with one reference: `SCHEDULED`, since its spawner queues it (or polls it)
    /// at once; `registered` when it is in a live list from the start.
    pub(crate) fn new(registered: bool) -> TaskState<W> {
        let reg = if registered { REGISTERED } else { 0 };
        TaskState { join: Completion::with_word(SCHEDULED | reg | REF_ONE) }
    }

    #[inline(always)]
    fn word(&self) -> &AtomicUsize {
        self.join.word.word()
    }

    /// The join cell, for the joiner's waits ("the join bits follow the join cell's rules").
    #[inline]
    pub(crate) fn completion(&self) -> &Completion<W> {
        &self.join
    }

    /// Moves the lifecycle from what `next` accepts to what it returns, by compare-exchange;
    /// `None` (and no change) when `next` refuses the current word.
    #[inline(always)]
    fn transition(&self, next: impl Fn(usize) -> Option<usize>) -> Result<usize, usize> {
        let word = self.word();
        let mut state = word.load(Ordering::Acquire);
        loop {
            let Some(to) = next(state) else { return Err(state) };
            match word.compare_exchange_weak(state, to, Ordering::AcqRel, Ordering::Acquire) {
                Ok(prev) => return Ok(prev),
                Err(actual) => state = actual,
            }
        }
    }

    /// A waker: true when it moved the task `IDLE → SCHEDULED` and must now queue it.
    #[inline]
    pub(crate) fn wake(&self) -> bool {
        let r = self.transition(|s| {
            if s & COMPLETE != 0 {
                return None; // done
            }
            match s & LIFECYCLE {
                IDLE => Some(s | SCHEDULED),
                RUNNING => Some((s & !LIFECYCLE) | NOTIFIED),
                _ => None, // already queued or already notified
            }
        });
        matches!(r, Ok(prev) if prev & LIFECYCLE == IDLE)
    }

    /// `IDLE → SCHEDULED` only (an abort that wants the future dropped soon): true when the
    /// caller must queue the task.
    #[inline]
    pub(crate) fn schedule_idle(&self) -> bool {
        self.transition(|s| (s & (COMPLETE | LIFECYCLE) == IDLE).then_some(s | SCHEDULED)).is_ok()
    }

    /// A worker that took the task from a queue: true when it now holds `RUNNING`; false when
    /// the task was cancelled meanwhile (it is done).
    #[inline]
    pub(crate) fn start_poll(&self) -> bool {
        self.transition(|s| (s & (COMPLETE | LIFECYCLE) == SCHEDULED).then_some((s & !LIFECYCLE) | RUNNING))
            .is_ok()
    }

    /// The poller, after a `Pending` poll.
    #[inline]
    pub(crate) fn end_poll(&self) -> AfterPoll {
        let r = self.transition(|s| match s & LIFECYCLE {
            RUNNING => Some(s & !LIFECYCLE), // IDLE
            NOTIFIED => Some((s & !LIFECYCLE) | SCHEDULED),
            _ => None,
        });
        match r {
            Ok(prev) if prev & LIFECYCLE == RUNNING => AfterPoll::Wait,
            Ok(_) => AfterPoll::Requeue,
            Err(state) => unreachable!("a task's poll ended in state {state:#x}"),
        }
    }

    /// Shutdown: takes `RUNNING` from an idle or queued task.
    pub(crate) fn claim(&self) -> Claim {
        let r = self.transition(|s| match s & LIFECYCLE {
            _ if s & COMPLETE != 0 => None,
            IDLE | SCHEDULED => Some((s & !LIFECYCLE) | RUNNING),
            _ => None,
        });
        match r {
            Ok(_) => Claim::Claimed,
            Err(state) if state & COMPLETE != 0 => Claim::Done,
            Err(_) => Claim::Busy,
        }
    }

    /// The `RUNNING` holder, once the output or the cancellation is stored: ends `RUNNING`
    /// (or `NOTIFIED`) and sets `COMPLETE` in one read-modify-write (a waker's `RUNNING →
    /// NOTIFIED` is ordered before or after it as a whole: "done is final"). Returns the
    /// joiner's waiter to wake, if one registered ("whoever sets the second bit owns the
    /// slot").
    #[inline]
    pub(crate) fn complete(&self) -> Option<W> {
        let prev = match self.transition(|s| Some((s & !LIFECYCLE) | COMPLETE)) {
            Ok(prev) | Err(prev) => prev,
        };
        debug_assert!(prev & COMPLETE == 0 && prev & RUNNING != 0, "completed without RUNNING");
        if prev & JOIN_WAITER == 0 {
            return None;
        }
        // SAFETY: we are the single completer (we held RUNNING) and our read-modify-write
        // that set COMPLETE read JOIN_WAITER set: the slot is ours ("whoever sets the second
        // bit owns the slot").
        unsafe { self.join.word.take_waiter() }
    }

    /// Whether the output or the cancellation is stored (acquire: it is visible).
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.word().load(Ordering::Acquire) & COMPLETE != 0
    }

    /// Marks the task aborted (its handle's `abort`).
    #[inline]
    pub(crate) fn set_aborted(&self) {
        self.word().fetch_or(ABORTED, Ordering::AcqRel);
    }

    #[inline]
    pub(crate) fn is_aborted(&self) -> bool {
        self.word().load(Ordering::Acquire) & ABORTED != 0
    }

    /// Marks the task as registered in a worker's live list; true the first time only.
    #[inline]
    pub(crate) fn register_once(&self) -> bool {
        self.word().fetch_or(REGISTERED, Ordering::Relaxed) & REGISTERED == 0
    }

    /// Adds a reference; the caller holds one ("the last reference frees").
    #[inline]
    pub(crate) fn ref_inc(&self) {
        let prev = self.word().fetch_add(REF_ONE, Ordering::Relaxed);
        if prev > REF_MAX {
            std::process::abort();
        }
    }

    /// Drops a reference: true when it was the last, and the caller must free the task
    /// ("the last reference frees": every access by the other holders happened before).
    #[inline]
    pub(crate) fn ref_dec(&self) -> bool {
        let prev = self.word().fetch_sub(REF_ONE, Ordering::AcqRel);
        debug_assert!(prev & REF_MASK != 0, "a task's reference count went below zero");
        prev & REF_MASK == REF_ONE
    }
}

#[cfg(all(test, spindle_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    type State = TaskState<usize>;

    /// A waker races with a poll that returns `Pending`: the task ends up queued exactly once
    /// (by the waker, or requeued by the poller), never zero times (a lost wake-up) nor twice.
    #[test]
    fn loom_wake_during_poll_is_not_lost() {
        loom::model(|| {
            let state = Arc::new(State::new(false));
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
            let state = Arc::new(State::new(false));
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
            let state = Arc::new(State::new(false));
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
                        assert_eq!(state.complete(), None);
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

    /// The joiner registers while the poller completes and a waker and an abort touch the
    /// same word: the joiner is woken exactly when it registered, the output written before
    /// completion is visible to it, and no other bit is lost.
    #[test]
    fn loom_complete_hands_over_the_waiter_in_a_shared_word() {
        loom::model(|| {
            let state = Arc::new(State::new(false));
            assert!(state.start_poll());
            let output = Arc::new(AtomicUsize::new(0));
            let completer = {
                let (state, output) = (state.clone(), output.clone());
                thread::spawn(move || {
                    output.store(7, Ordering::Relaxed);
                    state.complete()
                })
            };
            let waker = {
                let state = state.clone();
                thread::spawn(move || {
                    let _ = state.wake();
                    state.set_aborted();
                })
            };
            let registered = state.completion().word.set_waiter(99);
            let woken = completer.join().unwrap();
            waker.join().unwrap();
            assert_eq!(woken, registered.then_some(99), "woken iff registered");
            assert!(state.completion().is_complete());
            assert_eq!(output.load(Ordering::Relaxed), 7);
            assert!(state.is_aborted(), "the abort bit survived the completion");
            assert!(!state.wake(), "done is final");
        });
    }

    /// An abort races with a poll that returns `Pending`: the task is queued exactly once
    /// afterwards (by the abort, or by the poller that saw `ABORTED` once its poll ended), so
    /// a worker drops its future.
    #[test]
    fn loom_abort_during_poll_is_not_lost() {
        loom::model(|| {
            let state = Arc::new(State::new(false));
            assert!(state.start_poll());
            let queued = Arc::new(AtomicUsize::new(0));
            let aborter = {
                let (state, queued) = (state.clone(), queued.clone());
                thread::spawn(move || {
                    state.set_aborted();
                    if state.schedule_idle() {
                        queued.fetch_add(1, Ordering::Relaxed);
                    }
                })
            };
            match state.end_poll() {
                AfterPoll::Requeue => unreachable!("nobody woke it"),
                AfterPoll::Wait => {
                    if state.is_aborted() && state.wake() {
                        queued.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            aborter.join().unwrap();
            assert_eq!(queued.load(Ordering::Relaxed), 1, "queued exactly once after the abort");
            assert!(state.start_poll() && state.is_aborted());
        });
    }

    /// References dropped on two threads while the task completes: exactly one drop is the
    /// last, after both the others and the completion.
    #[test]
    fn loom_last_reference_frees_once() {
        loom::model(|| {
            let state = Arc::new(State::new(false));
            state.ref_inc(); // the second thread's
            assert!(state.start_poll());
            let lasts = Arc::new(AtomicUsize::new(0));
            let other = {
                let (state, lasts) = (state.clone(), lasts.clone());
                thread::spawn(move || {
                    state.register_once();
                    if state.ref_dec() {
                        lasts.fetch_add(1, Ordering::Relaxed);
                    }
                })
            };
            assert_eq!(state.complete(), None);
            if state.ref_dec() {
                lasts.fetch_add(1, Ordering::Relaxed);
            }
            other.join().unwrap();
            assert_eq!(lasts.load(Ordering::Relaxed), 1, "exactly one last reference");
            assert!(state.is_done());
        });
    }
}
