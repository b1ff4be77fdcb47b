//! [`ShutdownWatch`]: how a waiting accept loop or connection learns that the server's
//! graceful shutdown has begun.
//!
//! Invariant: **no lost wake-up.** `poll` registers the caller's waker in the server's list
//! (`ShutdownState`) and then looks at the flag again, and the trigger sets the flag before it
//! takes the list: either the trigger sees the waker, or the second look sees the flag.

use std::task::{Context, Waker};

use crate::server::Shared;

/// Keeps the waker of the task that polls it in the server's shutdown list while it waits,
/// so that `Server::shutdown` can wake it.
pub(crate) struct ShutdownWatch<'a, H> {
    shared: &'a Shared<H>,
    key: Option<u64>,
    waker: Option<Waker>,
}

impl<'a, H> ShutdownWatch<'a, H> {
    pub(crate) fn new(shared: &'a Shared<H>) -> Self {
        ShutdownWatch { shared, key: None, waker: None }
    }

    /// The server's state this watch looks at.
    pub(crate) fn shared(&self) -> &'a Shared<H> {
        self.shared
    }

    /// Whether shutdown has begun; otherwise makes sure `cx`'s waker is registered.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        if self.shared.shutdown.is_triggered() {
            return true;
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
            self.key = Some(self.shared.shutdown.register(self.key, cx.waker().clone()));
            // Triggered between the check and the registration: the trigger may have missed us.
            return self.shared.shutdown.is_triggered();
        }
        false
    }
}

impl<H> Drop for ShutdownWatch<'_, H> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shared.shutdown.deregister(key);
        }
    }
}
