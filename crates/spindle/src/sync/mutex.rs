//! A mutual-exclusion lock that parks fibers instead of blocking their worker.
//!
//! Barging is allowed (a running fiber may take the lock before a woken one): throughput over
//! strict fairness, as with `parking_lot`. There is no poisoning: a panic while holding the
//! guard unlocks the mutex.

// Invariants:
//
// State: `locked` (the lock word) and `waiters` (how many callers are in the slow path), both
// atomics, plus a wait list under a small internal lock.
//
// Protocol:
// - Fast path: `lock` is one compare-exchange of `locked` from false to true.
// - Slow path: under the internal lock, increment `waiters`, retry the compare-exchange; if
//   it fails, queue a node and park, then retry. On success, decrement `waiters`.
// - `unlock` stores `locked = false`, then, if `waiters > 0`, takes the internal lock and
//   wakes the first queued node.
//
// No lost wake-up: a waiter retries the compare-exchange under the internal lock after making
// itself visible in `waiters` (both SeqCst). If the unlocker read `waiters == 0`, its store of
// `false` precedes the waiter's increment in the single total order, so the retry succeeds;
// otherwise the unlocker takes the internal lock after the waiter queued its node (the waiter
// releases that lock only after queueing), and wakes it.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::lock::lock;
use crate::park::wait::{deadline_in, Wait};
use crate::park::{self, WaitList, WaitNode};

/// A fiber-aware mutex protecting a `T`.
pub struct Mutex<T: ?Sized> {
    locked: AtomicBool,
    waiters: AtomicUsize,
    queue: std::sync::Mutex<WaitList>,
    value: UnsafeCell<T>,
}

// SAFETY: the lock protocol gives one guard at a time exclusive access to `value`; T: Send
// because the value is used from whichever fiber or thread holds the guard.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above: shared access to the Mutex only hands out exclusive access under the lock.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// Exclusive access to the value of a [`Mutex`]; unlocks on drop.
pub struct MutexGuard<'a, T: ?Sized> {
    pub(super) mutex: &'a Mutex<T>,
}

// SAFETY: a guard only gives &T to other threads when shared, which needs T: Sync.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            locked: AtomicBool::new(false),
            waiters: AtomicUsize::new(0),
            queue: std::sync::Mutex::new(WaitList::new()),
            value: UnsafeCell::new(value),
        }
    }

    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, parking the fiber (or blocking the thread) while another holds it.
    #[track_caller]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        crate::sched::api::check_entry("mutex lock");
        if self.try_acquire() {
            return MutexGuard { mutex: self };
        }
        self.lock_slow();
        MutexGuard { mutex: self }
    }

    /// Locks the mutex, waiting at most `timeout`; `None` if it stayed locked that long.
    ///
    /// ```
    /// use std::time::Duration;
    /// let m = spindle::sync::Mutex::new(1);
    /// let held = m.lock();
    /// assert!(m.lock_timeout(Duration::from_millis(5)).is_none());
    /// drop(held);
    /// assert_eq!(*m.lock_timeout(Duration::from_millis(5)).unwrap(), 1);
    /// ```
    pub fn lock_timeout(&self, timeout: std::time::Duration) -> Option<MutexGuard<'_, T>> {
        self.lock_until(deadline_in(timeout))
    }

    /// Locks the mutex, waiting until `deadline` at the latest.
    pub fn lock_deadline(&self, deadline: std::time::Instant) -> Option<MutexGuard<'_, T>> {
        self.lock_until(Some(deadline))
    }

    #[track_caller]
    fn lock_until(&self, deadline: Option<std::time::Instant>) -> Option<MutexGuard<'_, T>> {
        crate::sched::api::check_entry("mutex lock (with timeout)");
        if self.try_acquire() {
            return Some(MutexGuard { mutex: self });
        }
        let mut counted = Counted { waiters: &self.waiters, counted: false };
        let mut wait = Wait::new(&self.queue, |q| q, |q| q.pop().into_iter().collect());
        let got = wait.block(deadline, "mutex lock (with timeout)", |_, _| {
            counted.count(); // before the retry, under the internal lock (module doc)
            self.try_acquire().then_some(())
        });
        drop(wait);
        drop(counted);
        got.map(|()| MutexGuard { mutex: self })
    }

    /// Locks the mutex from async code without blocking the worker: a future of the guard.
    /// The guard may be held across `.await`s (it is `Send` when `T` is).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let rt = spindle::Runtime::new().unwrap();
    /// let m = Arc::new(spindle::sync::Mutex::new(0));
    /// let handles: Vec<_> = (0..4)
    ///     .map(|_| {
    ///         let m = m.clone();
    ///         rt.spawn_async(async move {
    ///             let mut g = m.lock_async().await;
    ///             spindle::task::yield_now().await;
    ///             *g += 1;
    ///         })
    ///     })
    ///     .collect();
    /// handles.into_iter().for_each(|h| h.join().unwrap());
    /// assert_eq!(*m.lock(), 4);
    /// ```
    pub fn lock_async(&self) -> LockFuture<'_, T> {
        LockFuture {
            mutex: self,
            wait: Wait::new(&self.queue, |q| q, |q| q.pop().into_iter().collect()),
            counted: Counted { waiters: &self.waiters, counted: false },
        }
    }

    /// Locks the mutex if it is free.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.try_acquire().then_some(MutexGuard { mutex: self })
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    fn try_acquire(&self) -> bool {
        self.locked.compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed).is_ok()
    }

    #[cold]
    fn lock_slow(&self) {
        let node = WaitNode::new();
        let mut queue = lock(&self.queue);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        loop {
            if self.try_acquire() {
                queue.remove(&node);
                self.waiters.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            queue.push(&node);
            drop(queue);
            let unwinding = Unwinding { mutex: self, node: &node };
            park::park_on("mutex lock");
            std::mem::forget(unwinding);
            queue = lock(&self.queue);
        }
    }

    pub(super) fn unlock(&self) {
        self.locked.store(false, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let next = lock(&self.queue).pop();
            if let Some(next) = next {
                park::wake(next);
            }
        }
    }
}

/// A waiter's place in the `waiters` count: counted from its first slow-path round to its
/// way out.
struct Counted<'a> {
    waiters: &'a AtomicUsize,
    counted: bool,
}

impl Counted<'_> {
    fn count(&mut self) {
        if !self.counted {
            self.counted = true;
            self.waiters.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The future of [`Mutex::lock_async`]. Dropping it before it completes leaves the queue
/// (passing on a wake-up it received).
#[must_use = "futures do nothing unless polled"]
pub struct LockFuture<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    wait: Wait<'a, WaitList>,
    counted: Counted<'a>,
}

impl<'a, T: ?Sized> Future for LockFuture<'a, T> {
    type Output = MutexGuard<'a, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MutexGuard<'a, T>> {
        let this = self.get_mut();
        let mutex = this.mutex;
        // The fast path only before queueing: a queued node must leave the list on success.
        if this.wait.is_fresh() && mutex.try_acquire() {
            return Poll::Ready(MutexGuard { mutex });
        }
        let counted = &mut this.counted;
        let got = this.wait.poll(cx, |_, _| {
            counted.count();
            mutex.try_acquire().then_some(())
        });
        got.map(|()| {
            if std::mem::take(&mut this.counted.counted) {
                mutex.waiters.fetch_sub(1, Ordering::SeqCst);
            }
            MutexGuard { mutex }
        })
    }
}

impl<T: ?Sized> fmt::Debug for LockFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockFuture").finish_non_exhaustive()
    }
}

/// Leaves the slow path of a waiter whose fiber unwinds out of `park` (cancellation): dequeue
/// its node, or pass on a wake-up it received, and stop counting it.
struct Unwinding<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    node: &'a std::sync::Arc<WaitNode>,
}

impl<T: ?Sized> Drop for Unwinding<'_, T> {
    fn drop(&mut self) {
        let mut queue = lock(&self.mutex.queue);
        let forward = if self.node.is_queued() {
            queue.remove(self.node);
            None
        } else {
            queue.pop()
        };
        self.mutex.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(queue);
        if let Some(next) = forward {
            park::wake(next);
        }
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this caller holds the lock.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this caller holds the lock, and `&mut self`
        // makes this the only reference derived from it.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.unlock();
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(guard) => f.debug_struct("Mutex").field("value", &&*guard).finish(),
            None => f.debug_struct("Mutex").field("value", &"<locked>").finish(),
        }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
