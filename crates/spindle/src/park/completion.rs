//! The three waits on a join cell (module `fiber::completion`: the cell and its protocol):
//!
//! - [`Completion::join`]: blocking-style, until complete (parks a fiber, blocks a thread);
//! - [`Completion::wait_until`]: the same with a deadline, returning whether it completed;
//! - [`Completion::poll`]: as a future;
//!
//! and [`Completion::join_at_home`], `join` for a joiner that shares the completer's thread.
//!
//! # Invariants
//!
//! The cell's own ("result before COMPLETE", "whoever sets the second bit owns the slot")
//! are module `fiber::completion`'s. The waits add:
//!
//! - **A plain join registers its caller; the other waits register a forwarder.** The word
//!   takes one waiter for good. A `join` (which consumes the handle and waits to the end)
//!   registers the caller itself, which costs nothing extra. A timed wait or a poll may be
//!   followed by another wait from another fiber, thread or task, so they register a
//!   [`Forward`] whose target each wait replaces (a timed-out wait clears it): every wait
//!   wakes the party waiting now, never a stale one.
//! - **A joiner at home.** When a fiber joins a fiber that can only ever run on the joiner's
//!   own worker (it started there, or it is unstarted in that worker's run queue and pinned
//!   there at the join: `Worker::keeps_for_join`), the completer runs on the joiner's thread,
//!   never at the same time as the joiner. [`Completion::join_at_home`] then registers the
//!   joiner with a plain store instead of `fetch_or`, as an uncounted [`HomeFiber`] instead
//!   of a counted fiber reference: three atomic read-modify-writes fewer per join (a third of
//!   the spawn-and-join loop's). The joiner stays alive while registered: it leaves the join
//!   only once it saw `COMPLETE` (set by a completer that wakes it without switching away
//!   first) or, unwinding (cancelled), after taking its waiter back with plain stores.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

pub(crate) use crate::fiber::completion::{Completion, Joiner};
use crate::fiber::completion::{Forward, JoinWord};
use crate::fiber::waiter::{HomeFiber, Waiter};
use crate::lock::lock;
use crate::sched::api::{self, Worker};

impl Completion {
    /// Waits until complete, from blocking-style code (parks a fiber, blocks a thread).
    /// Inlined into the join handles: the joiner, once resumed, then has one return fewer to
    /// make, each a chance for the return stack buffer to mispredict after the switch.
    #[track_caller]
    #[inline(always)]
    pub(crate) fn join(&self, joiner: &Joiner, reason: &'static str) {
        if self.is_complete() {
            return;
        }
        match joiner.forward.get() {
            Some(forward) => {
                *lock(&forward.0) = Some(Waiter::current());
                if self.is_complete() {
                    return;
                }
            }
            None => {
                if !self.word.set_waiter(Waiter::current()) {
                    return; // completed meanwhile
                }
            }
        }
        while !self.is_complete() {
            crate::sched::api::park(reason);
        }
    }

    /// [`join`](Self::join) by a fiber of `worker` whose completer can only run on that
    /// worker ("a joiner at home"): the caller checked that with `Worker::keeps_for_join`.
    #[track_caller]
    #[inline(always)]
    pub(crate) fn join_at_home(&self, joiner: &Joiner, worker: &Worker, reason: &'static str) {
        if self.is_complete() {
            return;
        }
        if joiner.forward.get().is_some() {
            // A timed wait or a poll registered a forwarder already: the word's slot is taken.
            return self.join(joiner, reason);
        }
        crate::fiber::check_no_park(reason);
        self.word.set_waiter_at_home(Waiter::Home(HomeFiber::current(worker)));
        // Unwinding out of the park (the joiner was cancelled), the joiner takes its waiter
        // back: the completer may still run, after the joiner is gone.
        struct Retract<'a>(&'a JoinWord<Waiter>);
        impl Drop for Retract<'_> {
            fn drop(&mut self) {
                self.0.retract_at_home();
            }
        }
        let retract = Retract(&self.word);
        while !self.is_complete() {
            worker.park_current(reason);
        }
        std::mem::forget(retract);
    }

    /// Waits until complete or `deadline`, from blocking-style code; true if complete.
    #[track_caller]
    pub(crate) fn wait_until(&self, joiner: &Joiner, deadline: Instant, reason: &'static str) -> bool {
        if self.is_complete() {
            return true;
        }
        let Some(forward) = self.forward(joiner) else { return true };
        *lock(&forward.0) = Some(Waiter::current());
        while !self.is_complete() && api::now() < deadline {
            super::timed::park_until(Some(deadline), reason);
        }
        if self.is_complete() {
            return true;
        }
        // Timed out: nobody waits any more.
        *lock(&forward.0) = None;
        self.is_complete()
    }

    /// Polls for completion: `Ready` once complete, else `cx`'s waker is woken on completion.
    pub(crate) fn poll(&self, joiner: &Joiner, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_complete() {
            return Poll::Ready(());
        }
        let Some(forward) = self.forward(joiner) else { return Poll::Ready(()) };
        {
            let mut target = lock(&forward.0);
            match &mut *target {
                Some(w) if w.will_wake(cx.waker()) => {}
                slot => *slot = Some(Waiter::Task(cx.waker().clone())),
            }
        }
        // Completion may have come before the target was stored: check again.
        if self.is_complete() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// The joiner's forwarder, registered in the word on first use; `None` when the cell
    /// completed before it could be registered (nothing to wait for).
    fn forward<'j>(&self, joiner: &'j Joiner) -> Option<&'j Arc<Forward>> {
        if let Some(f) = joiner.forward.get() {
            return Some(f);
        }
        let forward = Arc::new(Forward::default());
        if !self.word.set_waiter(Waiter::Task(Waker::from(forward.clone()))) {
            return None;
        }
        Some(joiner.forward.get_or_init(|| forward))
    }
}
