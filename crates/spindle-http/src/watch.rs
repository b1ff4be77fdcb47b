//! [`ShutdownWatch`]: how a waiting accept loop or connection learns that the server's
//! graceful shutdown has begun.
//!
//! Invariant: **no lost wake-up.** `poll` registers the caller's waker in the server's list
//! (`ShutdownState`) and then looks at the flag again, and the trigger sets the flag before it
//! takes the list: either the trigger sees the waker, or the second look sees the flag.

use std::sync::Arc;
use std::task::{Context, Waker};

use crate::server::{Shared, ShutdownState};

/// How a watch reaches the server's state: borrowed (an accept loop, the opening of a
/// connection), or owned (the serving phase of a connection, whose future holds the
/// server's `Arc` in its watch rather than a second copy of it).
pub(crate) trait Watched {
    fn shutdown_state(&self) -> &ShutdownState;
}

impl<H> Watched for &Shared<H> {
    fn shutdown_state(&self) -> &ShutdownState {
        &self.shutdown
    }
}

impl<H> Watched for Arc<Shared<H>> {
    fn shutdown_state(&self) -> &ShutdownState {
        &self.shutdown
    }
}

/// Keeps the waker of the task that polls it in the server's shutdown list while it waits,
/// so that `Server::shutdown` can wake it.
pub(crate) struct ShutdownWatch<S: Watched> {
    shared: S,
    key: Option<u32>,
    waker: Option<Waker>,
}

impl<S: Watched> ShutdownWatch<S> {
    pub(crate) fn new(shared: S) -> Self {
        ShutdownWatch { shared, key: None, waker: None }
    }

    /// The server's state this watch looks at.
    pub(crate) fn shared(&self) -> &S {
        &self.shared
    }

    /// Whether shutdown has begun; otherwise makes sure `cx`'s waker is registered.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        if self.shared.shutdown_state().is_triggered() {
            return true;
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
            self.key = Some(self.shared.shutdown_state().register(self.key, cx.waker().clone()));
            // Triggered between the check and the registration: the trigger may have missed us.
            return self.shared.shutdown_state().is_triggered();
        }
        false
    }
}

impl<S: Watched> Drop for ShutdownWatch<S> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shared.shutdown_state().deregister(key);
        }
    }
}
