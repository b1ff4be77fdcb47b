//! What the clones of a [`BalancedChannel`](super::BalancedChannel) over a name share with
//! the resolver's fiber (module `resolve`): the last lookup's outcome, and the way to ask for
//! a new lookup or to end the fiber. A leaf: the balancer reads it, the fiber writes it.
//!
//! Invariant (**one outcome at a time**): `outcome` is written by the resolver's fiber only,
//! under its lock, after each lookup; readers see the last one whole.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use spindle::sync::Notify;

use crate::lock::lock;

/// What the clones of a channel over a name share with its resolver's fiber.
pub(crate) struct Resolution {
    /// The name, as the calls' errors give it.
    name: String,
    /// The last lookup's outcome: `None` before the first ends; `Some(None)` after one that
    /// found addresses, `Some(Some(error))` after one that did not.
    outcome: Mutex<Option<Option<String>>>,
    /// Asks the fiber to resolve again (or, closed, to end).
    poke: Notify,
    closed: AtomicBool,
}

impl Resolution {
    pub(crate) fn new(name: String) -> Resolution {
        Resolution { name, outcome: Mutex::new(None), poke: Notify::new(), closed: AtomicBool::new(false) }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Waits until asked (or closed), or until `deadline`; whether it was asked.
    pub(crate) fn wait_deadline(&self, deadline: Instant) -> bool {
        self.poke.wait_deadline(deadline)
    }

    /// The last lookup's outcome: `None` when it found addresses, else its error.
    pub(crate) fn set_outcome(&self, error: Option<String>) {
        *lock(&self.outcome) = Some(error);
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `None` before the first lookup ends; then why the channel has no address (the last
    /// lookup's error; asked only while the channel has no child).
    pub(crate) fn outcome(&self) -> Option<String> {
        match &*lock(&self.outcome) {
            None => None,
            Some(None) => Some("no address".to_string()),
            Some(Some(error)) => Some(error.clone()),
        }
    }

    /// Asks for a new lookup (module docs, "Fresh, but not too often").
    pub(crate) fn ask(&self) {
        self.poke.notify_one();
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.poke.notify_one();
    }
}
