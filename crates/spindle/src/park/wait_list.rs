//! [`WaitList`]: the waiters of one blocking primitive, in arrival order.
//!
//! # Invariants
//!
//! - **Used under its primitive's lock.** Every method runs under the lock of the primitive
//!   that owns the list; wake the nodes taken out of it after unlocking.
//! - **The queued flag tells the truth.** Each entry is an `Arc<WaitNode>` that the waiting
//!   side keeps too. Its `queued` flag, read and written only under that lock, says whether it
//!   is in the list: a waker clears it when it removes the node, so after a spurious return the
//!   waiting side knows not to queue twice, and when it leaves without having been woken it
//!   dequeues itself. So a node is in the list at most once, and never after its owner left.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Waker;

use crate::fiber::waiter::Waiter;

/// One waiter, queued or not.
#[derive(Debug)]
pub(crate) struct WaitNode {
    waiter: Waiter,
    /// In a list; only changed under that list's lock (Relaxed suffices: the lock orders it).
    queued: AtomicBool,
}

impl WaitNode {
    /// A node for the caller (the running fiber, else the current thread), not queued.
    pub(crate) fn new() -> Arc<WaitNode> {
        Arc::new(WaitNode { waiter: Waiter::current(), queued: AtomicBool::new(false) })
    }

    /// A node for the task behind `waker`, not queued.
    pub(crate) fn for_waker(waker: &Waker) -> Arc<WaitNode> {
        Arc::new(WaitNode { waiter: Waiter::Task(waker.clone()), queued: AtomicBool::new(false) })
    }

    /// Whether waking this node wakes the task behind `waker`.
    pub(crate) fn will_wake(&self, waker: &Waker) -> bool {
        self.waiter.will_wake(waker)
    }

    /// Whether the node is in its list (read under the list's lock).
    pub(crate) fn is_queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed)
    }
}

/// The waiters of one primitive, in arrival order. Used under the primitive's lock.
#[derive(Debug, Default)]
pub(crate) struct WaitList {
    nodes: VecDeque<Arc<WaitNode>>,
}

impl WaitList {
    pub(crate) const fn new() -> WaitList {
        WaitList { nodes: VecDeque::new() }
    }

    /// Queues `node` unless it is queued already.
    pub(crate) fn push(&mut self, node: &Arc<WaitNode>) {
        if !node.is_queued() {
            node.queued.store(true, Ordering::Relaxed);
            self.nodes.push_back(node.clone());
        }
    }

    /// Whether no waiter is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Removes the oldest waiter and returns it for waking (wake it after unlocking).
    pub(crate) fn pop(&mut self) -> Option<Arc<WaitNode>> {
        let node = self.nodes.pop_front()?;
        node.queued.store(false, Ordering::Relaxed);
        Some(node)
    }

    /// Removes every waiter, for waking them all.
    pub(crate) fn take_all(&mut self) -> Vec<Arc<WaitNode>> {
        self.nodes.drain(..).inspect(|n| n.queued.store(false, Ordering::Relaxed)).collect()
    }

    /// Removes `node` if it is still queued (its owner leaves without having been woken).
    pub(crate) fn remove(&mut self, node: &Arc<WaitNode>) {
        if node.is_queued() {
            node.queued.store(false, Ordering::Relaxed);
            self.nodes.retain(|n| !Arc::ptr_eq(n, node));
        }
    }
}

/// Wakes a node returned by [`WaitList::pop`] or [`WaitList::take_all`].
pub(crate) fn wake(node: Arc<WaitNode>) {
    node.waiter.wake_by_ref();
}
