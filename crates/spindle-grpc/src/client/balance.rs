//! The load-balanced client: [`BalancedChannel`] spreads calls over several servers (the
//! replicas of one service), round robin among those it is connected to, as tonic's
//! `Channel::balance_list` and grpc-go's `round_robin` policy do.
//!
//! Each [`Endpoint`] becomes a *child*, a lazily-connecting [`RemoteChannel`] (module `remote_channel`)
//! with its own connection, manager fiber and reconnection backoff; the balancer adds no
//! connection logic of its own. It reads each child's state ([`Phase`]), takes stream permits
//! from the children, and waits on their permit waiters. Clones share the children and the
//! round-robin position.
//!
//! # Picking
//!
//! A pick starts at the shared position (which advances by one per pick, and past the children
//! a pick skipped) and takes the first child that is **connected and has a stream permit
//! free**. If no child is connected, it takes the first one that is connecting or idle with a
//! permit free, and the call waits there for that child's connection, as a `RemoteChannel`
//! call does (bounded by the connect timeout and the call's deadline). If every child is down
//! (its last attempt failed, a retry is scheduled), the call fails at once with `UNAVAILABLE`,
//! naming each child's error. If children are connected (or, none being, connecting or idle)
//! but all their permits are taken, `poll_ready` is pending.
//!
//! # Invariants
//!
//! - **Connected first, in turn.** A connected child with a permit free is always preferred to
//!   one that is connecting; a child that loses its connection is skipped until it has a new
//!   one. Among the connected, calls go round robin: sequential calls over `n` connected
//!   children give each one call in `n`.
//! - **One reservation, one child.** `poll_ready` reserves a permit on the child it picks and
//!   keeps it as a clone of that child holding the reservation; the next `call` goes to
//!   exactly that child, on that permit. Dropping the `BalancedChannel` drops the clone, which
//!   releases the permit. A clone of a `BalancedChannel` starts without a reservation. When
//!   every child is down, `poll_ready` is ready with no reservation and `call` picks again (it
//!   fails at once unless a child came back meanwhile); so does a `call` made without
//!   `poll_ready`, which then takes no permit wait (as `RemoteChannel`'s).
//! - **Never hang.** `poll_ready` is pending only while some child it could use is full. Before
//!   it looks a second time, it registers with every child's permit waiters, which each child
//!   wakes at every permit release and every change of its connection state (module `shared`):
//!   the release or the change that lets it through wakes it. A task is listed once however
//!   often it polls before it is woken. A call waits only as a
//!   `RemoteChannel` call does, on one child. When every child is down, calls fail at once.
//! - **Idle children reconnect.** A `RemoteChannel` replaces a lost connection only when a call
//!   wants one, and a balancer that sends calls only to connected children would never want
//!   it: each pick that passes an idle child asks its manager to reconnect (grpc-go's
//!   round_robin does the same), so a server that restarts is back in the rotation once an
//!   attempt succeeds. A child that is down retries on its own backoff. A server that hangs
//!   up after each handshake costs at most one connection per pick that passes its child, as
//!   it costs a `RemoteChannel` one per call: never a reconnection loop of its own.
//! - **Relays are bounded and keep nothing alive.** The balancer waits on a child through one
//!   relay waker per child ([`Relay`]), armed at most once in that child's waiter list, which
//!   wakes every waiting clone. A relay holds the balancer's waiter list only, never a child:
//!   no reference cycle, so dropping every clone (and call) drops the children and ends their
//!   connections.
//! - **Retries are the call's.** Each call goes through module `retry_call`: an attempt the
//!   server never processed is sent again on a new pick (transparent retries), and a call
//!   ending with a code the channel's retry policy names is sent again after its backoff
//!   (module `retry`); the request's messages are kept for that, up to the retry buffer.
//!
//! # Names that change
//!
//! [`BalancedChannel::from_target`] takes a gRPC target name (module `target`): a `dns:///`
//! name becomes one child per address it resolves to, and module `resolve` keeps that list in
//! step with the name (children added for new addresses, dropped for addresses gone: a dropped
//! child's calls in flight finish on their own clone, whose connection ends with the last).
//! The list is swapped whole under a short lock; a pick works on the list it read.
//!
//! - **Wait for the first answer, fail fast after.** Before the name's first resolution ends,
//!   `poll_ready` is pending (woken when it ends); once a resolution has ended with no address,
//!   calls fail at once with `UNAVAILABLE` naming the resolver's error, and ask for a new
//!   resolution (at most one per minimum interval).
//! - **A failure asks for a new answer.** A pick that finds a child down asks module `resolve`
//!   to resolve again (rate-limited there), as grpc-go re-resolves on a connection failure.
//!
//! # Policies
//!
//! `round_robin` (the default) as above. `pick_first` ([`LoadBalancing::PickFirst`]) sends
//! every call to the first child, in the resolver's order, that is connected (or connecting),
//! passing to the next only while those before it are down; only the first child connects at
//! the start, the next when a pick passes it.
//!
//! Not done: weighted or least-request policies.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use tonic::body::Body;
use tonic::Status;

use super::call::{RemoteBody, RemoteFuture};
pub(crate) use super::child::{Child, Waiters};
use super::endpoint::Endpoint;
use super::outlier::{Budget, Outlier};
use super::remote_channel::RemoteChannel;
use super::resolution::Resolution;
use super::retry::ServiceConfig;
use super::retry_call::{Attempts, BalancedFuture, RetryCall, DEFAULT_RETRY_BUFFER};
use super::state::Phase;
use crate::lock::lock;

/// A load-balanced transport of tonic-generated clients over several servers:
/// `FooClient::new(balanced)`. Each call goes to the next connected server in round-robin
/// order (module docs); a server that is down or restarting is skipped until it is back.
///
/// ```no_run
/// # fn main() -> std::io::Result<()> {
/// # spindle::Runtime::new()?.block_on(|| -> std::io::Result<()> {
/// use spindle_grpc::{BalancedChannel, Endpoint};
/// let replicas = ["http://10.0.0.1:50051", "http://10.0.0.2:50051", "http://10.0.0.3:50051"];
/// let endpoints = replicas.iter().map(Endpoint::new).collect::<std::io::Result<Vec<_>>>()?;
/// let channel = BalancedChannel::new(endpoints)?; // connecting to all three from now
/// assert_eq!(channel.len(), 3);
/// # Ok(()) })
/// # }
/// ```
pub struct BalancedChannel {
    shared: Arc<Balanced>,
    /// The child `poll_ready` picked, holding a permit for the next `call`.
    reserved: Option<(RemoteChannel, Option<Arc<Outlier>>)>,
}

/// How a [`BalancedChannel`] spreads its calls (module docs, "Policies"), as gRPC's
/// `round_robin` and `pick_first` load-balancing policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadBalancing {
    /// Each call to the next connected server in turn.
    #[default]
    RoundRobin,
    /// Every call to the first server (in the resolver's order) that is up.
    PickFirst,
}

/// The state the clones share.
pub(crate) struct Balanced {
    /// The children now: swapped whole when the name's addresses change.
    children: RwLock<Arc<[Child]>>,
    /// The round-robin position (taken modulo the number of children).
    next: AtomicUsize,
    /// `poll_ready`s waiting for a permit on any child, or for the name's first resolution.
    waiters: Arc<Waiters>,
    policy: LoadBalancing,
    /// The name behind the children, when they come from a resolver (module `resolve`).
    resolution: Option<Arc<Resolution>>,
    /// The retry policies (module `retry`); transparent retries happen without them.
    retry: Option<Arc<ServiceConfig>>,
    /// The bytes of request messages a call keeps for a retry.
    retry_buffer: usize,
    /// The outlier ejection budget, when the channel ejects outliers (module `outlier`).
    outliers: Option<Arc<Budget>>,
}

/// What a pick found.
enum Pick {
    /// The child to call: with a permit reserved, unless the pick ignored the limits; and its
    /// outlier record, when the channel ejects outliers.
    Child(RemoteChannel, Option<Arc<Outlier>>),
    /// Usable children exist, all their permits taken.
    Full,
    /// Every child is down: the status to fail with.
    Down(Status),
}

impl Balanced {
    pub(crate) fn new(
        children: Vec<Child>,
        waiters: Arc<Waiters>,
        policy: LoadBalancing,
        resolution: Option<Arc<Resolution>>,
    ) -> Balanced {
        // A random start, so that clients started together do not all begin with the same server.
        let next = AtomicUsize::new(fastrand::usize(..children.len().max(1)));
        Balanced {
            children: RwLock::new(children.into()),
            next,
            waiters,
            policy,
            resolution,
            retry: None,
            retry_buffer: DEFAULT_RETRY_BUFFER,
            outliers: None,
        }
    }

    /// With retry policies and a retry buffer (module `retry_call`).
    /// With outlier ejection: every child gets a record.
    pub(crate) fn with_outliers(mut self, budget: Option<Arc<Budget>>) -> Balanced {
        if let Some(budget) = &budget {
            let children = self.children.get_mut().unwrap_or_else(|e| e.into_inner());
            budget.set_children(children.len());
            let with: Vec<Child> = children
                .iter()
                .map(|c| {
                    Child::new(c.addr, c.channel.clone(), &self.waiters).with_outlier(Some(budget), None)
                })
                .collect();
            *children = with.into();
        }
        self.outliers = budget;
        self
    }

    /// The outlier ejection budget, for the children of a new list.
    pub(crate) fn outliers(&self) -> Option<&Arc<Budget>> {
        self.outliers.as_ref()
    }

    pub(crate) fn with_retries(mut self, retry: Option<Arc<ServiceConfig>>, buffer: usize) -> Balanced {
        self.retry = retry;
        self.retry_buffer = buffer;
        self
    }

    /// One attempt of a call, on a child picked now (ignoring the permits, as a call made
    /// without `poll_ready`).
    fn call_once(&self, request: http::Request<Body>) -> (RemoteFuture, Option<Arc<Outlier>>) {
        match self.pick(true) {
            Pick::Child(mut child, outlier) => (tower_service::Service::call(&mut child, request), outlier),
            Pick::Down(status) => (RemoteFuture::ready(status), None),
            Pick::Full => unreachable!("a pick that ignores the limits is never full"),
        }
    }

    /// The children now.
    pub(crate) fn children(&self) -> Arc<[Child]> {
        self.children.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Swaps the children for `children` and lets every waiting `poll_ready` pick again.
    pub(crate) fn set_children(&self, children: Vec<Child>) {
        if let Some(budget) = &self.outliers {
            budget.set_children(children.len());
        }
        *self.children.write().unwrap_or_else(|e| e.into_inner()) = children.into();
        self.waiters.wake_all();
    }

    pub(crate) fn waiters(&self) -> &Arc<Waiters> {
        &self.waiters
    }

    pub(crate) fn policy(&self) -> LoadBalancing {
        self.policy
    }

    /// Picks a child (module docs, "Picking"). With `ignore_limits`, a full child is taken
    /// too, without a permit (its call adds one, as a `RemoteChannel` call without
    /// `poll_ready` does), so the pick is never `Full` once the name has resolved.
    fn pick(&self, ignore_limits: bool) -> Pick {
        let children = self.children();
        let n = children.len();
        if n == 0 {
            return self.pick_none(ignore_limits);
        }
        let start = match self.policy {
            LoadBalancing::RoundRobin => self.next.fetch_add(1, Ordering::Relaxed),
            LoadBalancing::PickFirst => 0,
        };
        let first = self.policy == LoadBalancing::PickFirst;
        let take =
            |child: &RemoteChannel| child.try_reserved().or_else(|| ignore_limits.then(|| child.clone()));
        let mut usable = false;
        let mut down = false;
        // Ejected children are left out, unless all are (module `outlier`).
        let ejected = self.ejected(&children);
        let skip = |i: usize| ejected.as_ref().is_some_and(|e| e[i]);
        // Connected children first.
        for k in 0..n {
            let i = start.wrapping_add(k) % n;
            let child = &children[i].channel;
            if skip(i) {
                continue;
            }
            match child.phase() {
                Phase::Connected => {
                    usable = true;
                    if let Some(taken) = take(child) {
                        return self.picked(k, taken, &children[i]);
                    }
                    if first {
                        return Pick::Full;
                    }
                }
                // Module docs, "Idle children reconnect" (an error: the runtime has shut
                // down, and the child is down).
                Phase::Idle => {
                    drop(child.connect_now());
                    if first {
                        break;
                    }
                }
                Phase::Connecting if first => break,
                Phase::Connecting => {}
                Phase::Down(_) => down = true,
            }
        }
        if down {
            // Module docs, "A failure asks for a new answer".
            self.ask_resolution();
        }
        if usable {
            return Pick::Full;
        }
        // None connected: one that is connecting (or idle) and will be, if any.
        let mut errors = String::new();
        for k in 0..n {
            let i = start.wrapping_add(k) % n;
            let child = &children[i].channel;
            if skip(i) {
                continue;
            }
            match child.phase() {
                Phase::Down(error) => {
                    let _ = write!(errors, "{}{error}", if errors.is_empty() { "" } else { "; " });
                }
                Phase::Connected | Phase::Connecting | Phase::Idle => {
                    usable = true;
                    if let Some(taken) = take(child) {
                        return self.picked(k, taken, &children[i]);
                    }
                    if first {
                        break;
                    }
                }
            }
        }
        if usable {
            return Pick::Full;
        }
        Pick::Down(Status::unavailable(format!(
            "spindle-grpc: none of the {n} servers is connected: {errors}"
        )))
    }

    /// A pick with no child: the name has not resolved yet (wait for it), or resolved to no
    /// address (module docs, "Wait for the first answer, fail fast after").
    fn pick_none(&self, ignore_limits: bool) -> Pick {
        let Some(resolution) = &self.resolution else {
            return Pick::Down(Status::unavailable("spindle-grpc: the channel has no server"));
        };
        match resolution.outcome() {
            None if !ignore_limits => Pick::Full,
            None => Pick::Down(Status::unavailable(format!(
                "spindle-grpc: {} has not resolved yet (call `poll_ready` first to wait for it)",
                resolution.name()
            ))),
            Some(error) => {
                resolution.ask();
                Pick::Down(Status::unavailable(format!(
                    "spindle-grpc: {} has no address: {error}",
                    resolution.name()
                )))
            }
        }
    }

    fn ask_resolution(&self) {
        if let Some(resolution) = &self.resolution {
            resolution.ask();
        }
    }

    /// The pick took the child `skipped` places after its start: the next pick starts after it.
    fn picked(&self, skipped: usize, child: RemoteChannel, of: &Child) -> Pick {
        if skipped > 0 {
            self.next.fetch_add(skipped, Ordering::Relaxed);
        }
        Pick::Child(child, of.outlier.clone())
    }

    /// Which children are left out now, ejected (module `outlier`) or reporting they are not
    /// serving (module `health`): `None` when none is, or all are (then none is skipped), or
    /// the channel does neither.
    fn ejected(&self, children: &[Child]) -> Option<Vec<bool>> {
        if self.outliers.is_none() && !children.iter().any(|c| c.health.is_some()) {
            return None;
        }
        let now = Instant::now();
        let ejected: Vec<bool> = children
            .iter()
            .map(|c| c.not_serving() || c.outlier.as_ref().is_some_and(|o| o.is_ejected(now)))
            .collect();
        let count = ejected.iter().filter(|&&e| e).count();
        (count > 0 && count < children.len()).then_some(ejected)
    }

    /// Wakes `waker` at the next permit release or change of state of any child (module docs,
    /// "Never hang").
    fn register(&self, waker: &Waker) {
        {
            // Once per task: a task polled again before a wake-up (a spurious wake) must not
            // grow the list.
            let mut waiters = lock(&self.waiters.0);
            if !waiters.iter().any(|w| w.will_wake(waker)) {
                waiters.push(waker.clone());
            }
        }
        for child in self.children().iter() {
            if !child.relay.armed.swap(true, Ordering::AcqRel) {
                child.channel.wake_on_change(Waker::from(child.relay.clone()));
            }
        }
    }
}

impl Attempts for Balanced {
    fn attempt(&self, request: http::Request<Body>) -> (RemoteFuture, Option<Arc<Outlier>>) {
        self.call_once(request)
    }
}

impl Drop for Balanced {
    fn drop(&mut self) {
        // The resolver's fiber holds the balancer weakly: end it now rather than at its next
        // timer.
        if let Some(resolution) = &self.resolution {
            resolution.close();
        }
    }
}

impl BalancedChannel {
    /// A channel over `endpoints`, one child each ([`Endpoint::connect_lazy`]), every child
    /// starting to connect now, so that the first calls find connections. Returns at once; a
    /// server that cannot be reached is down (and retried on its endpoint's backoff), not an
    /// error. Errors: an empty list (`InvalidInput`), an endpoint [`Endpoint::connect_lazy`]
    /// refuses, or a runtime that has shut down.
    pub fn new(endpoints: impl IntoIterator<Item = Endpoint>) -> io::Result<BalancedChannel> {
        let channels: Vec<RemoteChannel> =
            endpoints.into_iter().map(|e| e.connect_lazy()).collect::<io::Result<_>>()?;
        if channels.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "spindle-grpc: a BalancedChannel needs at least one endpoint",
            ));
        }
        for child in channels.iter() {
            child.connect_now()?;
        }
        let waiters = Arc::new(Waiters::default());
        let children = channels.into_iter().map(|c| Child::new(None, c, &waiters)).collect();
        Ok(BalancedChannel::from_shared(Arc::new(Balanced::new(
            children,
            waiters,
            LoadBalancing::RoundRobin,
            None,
        ))))
    }

    pub(crate) fn from_shared(shared: Arc<Balanced>) -> BalancedChannel {
        BalancedChannel { shared, reserved: None }
    }

    /// The number of servers (children) now.
    pub fn len(&self) -> usize {
        self.shared.children().len()
    }

    /// Whether the channel has no server now: a name not resolved yet, or resolved to no
    /// address (module docs, "Names that change").
    pub fn is_empty(&self) -> bool {
        self.shared.children().is_empty()
    }

    /// The servers' addresses now, for a channel over a resolved name (in the resolver's
    /// order); empty for one built from endpoints.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.shared.children().iter().filter_map(|c| c.addr).collect()
    }

    /// How many servers the channel has a live connection to now.
    pub fn connected(&self) -> usize {
        self.shared.children().iter().filter(|c| c.channel.is_connected()).count()
    }

    /// Calls in flight on all the servers (permits held, by this channel's clones and calls).
    pub fn in_flight(&self) -> usize {
        self.shared.children().iter().map(|c| c.channel.in_flight()).sum()
    }
}

impl Clone for BalancedChannel {
    /// Shares the children and the round-robin position; the clone holds no reservation.
    fn clone(&self) -> BalancedChannel {
        BalancedChannel { shared: self.shared.clone(), reserved: None }
    }
}

impl std::fmt::Debug for BalancedChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalancedChannel")
            .field("children", &self.shared.children().iter().map(|c| &c.channel).collect::<Vec<_>>())
            .field("connected", &self.connected())
            .field("reserved", &self.reserved.as_ref().map(|(child, _)| child))
            .finish()
    }
}

impl tower_service::Service<http::Request<Body>> for BalancedChannel {
    type Response = http::Response<RemoteBody>;
    type Error = Infallible;
    type Future = BalancedFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if self.reserved.is_some() {
            return Poll::Ready(Ok(()));
        }
        for attempt in 0..2 {
            match self.shared.pick(false) {
                Pick::Child(child, outlier) => {
                    self.reserved = Some((child, outlier));
                    return Poll::Ready(Ok(()));
                }
                // `call` picks again, and fails unless a child came back (module docs).
                Pick::Down(_) => return Poll::Ready(Ok(())),
                // Registered, then a second look (module docs, "Never hang").
                Pick::Full if attempt == 0 => self.shared.register(cx.waker()),
                Pick::Full => {}
            }
        }
        Poll::Pending
    }

    fn call(&mut self, request: http::Request<Body>) -> BalancedFuture {
        let reserved = self.reserved.take();
        let shared = &self.shared;
        let first = move |request: http::Request<Body>| match reserved {
            Some((mut child, outlier)) => (tower_service::Service::call(&mut child, request), outlier),
            None => shared.call_once(request),
        };
        RetryCall::start(
            self.shared.clone(),
            self.shared.retry.clone(),
            self.shared.retry_buffer,
            request,
            first,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A task that polls `poll_ready` again before it is woken (a spurious wake, a `select!`)
    /// is registered once, not once per poll; one relay per child is armed, once.
    #[test]
    fn a_waiter_polled_again_is_registered_once() {
        let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
        let endpoints: Vec<Endpoint> = (0..3)
            .map(|i| Endpoint::new(format!("http://127.0.0.1:{}", 1 + i)).unwrap().handle(rt.handle()))
            .collect();
        // Not `BalancedChannel::new`: no child starts connecting, so nothing wakes meanwhile.
        let waiters = Arc::new(Waiters::default());
        let children =
            endpoints.iter().map(|e| Child::new(None, e.connect_lazy().unwrap(), &waiters)).collect();
        let balanced = Balanced::new(children, waiters, LoadBalancing::RoundRobin, None);
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        for _ in 0..100 {
            balanced.register(&waker);
        }
        assert_eq!(lock(&balanced.waiters.0).len(), 1, "the waiter list grew with each poll");
        assert!(balanced.children().iter().all(|c| c.relay.armed.load(Ordering::SeqCst)));
        // A permit released on each child (reserved, then dropped) wakes the task once,
        // through the first relay.
        for child in balanced.children().iter() {
            drop(child.channel.try_reserved().expect("a free permit"));
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(lock(&balanced.waiters.0).is_empty());
    }
}
