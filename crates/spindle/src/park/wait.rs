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
//! - **Slots outlive one borrow.** [`WaitSlot`] is the node of a wait whose owner keeps it
//!   across calls (a `Stream`'s polls, a set's `&mut self` waits) and passes the lock to each;
//!   the rules above hold for it, its owner calling `leave` where a `Wait` is dropped. A slot
//!   polled as a future and then used to block (or the reverse) replaces its node first.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use super::timed::park_until;
use super::wait_list::{wake, WaitList, WaitNode};
use crate::lock::lock as lock_state;
use crate::sched::api;
pub(crate) use crate::sched::api::deadline_in;

/// The waiters to wake after the lock is released.
pub(crate) type Wakes = Vec<Arc<WaitNode>>;

/// One caller's wait on one list of a primitive whose state `S` sits in `lock`.
pub(crate) struct Wait<'a, S> {
    lock: &'a Mutex<S>,
    list: fn(&mut S) -> &mut WaitList,
    /// Under the lock, for a caller that leaves after a waker dequeued it without taking what
    /// it was woken for: the waiters to pass the wake-up on to.
    pass_on: fn(&mut S) -> Wakes,
    slot: WaitSlot,
}

impl<'a, S> Wait<'a, S> {
    pub(crate) fn new(
        lock: &'a Mutex<S>,
        list: fn(&mut S) -> &mut WaitList,
        pass_on: fn(&mut S) -> Wakes,
    ) -> Self {
        Wait { lock, list, pass_on, slot: WaitSlot::default() }
    }

    /// The lock this wait is on.
    pub(crate) fn lock(&self) -> &'a Mutex<S> {
        self.lock
    }

    /// Whether this wait has not queued yet (so a fast path may bypass it).
    pub(crate) fn is_fresh(&self) -> bool {
        self.slot.node.is_none()
    }

    /// Waits until `try_take` yields, parking the fiber (or thread) between rounds; `None` once
    /// `deadline` has passed.
    #[track_caller]
    pub(crate) fn block<R>(
        &mut self,
        deadline: Option<Instant>,
        reason: &'static str,
        try_take: impl FnMut(&mut S, bool) -> Option<R>,
    ) -> Option<R> {
        self.slot.block(self.lock, self.list, deadline, reason, try_take)
    }

    /// One round as a future: `Ready` when `try_take` yields, else queues the task's waker.
    pub(crate) fn poll<R>(
        &mut self,
        cx: &mut Context<'_>,
        try_take: impl FnMut(&mut S, bool) -> Option<R>,
    ) -> Poll<R> {
        self.slot.poll(self.lock, self.list, cx, try_take)
    }
}

impl<S> Drop for Wait<'_, S> {
    fn drop(&mut self) {
        self.slot.leave(self.lock, self.list, self.pass_on);
    }
}

/// The node of a [`Wait`] whose owner keeps it across calls that each borrow the lock anew:
/// a `Stream` implementation (a receiver polled again and again), a set whose `&mut self`
/// methods wait. The owner passes the same lock and list to every call, and calls
/// [`leave`](Self::leave) when it goes away (a `Wait` does that in its `Drop`).
#[derive(Debug, Default)]
pub(crate) struct WaitSlot {
    node: Option<Arc<WaitNode>>,
}

impl WaitSlot {
    /// Whether a waker dequeued our node since it was queued.
    fn woken(&self) -> bool {
        self.node.as_ref().is_some_and(|n| !n.is_queued())
    }

    /// Done: dequeue the node if a spurious return left it queued.
    fn finish<S>(&mut self, state: &mut S, list: fn(&mut S) -> &mut WaitList) {
        if let Some(node) = self.node.take() {
            list(state).remove(&node);
        }
    }

    /// [`Wait::block`] with the lock and list given. A node left from an earlier call (a
    /// poll, or a wait that unwound) is replaced before this call queues: a node wakes the
    /// caller that made it.
    #[track_caller]
    pub(crate) fn block<S, R>(
        &mut self,
        lock: &Mutex<S>,
        list: fn(&mut S) -> &mut WaitList,
        deadline: Option<Instant>,
        reason: &'static str,
        mut try_take: impl FnMut(&mut S, bool) -> Option<R>,
    ) -> Option<R> {
        // A blocking-style wait from an async task panics at once, whether or not it would
        // have to park (module `sched::caller`).
        let _ = api::blocking_caller(reason);
        let mut mine = false;
        loop {
            let mut state = lock_state(lock);
            let woken = self.woken();
            if let Some(r) = try_take(&mut state, woken) {
                self.finish(&mut *state, list);
                return Some(r);
            }
            if deadline.is_some_and(|d| api::now() >= d) {
                return None; // the owner leaves the list
            }
            if !mine {
                if let Some(old) = self.node.take() {
                    list(&mut state).remove(&old);
                }
                self.node = Some(WaitNode::new());
                mine = true;
            }
            list(&mut state).push(self.node.as_ref().expect("just set"));
            drop(state);
            park_until(deadline, reason);
        }
    }

    /// [`Wait::poll`] with the lock and list given.
    pub(crate) fn poll<S, R>(
        &mut self,
        lock: &Mutex<S>,
        list: fn(&mut S) -> &mut WaitList,
        cx: &mut Context<'_>,
        mut try_take: impl FnMut(&mut S, bool) -> Option<R>,
    ) -> Poll<R> {
        let mut state = lock_state(lock);
        let woken = self.woken();
        if let Some(r) = try_take(&mut state, woken) {
            self.finish(&mut *state, list);
            return Poll::Ready(r);
        }
        let list = list(&mut state);
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

    /// The owner goes away (or gives up this wait): dequeues the node, or, if a waker had
    /// dequeued it already, passes the wake-up on ("leaving").
    pub(crate) fn leave<S>(
        &mut self,
        lock: &Mutex<S>,
        list: fn(&mut S) -> &mut WaitList,
        pass_on: fn(&mut S) -> Wakes,
    ) {
        let Some(node) = self.node.take() else { return };
        let mut state = lock_state(lock);
        let wakes = if node.is_queued() {
            list(&mut state).remove(&node);
            Vec::new()
        } else {
            pass_on(&mut state)
        };
        drop(state);
        wakes.into_iter().for_each(wake);
    }
}

/// `pass_on` for lists whose wakers wake everyone (nothing to pass on).
pub(crate) fn pass_none<S>(_: &mut S) -> Wakes {
    Vec::new()
}

impl<S> std::fmt::Debug for Wait<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wait").field("queued", &self.slot.node.as_ref().map(|n| n.is_queued())).finish()
    }
}
