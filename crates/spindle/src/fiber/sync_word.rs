//! The two lock-free words of a fiber: its park state and its join word.
//!
//! # Park state ([`ParkState`])
//!
//! `IDLE` (running or runnable, no permit), `PARKED` (suspended in `park`), `NOTIFIED` (an
//! unpark arrived while not parked: the next park returns at once). Transitions:
//!
//! - `IDLE → PARKED`: the fiber itself, in [`ParkState::park`], just before switching away;
//! - `PARKED → IDLE`: the one unparker whose compare-exchange wins; it then owns the duty to
//!   reschedule the fiber (exactly once);
//! - `IDLE → NOTIFIED`: an unparker of a fiber that is not parked (a permit);
//! - `NOTIFIED → IDLE`: the fiber, consuming the permit instead of suspending.
//!
//! Only the fiber leaves `NOTIFIED`, and only an unparker leaves `PARKED`. So a wake-up that
//! comes before the park is never lost, and a parked fiber is rescheduled exactly once.
//! Acquire/release on every transition: what the unparker wrote before `unpark` is visible to
//! the fiber after it returns from `park`.
//!
//! # Join word ([`JoinWord`])
//!
//! Bits `COMPLETE` (the result is stored) and `WAITER` (a joiner stored its waiter in the
//! slot). The completer sets `COMPLETE` after writing the result (release); the single joiner
//! writes the slot only while `WAITER` is clear and then sets `WAITER` (release). Whoever sets
//! the second bit decides who owns the slot: if the completer saw `WAITER`, it takes the waiter
//! and wakes it; if the joiner saw `COMPLETE`, it takes its waiter back (nobody will wake it,
//! and nobody needs to). Both are modelled with loom below.

use std::sync::atomic::Ordering;

use crate::loom::{AtomicU8, UnsafeCell};

const IDLE: u8 = 0;
const PARKED: u8 = 1;
const NOTIFIED: u8 = 2;

/// What [`ParkState::park`] tells the fiber to do.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Park {
    /// A permit was pending (or arrived meanwhile): do not suspend.
    Return,
    /// The fiber is now `PARKED`: suspend; an unparker will reschedule it.
    Suspend,
}

/// A fiber's park state; see the module doc.
#[derive(Debug)]
pub(crate) struct ParkState(AtomicU8);

impl ParkState {
    pub(crate) fn new() -> ParkState {
        ParkState(AtomicU8::new(IDLE))
    }

    /// Called by the fiber itself, running: consumes a pending permit or becomes `PARKED`.
    pub(crate) fn park(&self) -> Park {
        if self.0.compare_exchange(NOTIFIED, IDLE, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return Park::Return;
        }
        match self.0.compare_exchange(IDLE, PARKED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Park::Suspend,
            Err(_) => {
                // An unpark slipped in (IDLE -> NOTIFIED; the failed exchange acquired it).
                // Only the fiber leaves NOTIFIED, so a plain store consumes the permit.
                self.0.store(IDLE, Ordering::Relaxed);
                Park::Return
            }
        }
    }

    /// From any thread: wakes the fiber. Returns true when the caller moved it out of
    /// `PARKED` and must now reschedule it; false when it left or found a permit instead.
    pub(crate) fn unpark(&self) -> bool {
        let mut state = self.0.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => NOTIFIED,
                PARKED => IDLE,
                _ => return false, // NOTIFIED: a permit is pending already
            };
            match self.0.compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return state == PARKED,
                Err(actual) => state = actual,
            }
        }
    }

    /// Whether the fiber is suspended in `park` (a snapshot, for diagnostics).
    pub(crate) fn is_parked(&self) -> bool {
        self.0.load(Ordering::Relaxed) == PARKED
    }

    /// For shutdown, by the owner worker: takes a `PARKED` fiber out of `PARKED` without
    /// leaving a permit. True when the caller must reschedule it.
    pub(crate) fn claim_parked(&self) -> bool {
        self.0.compare_exchange(PARKED, IDLE, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }
}

const COMPLETE: u8 = 1;
const WAITER: u8 = 2;

/// A fiber's join word and the joiner's waiter slot; see the module doc.
#[derive(Debug)]
pub(crate) struct JoinWord<W> {
    state: AtomicU8,
    waiter: UnsafeCell<Option<W>>,
}

// SAFETY: the slot is handed over between the joiner and the completer through `state`
// (module doc); W moves between those threads, hence W: Send.
unsafe impl<W: Send> Sync for JoinWord<W> {}
// SAFETY: as above.
unsafe impl<W: Send> Send for JoinWord<W> {}

impl<W> JoinWord<W> {
    pub(crate) fn new() -> JoinWord<W> {
        JoinWord { state: AtomicU8::new(0), waiter: UnsafeCell::new(None) }
    }

    /// Whether [`complete`](Self::complete) has run (acquire: the result is visible).
    pub(crate) fn is_complete(&self) -> bool {
        self.state.load(Ordering::Acquire) & COMPLETE != 0
    }

    /// By the completer, once, after storing the result: returns the waiter to wake, if any.
    pub(crate) fn complete(&self) -> Option<W> {
        let prev = self.state.fetch_or(COMPLETE, Ordering::AcqRel);
        if prev & WAITER == 0 {
            return None;
        }
        // SAFETY: WAITER was set, so the joiner handed the slot over and will not touch it
        // again; we are the only completer.
        self.waiter.with_mut(|slot| unsafe { (*slot).take() })
    }

    /// By the single joiner, at most once: registers `waiter` to be woken on completion.
    /// Returns false (dropping the waiter) when the fiber has completed already.
    pub(crate) fn set_waiter(&self, waiter: W) -> bool {
        if self.is_complete() {
            return false;
        }
        // SAFETY: WAITER is clear (we are the only joiner and set it at most once), so the
        // slot is ours until the fetch_or below publishes it.
        self.waiter.with_mut(|slot| unsafe { *slot = Some(waiter) });
        let prev = self.state.fetch_or(WAITER, Ordering::AcqRel);
        if prev & COMPLETE != 0 {
            // The completer saw no WAITER and will not touch the slot: take it back.
            // SAFETY: the completer reads the slot only when it observed WAITER, which it
            // did not (its fetch_or came first).
            drop(self.waiter.with_mut(|slot| unsafe { (*slot).take() }));
            return false;
        }
        true
    }
}

#[cfg(all(test, spindle_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::{Arc, Notify};
    use loom::thread;

    /// The fiber waits for `data` with the usual park loop; an unparker publishes it. The
    /// "scheduler" is a Notify: rescheduling a PARKED fiber notifies it. A lost wake-up
    /// leaves the fiber waiting forever, which loom reports as a deadlock.
    #[test]
    fn loom_no_lost_wakeup_and_data_is_visible() {
        loom::model(|| {
            let state = Arc::new(ParkState::new());
            let data = Arc::new(AtomicUsize::new(0));
            let resched = Arc::new(Notify::new());
            let unparker = {
                let (state, data, resched) = (state.clone(), data.clone(), resched.clone());
                thread::spawn(move || {
                    data.store(42, Ordering::Relaxed);
                    if state.unpark() {
                        resched.notify();
                    }
                })
            };
            while data.load(Ordering::Relaxed) == 0 {
                if state.park() == Park::Suspend {
                    resched.wait();
                }
            }
            assert_eq!(data.load(Ordering::Relaxed), 42);
            unparker.join().unwrap();
        });
    }

    /// Two unparkers race on a fiber that parks once: it is rescheduled at most once, and is
    /// rescheduled whenever it suspended.
    #[test]
    fn loom_two_unparkers_reschedule_once() {
        loom::model(|| {
            let state = Arc::new(ParkState::new());
            let rescheduled = Arc::new(AtomicUsize::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (state, rescheduled) = (state.clone(), rescheduled.clone());
                    thread::spawn(move || {
                        if state.unpark() {
                            rescheduled.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                })
                .collect();
            let outcome = state.park();
            for t in threads {
                t.join().unwrap();
            }
            let n = rescheduled.load(Ordering::Relaxed);
            match outcome {
                Park::Suspend => assert_eq!(n, 1, "a suspended fiber is rescheduled exactly once"),
                Park::Return => assert_eq!(n, 0, "nobody reschedules a fiber that did not suspend"),
            }
        });
    }

    /// Joiner and completer race: the joiner is woken exactly when it registered, and the
    /// result written before completion is visible to it.
    #[test]
    fn loom_join_word_hands_over_the_waiter() {
        loom::model(|| {
            let word = Arc::new(JoinWord::<usize>::new());
            let result = Arc::new(AtomicUsize::new(0));
            let completer = {
                let (word, result) = (word.clone(), result.clone());
                thread::spawn(move || {
                    result.store(7, Ordering::Relaxed);
                    word.complete()
                })
            };
            let registered = word.set_waiter(99);
            let woken = completer.join().unwrap();
            assert_eq!(woken.is_some(), registered, "woken iff registered");
            if let Some(w) = woken {
                assert_eq!(w, 99);
            }
            assert!(word.is_complete());
            assert_eq!(result.load(Ordering::Relaxed), 7);
        });
    }
}
