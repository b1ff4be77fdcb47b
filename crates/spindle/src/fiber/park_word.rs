//! A fiber's park word: the one word through which a fiber parks and its unparkers wake it.
//!
//! Embedded in the fiber's control block (`Header::park`, module `fiber::control`); the fiber
//! writes it in the switch (module `sched::worker::switch`), its unparkers from any thread
//! (module `fiber::waiter`), shutdown through [`ParkState::claim_parked`].
//!
//! # Invariants
//!
//! - **The permit contract.** Fibers follow `std::thread::park`'s contract: an unpark that
//!   comes before the park leaves a permit, so the park returns at once and no wake-up is lost.
//!   Parks may return spuriously: every caller loops on its condition.
//! - **One rescheduler.** Of all the parties that unpark a parked fiber, exactly one (the one
//!   whose compare-exchange moves it out of `PARKED`) queues it again, and only on the worker
//!   that owns it: started fibers never change thread (soundness rule "fibers stay home").
//!   That party also takes over the fiber's run reference, which the fiber forgot when it
//!   parked (module `sched::worker`, "a started fiber owns itself"): a wake-up clones nothing.
//! - **Hand-over.** Acquire/release on every transition of the park word: what the unparker
//!   wrote before `unpark` is visible to the fiber after it returns from `park`.
//!
//! # States
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
//! Only the fiber leaves `NOTIFIED` (no lost wake-up) and only an unparker leaves `PARKED`
//! (one rescheduler). Both are modelled with loom below.

use std::sync::atomic::Ordering;

use crate::loom::AtomicU8;

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

/// A fiber's park word; see the module doc.
#[derive(Debug)]
pub(crate) struct ParkState(AtomicU8);

impl ParkState {
    pub(crate) fn new() -> ParkState {
        ParkState(AtomicU8::new(IDLE))
    }

    /// Called by the fiber itself, running: consumes a pending permit or becomes `PARKED`.
    /// One compare-exchange: the word is `IDLE` or `NOTIFIED` here (only the fiber enters
    /// `PARKED`, and it is running).
    #[inline]
    pub(crate) fn park(&self) -> Park {
        match self.0.compare_exchange(IDLE, PARKED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Park::Suspend,
            Err(_) => {
                // A permit is pending (IDLE -> NOTIFIED, before or during this call; the failed
                // exchange acquired it). Only the fiber leaves NOTIFIED, so a plain store
                // consumes the permit.
                self.0.store(IDLE, Ordering::Relaxed);
                Park::Return
            }
        }
    }

    /// From any thread: wakes the fiber. Returns true when the caller moved it out of
    /// `PARKED` and must now reschedule it; false when it left or found a permit instead.
    #[inline]
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

#[cfg(all(test, spindle_loom))]
mod park_word_loom_tests {
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
}
