//! Who waits: a fiber or a thread, behind one type.
//!
//! Every blocking primitive in `sync` is written once against [`Waiter`] and [`park`]: in a
//! fiber, waiting parks the fiber and lets its worker run others; on any other thread it
//! parks the thread. Both follow `std::thread::park`'s permit contract, so a wake that comes
//! before the park is not lost, and waits loop on their condition (spurious returns are
//! allowed).
//!
//! [`WaitList`] is the queue of waiters of one primitive, always used under that primitive's
//! lock. Each entry is an `Arc<WaitNode>` that the waiting side keeps too. Its `queued` flag,
//! read and written only under that lock, says whether it is in the list: a waker clears it
//! when it removes the node, so after a spurious return the waiting side knows not to queue
//! twice, and when it leaves without having been woken it dequeues itself.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Waker;
use std::thread::{self, Thread};
use std::time::Instant;

use crate::fiber::cell::FiberRef;
use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::worker;
use crate::sched::worker::TimerHandle;

/// A parked fiber or thread that can be woken, or the waker of a pending future.
#[derive(Debug)]
pub(crate) enum Waiter {
    Fiber(FiberRef),
    Thread(Thread),
    /// A future's waker (an async task, or a fiber in `block_on`/`select!`).
    Task(Waker),
}

impl Waiter {
    /// The caller: the running fiber if there is one, else the current thread.
    pub(crate) fn current() -> Waiter {
        match worker::current().and_then(|w| w.current_fiber()) {
            Some(fiber) => Waiter::Fiber(fiber),
            None => Waiter::Thread(thread::current()),
        }
    }

    pub(crate) fn wake(self) {
        self.wake_by_ref();
    }

    pub(crate) fn wake_by_ref(&self) {
        match self {
            Waiter::Fiber(fiber) => worker::unpark(fiber),
            Waiter::Thread(thread) => thread.unpark(),
            Waiter::Task(waker) => waker.wake_by_ref(),
        }
    }

    /// Whether waking `self` wakes the task behind `waker` (so a re-poll need not requeue).
    pub(crate) fn will_wake(&self, waker: &Waker) -> bool {
        matches!(self, Waiter::Task(w) if w.will_wake(waker))
    }
}

/// Parks the caller (fiber or thread) until woken; may return spuriously.
pub(crate) fn park() {
    park_on("park");
}

/// Like [`park`], recording what the fiber waits for (shown by `Runtime::dump_fibers`).
///
/// # Panics
///
/// In an async task on a spindle worker (see `sched::caller`), naming the async alternative.
#[track_caller]
pub(crate) fn park_on(reason: &'static str) {
    crate::fiber::check_no_park(reason);
    match blocking_caller(reason) {
        Caller::Fiber(worker) => worker.park_fiber(reason),
        Caller::Thread => thread::park(),
    }
}

/// Like [`park_on`], but returns by `deadline` at the latest (`None`: no deadline). A fiber
/// arms a timer on its worker's wheel for the park (cancelled on every way out); a thread uses
/// `std::thread::park_timeout`. May return spuriously: callers re-check their condition and
/// the clock.
#[track_caller]
pub(crate) fn park_until(deadline: Option<Instant>, reason: &'static str) {
    let Some(deadline) = deadline else { return park_on(reason) };
    crate::fiber::check_no_park(reason);
    let caller = blocking_caller(reason);
    let now = Instant::now();
    if now >= deadline {
        return;
    }
    match caller {
        Caller::Fiber(w) => {
            struct CancelTimer(TimerHandle);
            impl Drop for CancelTimer {
                fn drop(&mut self) {
                    if let Some(w) = worker::current() {
                        w.cancel_timer(self.0);
                    }
                }
            }
            let _timer = CancelTimer(w.add_timer(deadline, w.current_waker()));
            w.park_fiber(reason);
        }
        Caller::Thread => thread::park_timeout(deadline - now),
    }
}

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
