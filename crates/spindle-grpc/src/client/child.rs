//! The children of a [`BalancedChannel`](super::BalancedChannel): one server each (its
//! channel, the relay waker the balancer arms in its permit waiters, its outlier record), and
//! the balancer's list of waiting `poll_ready`s that the relays wake. A leaf of the balancer
//! and the resolver.
//!
//! Invariant (**relays are bounded and keep nothing alive**, module `balance`): a relay is in
//! its child's waiter list at most once (`armed`), and holds the waiter list only, never a
//! child.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use super::health::{Health, HealthWatch};
use super::outlier::{Budget, Outlier};
use super::remote_channel::RemoteChannel;
use crate::lock::lock;

/// One server.
pub(crate) struct Child {
    /// The address it was resolved to (none for a child made from an `Endpoint`).
    pub(crate) addr: Option<SocketAddr>,
    pub(crate) channel: RemoteChannel,
    /// The waker this balancer puts in the child's permit waiters.
    pub(crate) relay: Arc<Relay>,
    /// Its outlier record, when the channel ejects outliers.
    pub(crate) outlier: Option<Arc<Outlier>>,
    /// Its health watch, when the channel checks health (module `health`).
    pub(crate) health: Option<Arc<HealthWatch>>,
}

impl Child {
    pub(crate) fn new(addr: Option<SocketAddr>, channel: RemoteChannel, waiters: &Arc<Waiters>) -> Child {
        let relay = Arc::new(Relay { armed: AtomicBool::new(false), waiters: waiters.clone() });
        Child { addr, channel, relay, outlier: None, health: None }
    }

    /// The same server with a health watch of `service` when the channel checks health:
    /// `existing`'s when the server had one.
    pub(crate) fn with_health(
        mut self,
        service: Option<&str>,
        handle: Option<&spindle::Handle>,
        existing: Option<&Child>,
    ) -> Child {
        self.health = existing.and_then(|c| c.health.clone()).or_else(|| {
            let (service, handle) = (service?, handle?);
            Some(Arc::new(HealthWatch::start(self.channel.clone(), service.to_string(), handle)))
        });
        self
    }

    /// Whether the server reported it is not serving (module `health`).
    pub(crate) fn not_serving(&self) -> bool {
        self.health.as_ref().is_some_and(|h| h.state.get() == Health::NotServing)
    }

    /// The same server with an outlier record when the channel ejects outliers (`budget`):
    /// `existing`'s when the server had one.
    pub(crate) fn with_outlier(mut self, budget: Option<&Arc<Budget>>, existing: Option<&Child>) -> Child {
        self.outlier = existing.and_then(|c| c.outlier.clone()).or_else(|| budget.map(Outlier::new));
        self
    }
}

#[derive(Default)]
pub(crate) struct Waiters(pub(crate) Mutex<Vec<Waker>>);

impl Waiters {
    /// Wakes every waiting `poll_ready`: each picks again.
    pub(crate) fn wake_all(&self) {
        let waiters = std::mem::take(&mut *lock(&self.0));
        for w in waiters {
            w.wake();
        }
    }
}

/// Wakes the balancer's waiters when a child releases a permit or changes state (module docs,
/// "Relays are bounded and keep nothing alive").
pub(crate) struct Relay {
    /// In the child's waiter list now.
    pub(crate) armed: AtomicBool,
    waiters: Arc<Waiters>,
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Disarmed before the waiters are taken: a waiter registered after the take finds it
        // disarmed and arms it again.
        self.armed.store(false, Ordering::Release);
        self.waiters.wake_all();
    }
}
