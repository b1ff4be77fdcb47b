//! [`CancellationToken`]: a cancellation signal shared by its clones, in a tree: cancelling a
//! token cancels the tokens made from it with [`child_token`](CancellationToken::child_token),
//! and theirs, never its parent (tokio-util's `CancellationToken`).
//!
//! # Invariants
//!
//! - **One-way.** A node goes from live to cancelled once (`Inner::cancelled`, under its lock;
//!   `Node::flag` mirrors it for lock-free reads). The transition takes every waiter out of
//!   the node's list and wakes it; a wait that starts later finds the flag set under the lock
//!   and returns at once.
//! - **Children are found under the parent's lock.** A child is made under its parent's lock:
//!   it either sees the parent cancelled (and starts cancelled) or is in the parent's
//!   `children` before the parent's cancel takes that list out. So no child of a cancelled
//!   token stays live.
//! - **One lock at a time.** A cancel takes a node's children out under its lock and cancels
//!   them after releasing it, from a list rather than by recursion (a deep chain of children
//!   cannot overflow a fiber's stack); a node leaving its parent's list (its last handle
//!   gone) takes only the parent's lock. No code holds two nodes' locks, so none can deadlock.
//! - **Bounded.** A parent holds only weak references to its children, and a child removes
//!   its entry when its last handle goes (`Node::drop`): a long-lived parent does not grow
//!   with the children it outlives. A child holds its parent (for that removal).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::lock::lock;
use crate::park::wait::{deadline_in, pass_none, Wait, WaitSlot};
use crate::park::{self, WaitList};

/// A cancellation signal: clones share it, [`child_token`](Self::child_token) makes a token
/// that is cancelled with this one (but not the reverse). Fibers wait for it blocking-style
/// ([`wait`](Self::wait)), tasks await [`cancelled`](Self::cancelled).
///
/// ```
/// use spindle::sync::CancellationToken;
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let server = CancellationToken::new();
///     let request = server.child_token();
///     let worker = {
///         let request = request.clone();
///         spindle::spawn(move || {
///             request.wait(); // parks until the request, or the server, is cancelled
///             "stopped"
///         })
///     };
///     request.cancel(); // a child's cancel leaves its parent alone
///     assert!(!server.is_cancelled());
///     assert_eq!(worker.join().unwrap(), "stopped");
///     let other = server.child_token();
///     server.cancel(); // a parent's reaches every child
///     assert!(other.is_cancelled());
/// });
/// ```
#[derive(Clone)]
pub struct CancellationToken {
    node: Arc<Node>,
}

struct Node {
    /// `Inner::cancelled`, for reads without the lock ("one-way").
    flag: AtomicBool,
    inner: Mutex<Inner>,
    /// The parent, and this node's key in its `children`.
    parent: Option<(Arc<Node>, u64)>,
}

#[derive(Default)]
struct Inner {
    cancelled: bool,
    children: HashMap<u64, Weak<Node>>,
    next_key: u64,
    waiters: WaitList,
}

fn waiters(inner: &mut Inner) -> &mut WaitList {
    &mut inner.waiters
}

fn is_cancelled(inner: &mut Inner) -> Option<()> {
    inner.cancelled.then_some(())
}

impl Node {
    fn new(parent: Option<(Arc<Node>, u64)>, cancelled: bool) -> Arc<Node> {
        Arc::new(Node {
            flag: AtomicBool::new(cancelled),
            inner: Mutex::new(Inner { cancelled, ..Inner::default() }),
            parent,
        })
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // "Bounded": leave the parent's list (only the parent's lock is taken).
        if let Some((parent, key)) = &self.parent {
            lock(&parent.inner).children.remove(key);
        }
    }
}

impl Default for CancellationToken {
    fn default() -> Self {
        CancellationToken::new()
    }
}

impl CancellationToken {
    /// A live token without a parent.
    pub fn new() -> CancellationToken {
        CancellationToken { node: Node::new(None, false) }
    }

    /// A new token that is cancelled when this one is (at once if it already is); cancelling
    /// it does not cancel this one.
    pub fn child_token(&self) -> CancellationToken {
        let mut inner = lock(&self.node.inner);
        if inner.cancelled {
            return CancellationToken { node: Node::new(None, true) };
        }
        let key = inner.next_key;
        inner.next_key += 1;
        let child = Node::new(Some((self.node.clone(), key)), false);
        inner.children.insert(key, Arc::downgrade(&child));
        CancellationToken { node: child }
    }

    /// Cancels this token and every token made from it with
    /// [`child_token`](Self::child_token), waking all their waiters. Later calls do nothing.
    pub fn cancel(&self) {
        let mut todo = vec![self.node.clone()];
        while let Some(node) = todo.pop() {
            let (wake, children) = {
                let mut inner = lock(&node.inner);
                if inner.cancelled {
                    continue;
                }
                inner.cancelled = true;
                node.flag.store(true, Ordering::Release);
                let children: Vec<_> =
                    inner.children.drain().filter_map(|(_, child)| child.upgrade()).collect();
                (inner.waiters.take_all(), children)
            };
            wake.into_iter().for_each(park::wake);
            todo.extend(children);
        }
    }

    /// Whether the token is cancelled (itself, or through a parent).
    pub fn is_cancelled(&self) -> bool {
        self.node.flag.load(Ordering::Acquire)
    }

    /// Waits until the token is cancelled: parks a fiber, blocks a plain thread.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: await [`cancelled`](Self::cancelled) there.
    #[track_caller]
    pub fn wait(&self) {
        self.wait_until(None);
    }

    /// [`wait`](Self::wait), at most `timeout`; true if the token was cancelled by then.
    #[track_caller]
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.wait_until(deadline_in(timeout))
    }

    /// [`wait`](Self::wait), until `deadline` at the latest; true if the token was cancelled
    /// by then.
    #[track_caller]
    pub fn wait_deadline(&self, deadline: Instant) -> bool {
        self.wait_until(Some(deadline))
    }

    #[track_caller]
    fn wait_until(&self, deadline: Option<Instant>) -> bool {
        // A `Wait` leaves the list on every way out (a cancelled fiber unwinds from it).
        Wait::new(&self.node.inner, waiters, pass_none)
            .block(deadline, "cancellation token wait", |inner, _| is_cancelled(inner))
            .is_some()
    }

    /// A future that completes when the token is cancelled (it owns a clone of the token, so
    /// it may be spawned or kept past the token's scope).
    ///
    /// ```
    /// let rt = spindle::Runtime::new().unwrap();
    /// let token = spindle::sync::CancellationToken::new();
    /// let watcher = rt.spawn_async({
    ///     let token = token.clone();
    ///     async move {
    ///         token.cancelled().await;
    ///         "cancelled"
    ///     }
    /// });
    /// token.cancel();
    /// assert_eq!(watcher.join().unwrap(), "cancelled");
    /// ```
    pub fn cancelled(&self) -> WaitForCancellation {
        WaitForCancellation { token: self.clone(), slot: WaitSlot::default() }
    }

    /// A guard that cancels the token when dropped (unless [disarmed](DropGuard::disarm)):
    /// to stop what the token governs on every way out of a scope, panics included.
    pub fn drop_guard(self) -> DropGuard {
        DropGuard { token: Some(self) }
    }
}

impl fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken").field("cancelled", &self.is_cancelled()).finish()
    }
}

/// The future of [`CancellationToken::cancelled`].
#[must_use = "futures do nothing unless polled"]
pub struct WaitForCancellation {
    token: CancellationToken,
    slot: WaitSlot,
}

impl Future for WaitForCancellation {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.token.is_cancelled() {
            return Poll::Ready(());
        }
        this.slot.poll(&this.token.node.inner, waiters, cx, |inner, _| is_cancelled(inner))
    }
}

impl Drop for WaitForCancellation {
    fn drop(&mut self) {
        self.slot.leave(&self.token.node.inner, waiters, pass_none);
    }
}

impl fmt::Debug for WaitForCancellation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitForCancellation").field("token", &self.token).finish()
    }
}

/// Cancels its token when dropped; from [`CancellationToken::drop_guard`].
#[must_use = "the token is cancelled when the guard drops"]
#[derive(Debug)]
pub struct DropGuard {
    token: Option<CancellationToken>,
}

impl DropGuard {
    /// Gives the token back without cancelling it.
    pub fn disarm(mut self) -> CancellationToken {
        self.token.take().expect("a guard holds its token until dropped or disarmed")
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            token.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_children_leave_their_parent() {
        let parent = CancellationToken::new();
        for _ in 0..100 {
            let child = parent.child_token();
            let _grandchild = child.child_token();
        }
        assert!(lock(&parent.node.inner).children.is_empty());
        let kept = parent.child_token();
        assert_eq!(lock(&parent.node.inner).children.len(), 1);
        parent.cancel();
        assert!(kept.is_cancelled());
        assert!(lock(&parent.node.inner).children.is_empty());
    }

    #[test]
    fn a_deep_chain_cancels_without_recursion() {
        let root = CancellationToken::new();
        let mut chain = vec![root.clone()];
        for _ in 0..100_000 {
            let next = chain.last().expect("non-empty").child_token();
            chain.push(next);
        }
        root.cancel();
        assert!(chain.iter().all(CancellationToken::is_cancelled));
        // Dropping the chain from the root end: each node leaves a parent that is still
        // alive (the next one holds it), one level at a time.
        while chain.pop().is_some() {}
    }

    #[test]
    fn a_child_of_a_cancelled_token_starts_cancelled() {
        let parent = CancellationToken::new();
        parent.cancel();
        let child = parent.child_token();
        assert!(child.is_cancelled());
        assert!(child.wait_timeout(Duration::from_secs(60)), "returns at once");
    }
}
