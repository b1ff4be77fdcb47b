//! The join cell of fibers, tasks and blocking jobs: the completion word and the joiner's
//! waiter slot.
//!
//! A [`Completion`] sits beside the result in the completing party's memory (a fiber's
//! control block, a task, a blocking job's slot). The completer stores the result, then calls
//! [`Completion::complete`], which wakes the joiner if one waits. The single joiner (the join
//! handle, which is not `Clone`) registers a [`Waiter`] in the cell and reads the result once
//! [`Completion::is_complete`] says so. How the joiner waits (blocking-style, with a deadline,
//! as a future, at home) is module `park::completion`: this module is the cell alone, in the
//! fiber layer because every fiber's control block holds one.
//!
//! # Invariants
//!
//! - **Result before COMPLETE.** The join word has bits `COMPLETE` (the result is stored)
//!   and `WAITER` (a joiner stored its waiter in the slot). The completer sets `COMPLETE` after
//!   writing the result (release); the joiner reads the result only after it saw `COMPLETE`
//!   (acquire).
//! - **Whoever sets the second bit owns the slot.** The single joiner writes the slot only
//!   while `WAITER` is clear and then sets `WAITER` (release). If the completer saw `WAITER`,
//!   it takes the waiter and wakes it; if the joiner saw `COMPLETE`, it takes its waiter back
//!   (nobody will wake it, and nobody needs to). So a registered waiter is woken exactly once
//!   (modelled with loom below).
//! - **The completer stores when it sees WAITER.** The word has two writers, each writing
//!   once: the joiner sets `WAITER`, the completer `COMPLETE`. A completer whose acquire load
//!   finds `WAITER` set is the last writer, so it publishes `COMPLETE` with a plain release
//!   store instead of a read-modify-write (a join that waits before the fiber ends, the
//!   common case, saves one); otherwise it races the joiner and sets it with `fetch_or`.
//! - **A completion wakes its joiner behind the queue.** A joining fiber of the completer's
//!   own worker is queued at the back of the run queue, not in the LIFO slot that other
//!   wake-ups use: the fibers queued before it run first, so a fiber that joins many in turn
//!   (`join_all`, a scatter-gather) runs once per pass and finds several finished, instead
//!   of running after each completion only to park again on the next handle (two switches a
//!   join; `docs/perf/scheduler.md`). tokio's current-thread scheduler queues every wake-up this way.
//!   The price: a single join under load waits for the queue to pass once more.
//! - **A shared word takes no plain store.** The join bits are the two low bits of a
//!   `usize` word. A fiber's word holds nothing else, so the plain stores above (and those of
//!   "a joiner at home", module `park::completion`) write the whole word safely. A task keeps
//!   its whole state in the same word (module `sched::task_state`), which other parties
//!   change at any time: it completes by its own read-modify-write and then takes the waiter
//!   ([`JoinWord::take_waiter`]), and never joins at home. The plain-store paths check, in
//!   debug builds, that the word holds the join bits only.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Wake;

use super::waiter::Waiter;
use crate::lock::lock;
use crate::loom::{AtomicUsize, UnsafeCell};

/// The completion side of a join cell. `W` is a [`Waiter`] but in the loom models.
#[derive(Debug)]
pub(crate) struct Completion<W = Waiter> {
    pub(crate) word: JoinWord<W>,
}

/// The joiner's side of a join cell, kept in the join handle: the forwarder registered by a
/// timed wait or a poll, if any.
#[derive(Debug, Default)]
pub(crate) struct Joiner {
    pub(crate) forward: OnceLock<Arc<Forward>>,
}

/// The waiter a retargetable wait registers: wakes whoever waits now.
#[derive(Debug, Default)]
pub(crate) struct Forward(pub(crate) Mutex<Option<Waiter>>);

impl Wake for Forward {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let target = lock(&self.0).take();
        if let Some(w) = target {
            // Only a completion wakes a forwarder: its target is a joiner too.
            w.wake_joiner();
        }
    }
}

impl Default for Completion {
    fn default() -> Self {
        Completion::new()
    }
}

impl<W> Completion<W> {
    pub(crate) fn new() -> Completion<W> {
        Completion { word: JoinWord::new() }
    }

    /// A cell whose word also holds its owner's bits, `initial` to begin with ("a shared word
    /// takes no plain store"): the owner completes it with its own read-modify-write.
    pub(crate) fn with_word(initial: usize) -> Completion<W> {
        debug_assert_eq!(initial & (COMPLETE | WAITER), 0);
        Completion { word: JoinWord { state: AtomicUsize::new(initial), waiter: UnsafeCell::new(None) } }
    }

    /// Whether the result is stored (acquire: it is visible to the caller).
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.word.is_complete()
    }
}

impl Completion {
    /// By the completer, once, after storing the result: wakes the joiner if one waits,
    /// behind the queued fibers ("a completion wakes its joiner behind the queue").
    #[inline]
    pub(crate) fn complete(&self) {
        if let Some(waiter) = self.word.complete() {
            waiter.wake_joiner();
        }
    }
}

/// The result is stored ("result before COMPLETE").
pub(crate) const COMPLETE: usize = 1;
/// The joiner's waiter is in the slot ("whoever sets the second bit owns the slot").
pub(crate) const WAITER: usize = 2;

/// A join word and the joiner's waiter slot; see the module doc.
#[derive(Debug)]
pub(crate) struct JoinWord<W> {
    state: AtomicUsize,
    waiter: UnsafeCell<Option<W>>,
}

// SAFETY: the slot is handed over between the joiner and the completer through `state`
// (module doc); W moves between those threads, hence W: Send.
unsafe impl<W: Send> Sync for JoinWord<W> {}
// SAFETY: as above.
unsafe impl<W: Send> Send for JoinWord<W> {}

impl<W> JoinWord<W> {
    pub(crate) fn new() -> JoinWord<W> {
        JoinWord { state: AtomicUsize::new(0), waiter: UnsafeCell::new(None) }
    }

    /// The whole word, for an owner that keeps its own bits in it ("a shared word takes no
    /// plain store").
    #[inline(always)]
    pub(crate) fn word(&self) -> &AtomicUsize {
        &self.state
    }

    /// In debug builds: the word holds the join bits only, so a plain store may write it
    /// whole ("a shared word takes no plain store").
    #[inline(always)]
    fn debug_assert_unshared(&self) {
        debug_assert_eq!(self.state.load(Ordering::Relaxed) & !(COMPLETE | WAITER), 0, "a shared join word");
    }

    /// By an owner that set `COMPLETE` with its own read-modify-write and saw `WAITER` set
    /// in the value it replaced: takes the waiter to wake.
    ///
    /// # Safety
    ///
    /// The caller is the single completer and its read-modify-write that set `COMPLETE` read
    /// `WAITER` set ("whoever sets the second bit owns the slot": the slot is now its).
    #[inline]
    pub(crate) unsafe fn take_waiter(&self) -> Option<W> {
        // SAFETY: the caller owns the slot (this function's contract).
        self.waiter.with_mut(|slot| unsafe { (*slot).take() })
    }

    /// Whether [`complete`](Self::complete) has run (acquire: the result is visible).
    pub(crate) fn is_complete(&self) -> bool {
        self.state.load(Ordering::Acquire) & COMPLETE != 0
    }

    /// By the completer, once, after storing the result: returns the waiter to wake, if any.
    pub(crate) fn complete(&self) -> Option<W> {
        // A joiner that registered has written the word for the last time ("the completer
        // stores when it sees WAITER"): a plain store publishes completion then.
        self.debug_assert_unshared();
        let prev = if self.state.load(Ordering::Acquire) & WAITER != 0 {
            self.state.store(WAITER | COMPLETE, Ordering::Release);
            WAITER
        } else {
            self.state.fetch_or(COMPLETE, Ordering::AcqRel)
        };
        if prev & WAITER == 0 {
            return None;
        }
        // SAFETY: WAITER was set, so the joiner handed the slot over and will not touch it
        // again; we are the only completer.
        self.waiter.with_mut(|slot| unsafe { (*slot).take() })
    }

    /// [`set_waiter`](Self::set_waiter) for "a joiner at home": the completer runs on this
    /// thread and not now, so the word is not complete (the caller looked) and nobody else
    /// writes it: a plain store publishes the waiter.
    #[inline(always)]
    pub(crate) fn set_waiter_at_home(&self, waiter: W) {
        self.debug_assert_unshared();
        // SAFETY: WAITER is clear (the single joiner sets it at most once) and the completer
        // is not running ("a joiner at home"), so the slot is ours.
        self.waiter.with_mut(|slot| unsafe { *slot = Some(waiter) });
        self.state.store(WAITER, Ordering::Release);
    }

    /// By a joiner at home leaving its wait early (unwinding): takes its waiter back unless
    /// the completer took it, so that nobody wakes the joiner once it is gone.
    #[cold]
    pub(crate) fn retract_at_home(&self) {
        self.debug_assert_unshared();
        if self.state.load(Ordering::Acquire) & COMPLETE == 0 {
            // SAFETY: not complete, and the completer does not run now ("a joiner at home"):
            // the slot is still ours.
            drop(self.waiter.with_mut(|slot| unsafe { (*slot).take() }));
            self.state.store(0, Ordering::Release);
        }
    }

    /// By the single joiner, at most once: registers `waiter` to be woken on completion.
    /// Returns false (dropping the waiter) when the fiber has completed already. Inlined, so
    /// that the waiter is built where it is stored (see `Waiter::current`).
    #[inline(always)]
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
mod join_word_loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
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
