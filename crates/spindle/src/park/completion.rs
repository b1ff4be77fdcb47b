//! The join cell of fibers, tasks and blocking jobs: one completion protocol, three waits.
//!
//! A [`Completion`] sits beside the result in the completing party's memory (a fiber's
//! control block, a task, a blocking job's slot). The completer stores the result, then calls
//! [`Completion::complete`], which wakes the joiner if one waits. The single joiner (the join
//! handle, which is not `Clone`) waits in one of three ways, and reads the result once
//! [`Completion::is_complete`] says so:
//!
//! - [`Completion::join`]: blocking-style, until complete (parks a fiber, blocks a thread);
//! - [`Completion::wait_until`]: the same with a deadline, returning whether it completed;
//! - [`Completion::poll`]: as a future.
//!
//! # Invariants
//!
//! - **One protocol.** Completion and the waiter hand-over are the join word's (module
//!   `join_word`, loom-checked): the result is stored before `COMPLETE` is published, and a
//!   registered waiter is woken exactly once.
//! - **A plain join registers its caller; the other waits register a forwarder.** The word
//!   takes one waiter for good. A `join` (which consumes the handle and waits to the end)
//!   registers the caller itself, which costs nothing extra. A timed wait or a poll may be
//!   followed by another wait from another fiber, thread or task, so they register a
//!   [`Forward`] whose target each wait replaces (a timed-out wait clears it): every wait
//!   wakes the party waiting now, never a stale one.

use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use super::join_word::JoinWord;
use super::Waiter;
use crate::sync::lock;

/// The completion side of a join cell.
#[derive(Debug)]
pub(crate) struct Completion {
    word: JoinWord<Waiter>,
}

/// The joiner's side of a join cell, kept in the join handle: the forwarder registered by a
/// timed wait or a poll, if any.
#[derive(Debug, Default)]
pub(crate) struct Joiner {
    forward: OnceLock<Arc<Forward>>,
}

/// The waiter a retargetable wait registers: wakes whoever waits now.
#[derive(Debug, Default)]
struct Forward(Mutex<Option<Waiter>>);

impl Wake for Forward {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let target = lock(&self.0).take();
        if let Some(w) = target {
            w.wake();
        }
    }
}

impl Default for Completion {
    fn default() -> Self {
        Completion::new()
    }
}

impl Completion {
    pub(crate) fn new() -> Completion {
        Completion { word: JoinWord::new() }
    }

    /// Whether the result is stored (acquire: it is visible to the caller).
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        self.word.is_complete()
    }

    /// By the completer, once, after storing the result: wakes the joiner if one waits.
    pub(crate) fn complete(&self) {
        if let Some(waiter) = self.word.complete() {
            waiter.wake();
        }
    }

    /// Waits until complete, from blocking-style code (parks a fiber, blocks a thread).
    #[track_caller]
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
            super::park_on(reason);
        }
    }

    /// Waits until complete or `deadline`, from blocking-style code; true if complete.
    #[track_caller]
    pub(crate) fn wait_until(&self, joiner: &Joiner, deadline: Instant, reason: &'static str) -> bool {
        if self.is_complete() {
            return true;
        }
        let Some(forward) = self.forward(joiner) else { return true };
        *lock(&forward.0) = Some(Waiter::current());
        while !self.is_complete() && Instant::now() < deadline {
            super::park_until(Some(deadline), reason);
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
