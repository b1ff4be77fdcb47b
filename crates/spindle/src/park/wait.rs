//! One wait of one caller on one [`WaitList`]: blocking (with an optional deadline) or as a
//! future. Every primitive that waits with a timeout or from a task is written on [`Wait`].
//!
//! Invariants (all under the primitive's lock, which guards the state `S` and its lists):
//! - **Check, then queue.** Each round calls the primitive's `try_take(state, woken)` under
//!   the lock; only if it yields nothing is the caller's node queued (at most once: a queued
//!   node is not queued again), and the caller then parks (or returns `Pending`). A waker
//!   changes the state under the same lock and dequeues a node before waking it, so a wake-up
//!   between the check and the park is kept by the park permit (or the task's waker).
//! - **`woken`** tells `try_take` that a waker dequeued this caller's node since its last
//!   round (a hand-off, as `Notify` uses it).
//! - **Leaving.** On success the node is dequeued if still queued. On any other way out (a
//!   deadline, a dropped future, the unwinding of a cancelled fiber) `Drop` dequeues it; if a
//!   waker had dequeued it already, the wake-up it carried is passed on (`pass_on`), so no
//!   wake-up is lost on a waiter that went away: a losing `select!` branch or a timed-out
//!   `recv` never strands a value that another waiter is waiting for.
//! - **Futures.** A pending future's node carries its task's waker; a re-poll with a waker that
//!   would not wake the same task replaces the node (it goes to the back of the list).

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use crate::lock::lock;
use crate::park::{self, WaitList, WaitNode};

/// The waiters to wake after the lock is released.
pub(crate) type Wakes = Vec<Arc<WaitNode>>;

/// One caller's wait on one list of a primitive whose state `S` sits in `lock`.
pub(crate) struct Wait<'a, S> {
    lock: &'a Mutex<S>,
    list: fn(&mut S) -> &mut WaitList,
    /// Under the lock, for a caller that leaves after a waker dequeued it without taking what
    /// it was woken for: the waiters to pass the wake-up on to.
    pass_on: fn(&mut S) -> Wakes,
    node: Option<Arc<WaitNode>>,
}

impl<'a, S> Wait<'a, S> {
    pub(crate) fn new(
        lock: &'a Mutex<S>,
        list: fn(&mut S) -> &mut WaitList,
        pass_on: fn(&mut S) -> Wakes,
    ) -> Self {
        Wait { lock, list, pass_on, node: None }
    }

    /// Whether this wait has not queued yet (so a fast path may bypass it).
    pub(crate) fn is_fresh(&self) -> bool {
        self.node.is_none()
    }

    /// Whether a waker dequeued our node since it was queued.
    fn woken(&self) -> bool {
        self.node.as_ref().is_some_and(|n| !n.is_queued())
    }

    /// Done: dequeue the node if a spurious return left it queued.
    fn finish(&mut self, state: &mut S) {
        if let Some(node) = self.node.take() {
            (self.list)(state).remove(&node);
        }
    }

    /// Waits until `try_take` yields, parking the fiber (or thread) between rounds; `None` once
    /// `deadline` has passed.
    #[track_caller]
    pub(crate) fn block<R>(
        &mut self,
        deadline: Option<Instant>,
        reason: &'static str,
        mut try_take: impl FnMut(&mut S, bool) -> Option<R>,
    ) -> Option<R> {
        // A blocking-style wait from an async task panics at once, whether or not it would
        // have to park (module `sched::caller`).
        let _ = crate::sched::caller::blocking_caller(reason);
        loop {
            let mut state = lock(self.lock);
            let woken = self.woken();
            if let Some(r) = try_take(&mut state, woken) {
                self.finish(&mut state);
                return Some(r);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None; // Drop leaves the list
            }
            (self.list)(&mut state).push(self.node.get_or_insert_with(WaitNode::new));
            drop(state);
            park::park_until(deadline, reason);
        }
    }

    /// One round as a future: `Ready` when `try_take` yields, else queues the task's waker.
    pub(crate) fn poll<R>(
        &mut self,
        cx: &mut Context<'_>,
        mut try_take: impl FnMut(&mut S, bool) -> Option<R>,
    ) -> Poll<R> {
        let mut state = lock(self.lock);
        let woken = self.woken();
        if let Some(r) = try_take(&mut state, woken) {
            self.finish(&mut state);
            return Poll::Ready(r);
        }
        let list = (self.list)(&mut state);
        match &self.node {
            Some(node) if node.is_queued() && node.will_wake(cx.waker()) => {}
            _ => {
                if let Some(old) = self.node.take() {
                    list.remove(&old);
                }
                let node = WaitNode::for_waker(cx.waker());
                list.push(&node);
                self.node = Some(node);
            }
        }
        Poll::Pending
    }
}

impl<S> Drop for Wait<'_, S> {
    fn drop(&mut self) {
        let Some(node) = self.node.take() else { return };
        let mut state = lock(self.lock);
        let wakes = if node.is_queued() {
            (self.list)(&mut state).remove(&node);
            Vec::new()
        } else {
            (self.pass_on)(&mut state)
        };
        drop(state);
        wakes.into_iter().for_each(park::wake);
    }
}

/// `pass_on` for lists whose wakers wake everyone (nothing to pass on).
pub(crate) fn pass_none<S>(_: &mut S) -> Wakes {
    Vec::new()
}

impl<S> std::fmt::Debug for Wait<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wait").field("queued", &self.node.as_ref().map(|n| n.is_queued())).finish()
    }
}

/// The deadline `timeout` from now; `None` (wait forever) if it is too far to represent.
pub(crate) fn deadline_in(timeout: std::time::Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}
