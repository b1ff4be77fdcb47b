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
//! - **No transparent retries.** A call that fails on its child (the connection lost while the
//!   call was in flight, or the connection the call waited for not made) fails as it does on a
//!   `RemoteChannel`, with no second attempt on another child: hyper's `SendRequest` does not
//!   give back a request it has taken, even one it never sent.
//!
//! Not done: resolving one name to several addresses (a DNS name with several A records is
//! one child, which connects to the first address that answers), weighted or least-request
//! policies, health checking beyond the connection's state.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use tonic::body::Body;
use tonic::Status;

use super::call::{RemoteBody, RemoteFuture};
use super::endpoint::Endpoint;
use super::remote_channel::RemoteChannel;
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
    reserved: Option<RemoteChannel>,
}

/// The state the clones share.
struct Balanced {
    children: Box<[RemoteChannel]>,
    /// The round-robin position (taken modulo the number of children).
    next: AtomicUsize,
    /// `poll_ready`s waiting for a permit on any child.
    waiters: Arc<Waiters>,
    /// One per child, the waker this balancer puts in that child's permit waiters.
    relays: Box<[Arc<Relay>]>,
}

#[derive(Default)]
struct Waiters(Mutex<Vec<Waker>>);

/// Wakes the balancer's waiters when a child releases a permit or changes state (module docs,
/// "Relays are bounded and keep nothing alive").
struct Relay {
    /// In the child's waiter list now.
    armed: AtomicBool,
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
        let waiters = std::mem::take(&mut *lock(&self.waiters.0));
        for w in waiters {
            w.wake();
        }
    }
}

/// What a pick found.
enum Pick {
    /// The child to call: with a permit reserved, unless the pick ignored the limits.
    Child(RemoteChannel),
    /// Usable children exist, all their permits taken.
    Full,
    /// Every child is down: the status to fail with.
    Down(Status),
}

impl Balanced {
    /// Picks a child (module docs, "Picking"). With `ignore_limits`, a full child is taken
    /// too, without a permit (its call adds one, as a `RemoteChannel` call without
    /// `poll_ready` does), so the pick is never `Full`.
    fn pick(&self, ignore_limits: bool) -> Pick {
        let n = self.children.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let take =
            |child: &RemoteChannel| child.try_reserved().or_else(|| ignore_limits.then(|| child.clone()));
        let mut usable = false;
        // Connected children first.
        for k in 0..n {
            let child = &self.children[start.wrapping_add(k) % n];
            match child.phase() {
                Phase::Connected => {
                    usable = true;
                    if let Some(taken) = take(child) {
                        return self.picked(k, taken);
                    }
                }
                // Module docs, "Idle children reconnect" (an error: the runtime has shut
                // down, and the child is down).
                Phase::Idle => drop(child.connect_now()),
                Phase::Connecting | Phase::Down(_) => {}
            }
        }
        if usable {
            return Pick::Full;
        }
        // None connected: one that is connecting (or idle) and will be, if any.
        let mut errors = String::new();
        for k in 0..n {
            let child = &self.children[start.wrapping_add(k) % n];
            match child.phase() {
                Phase::Down(error) => {
                    let _ = write!(errors, "{}{error}", if errors.is_empty() { "" } else { "; " });
                }
                Phase::Connected | Phase::Connecting | Phase::Idle => {
                    usable = true;
                    if let Some(taken) = take(child) {
                        return self.picked(k, taken);
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

    /// The pick took the child `skipped` places after its start: the next pick starts after it.
    fn picked(&self, skipped: usize, child: RemoteChannel) -> Pick {
        if skipped > 0 {
            self.next.fetch_add(skipped, Ordering::Relaxed);
        }
        Pick::Child(child)
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
        for (child, relay) in self.children.iter().zip(self.relays.iter()) {
            if !relay.armed.swap(true, Ordering::AcqRel) {
                child.wake_on_change(Waker::from(relay.clone()));
            }
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
        let children: Box<[RemoteChannel]> =
            endpoints.into_iter().map(|e| e.connect_lazy()).collect::<io::Result<_>>()?;
        if children.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "spindle-grpc: a BalancedChannel needs at least one endpoint",
            ));
        }
        for child in children.iter() {
            child.connect_now()?;
        }
        let waiters = Arc::new(Waiters::default());
        let relays = children
            .iter()
            .map(|_| Arc::new(Relay { armed: AtomicBool::new(false), waiters: waiters.clone() }))
            .collect();
        // A random start, so that clients started together do not all begin with the same server.
        let next = AtomicUsize::new(fastrand::usize(..children.len()));
        Ok(BalancedChannel { shared: Arc::new(Balanced { children, next, waiters, relays }), reserved: None })
    }

    /// The number of servers (children).
    pub fn len(&self) -> usize {
        self.shared.children.len()
    }

    /// Always `false`: a `BalancedChannel` has at least one server.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// How many servers the channel has a live connection to now.
    pub fn connected(&self) -> usize {
        self.shared.children.iter().filter(|c| c.is_connected()).count()
    }

    /// Calls in flight on all the servers (permits held, by this channel's clones and calls).
    pub fn in_flight(&self) -> usize {
        self.shared.children.iter().map(RemoteChannel::in_flight).sum()
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
            .field("children", &self.shared.children)
            .field("connected", &self.connected())
            .field("reserved", &self.reserved)
            .finish()
    }
}

impl tower_service::Service<http::Request<Body>> for BalancedChannel {
    type Response = http::Response<RemoteBody>;
    type Error = Infallible;
    type Future = RemoteFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        if self.reserved.is_some() {
            return Poll::Ready(Ok(()));
        }
        for attempt in 0..2 {
            match self.shared.pick(false) {
                Pick::Child(child) => {
                    self.reserved = Some(child);
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

    fn call(&mut self, request: http::Request<Body>) -> RemoteFuture {
        let child = match self.reserved.take() {
            Some(child) => child,
            None => match self.shared.pick(true) {
                Pick::Child(child) => child,
                Pick::Down(status) => return RemoteFuture::ready(status),
                Pick::Full => unreachable!("a pick that ignores the limits is never full"),
            },
        };
        let mut child = child;
        tower_service::Service::call(&mut child, request)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

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
        let children: Box<[RemoteChannel]> = endpoints.iter().map(|e| e.connect_lazy().unwrap()).collect();
        let waiters = Arc::new(Waiters::default());
        let relays = children
            .iter()
            .map(|_| Arc::new(Relay { armed: AtomicBool::new(false), waiters: waiters.clone() }))
            .collect();
        let balanced = Balanced { children, next: AtomicUsize::new(0), waiters, relays };
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        for _ in 0..100 {
            balanced.register(&waker);
        }
        assert_eq!(lock(&balanced.waiters.0).len(), 1, "the waiter list grew with each poll");
        assert!(balanced.relays.iter().all(|r| r.armed.load(Ordering::SeqCst)));
        // A permit released on each child (reserved, then dropped) wakes the task once,
        // through the first relay.
        for child in balanced.children.iter() {
            drop(child.try_reserved().expect("a free permit"));
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(lock(&balanced.waiters.0).is_empty());
    }
}
