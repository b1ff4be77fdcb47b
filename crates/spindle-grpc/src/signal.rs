//! A one-shot broadcast: the server's shutdown signal, which its accept task and every
//! connection task wait on.
//!
//! # Invariants
//!
//! - **Fired once, seen by all.** [`Signal::fire`] sets the flag before it takes the wakers,
//!   and [`Waiter::poll`] registers its waker before it reads the flag again, so a waiter
//!   registered at any moment either sees the flag or is woken.
//! - **No waker left behind.** A [`Waiter`] removes its registration when dropped, so the
//!   list holds one waker per live waiter at most.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// The shutdown signal, with the deadline of the drain it starts.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    fired: AtomicBool,
    next_key: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    wakers: HashMap<u64, Waker>,
    deadline: Option<Instant>,
}

impl Signal {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fires the signal (the first call's deadline counts) and wakes every waiter.
    pub(crate) fn fire(&self, deadline: Instant) {
        let wakers = {
            let mut state = self.lock();
            if state.deadline.is_none() {
                state.deadline = Some(deadline);
            }
            self.fired.store(true, Ordering::Release);
            std::mem::take(&mut state.wakers)
        };
        for (_, w) in wakers {
            w.wake();
        }
    }

    pub(crate) fn is_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// The drain deadline, once fired.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.lock().deadline
    }

    pub(crate) fn waiter(self: &Arc<Self>) -> Waiter {
        Waiter { signal: self.clone(), key: self.next_key.fetch_add(1, Ordering::Relaxed), registered: None }
    }
}

/// One task's wait on a [`Signal`].
#[derive(Debug)]
pub(crate) struct Waiter {
    signal: Arc<Signal>,
    key: u64,
    registered: Option<Waker>,
}

impl Waiter {
    /// Ready once the signal has fired; otherwise the task's waker is registered.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.is_fired() {
            return Poll::Ready(());
        }
        if !self.registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            let waker = cx.waker().clone();
            let mut state = self.signal.lock();
            if self.signal.is_fired() {
                return Poll::Ready(());
            }
            state.wakers.insert(self.key, waker.clone());
            self.registered = Some(waker);
        }
        if self.signal.is_fired() {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.registered.is_some() {
            self.signal.lock().wakers.remove(&self.key);
        }
    }
}
