//! The completion word of a join cell: whether the result is stored, and the joiner's waiter.
//!
//! Fibers, tasks and blocking jobs each store their result in their own memory (a fiber's
//! stage, a task's stage, a job's slot) and hand it to their single joiner through this word,
//! which is the one join protocol of spindle (module `park::completion` builds the join side on
//! it: blocking, timed and awaited joins).
//!
//! Bits `COMPLETE` (the result is stored) and `WAITER` (a joiner stored its waiter in the
//! slot).
//!
//! # Invariants
//!
//! - **Result before COMPLETE.** The completer sets `COMPLETE` after writing the result
//!   (release); the joiner reads the result only after it saw `COMPLETE` (acquire).
//! - **Whoever sets the second bit owns the slot.** The single joiner writes the slot only
//!   while `WAITER` is clear and then sets `WAITER` (release). If the completer saw `WAITER`,
//!   it takes the waiter and wakes it; if the joiner saw `COMPLETE`, it takes its waiter back
//!   (nobody will wake it, and nobody needs to). So a registered joiner is woken exactly once.
//!
//! Modelled with loom below.

use std::sync::atomic::Ordering;

use crate::loom::{AtomicU8, UnsafeCell};

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
