//! A condition variable for spindle's [`Mutex`]: wait for a condition with the lock released.
//!
//! Invariants (under the condvar's internal lock):
//! - A waiter queues its node *before* it unlocks the mutex, both under the internal lock, so a
//!   notify issued after the waiter's unlock finds it queued: no notification is lost between
//!   "unlock" and "park".
//! - `notify_one` dequeues (and wakes) the oldest waiter, `notify_all` every waiter; a waiter
//!   returns once dequeued (or at its deadline). One that leaves after a `notify_one` without
//!   returning normally (its fiber is cancelled) passes the notification to the next waiter.
//! - Lock order: the internal lock, then the mutex's own; the notify side never takes the
//!   mutex under the internal lock.

use std::fmt;
use std::sync::Mutex as StdMutex;
use std::time::{Duration, Instant};

use super::mutex::{Mutex, MutexGuard};
use crate::lock::lock;
use crate::park::wait::{deadline_in, Wait, Wakes};
use crate::park::{self, WaitList};

/// Waits for a condition protected by a [`Mutex`], as `std::sync::Condvar`.
///
/// ```
/// use std::sync::Arc;
/// use spindle::sync::{Condvar, Mutex};
///
/// let rt = spindle::Runtime::new().unwrap();
/// rt.block_on(|| {
///     let pair = Arc::new((Mutex::new(false), Condvar::new()));
///     let p = pair.clone();
///     spindle::spawn(move || {
///         *p.0.lock() = true;
///         p.1.notify_one();
///     });
///     let (lock, cvar) = &*pair;
///     let started = cvar.wait_while(lock.lock(), |started| !*started);
///     assert!(*started);
/// });
/// ```
#[derive(Default)]
pub struct Condvar {
    waiters: StdMutex<WaitList>,
}

/// Whether a timed wait returned because its deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

fn list(l: &mut WaitList) -> &mut WaitList {
    l
}

fn pass_on(l: &mut WaitList) -> Wakes {
    l.pop().into_iter().collect()
}

impl Condvar {
    pub fn new() -> Condvar {
        Condvar::default()
    }

    /// Unlocks the guard's mutex, waits for a notification, and locks it again. May return
    /// spuriously (as std's); prefer [`wait_while`](Self::wait_while).
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.wait_until(guard, None).0
    }

    /// Waits while `condition` holds, re-checking it under the lock after each wake-up.
    pub fn wait_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> MutexGuard<'a, T> {
        while condition(&mut guard) {
            guard = self.wait(guard);
        }
        guard
    }

    /// [`wait`](Self::wait) for at most `timeout`.
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        self.wait_until(guard, deadline_in(timeout))
    }

    /// [`wait`](Self::wait) until `deadline` at the latest.
    pub fn wait_deadline<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Instant,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        self.wait_until(guard, Some(deadline))
    }

    #[track_caller]
    fn wait_until<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<Instant>,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        crate::sched::api::check_entry("condvar");
        let mutex: &'a Mutex<T> = guard.mutex;
        let mut guard = Some(guard);
        let notified = Wait::new(&self.waiters, list, pass_on).block(deadline, "condvar", |_, woken| {
            if let Some(g) = guard.take() {
                // First round, under the internal lock: unlock the mutex; the node is queued
                // before the internal lock is released (module invariant).
                std::mem::forget(g);
                mutex.unlock();
                return None;
            }
            woken.then_some(())
        });
        (mutex.lock(), WaitTimeoutResult(notified.is_none()))
    }

    /// Wakes the oldest waiter.
    pub fn notify_one(&self) {
        let next = lock(&self.waiters).pop();
        if let Some(n) = next {
            park::wake(n);
        }
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        let all = lock(&self.waiters).take_all();
        all.into_iter().for_each(park::wake);
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar").finish_non_exhaustive()
    }
}
