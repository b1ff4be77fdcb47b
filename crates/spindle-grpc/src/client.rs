//! The network client: [`Endpoint`] and [`RemoteChannel`], the transport of tonic-generated
//! clients over HTTP/2 on spindle sockets (hyper's HTTP/2 client driven by spindle).
//!
//! One connection per channel (its clones share it), calls multiplexed on it. A *manager*
//! fiber on the channel's runtime connects, runs the connection while it lives, and
//! reconnects with exponential backoff when it is lost (module `connector`). Calls read the
//! connection's state:
//!
//! - **connected**: the call is sent on the connection (hyper's `SendRequest`, usable from
//!   any thread: the connection's tasks run on spindle, the caller only exchanges messages
//!   with them);
//! - **connecting**: the call waits for the attempt's outcome (bounded by the connect
//!   timeout and the call's deadline);
//! - **down** (the last attempt failed, a retry is scheduled): the call fails at once with
//!   `UNAVAILABLE`, naming the error.
//!
//! # Invariants
//!
//! - **Never hang.** A call waiting for a connection is woken by every state change; the
//!   manager leaves the state `Down` whenever it stops (its guard), so no call waits on a
//!   manager that is gone. A waiter that finds no connection asks the idle manager for one at
//!   each look, the one after registering its waker included (a connection made and lost
//!   between the two would otherwise leave both waiting for the other). Every call's wait is
//!   bounded by its deadline too.
//! - **A call waits for one connection.** A waiter remembers how many connections had been
//!   published when it began to wait (when the call started, or `connect` was called: before
//!   the manager may run; [`Shared::poll_sender`]). If the next one is lost before it could be
//!   used (a server that hangs up right after its SETTINGS), the waiter fails with
//!   `UNAVAILABLE` (`connect`: an error) instead of asking for another. With the wishes
//!   granted by each attempt (`Connecting` clears them), a lost connection is replaced only
//!   for a waiter, one new connection per waiter at most (a failed attempt is retried after
//!   the backoff, module `connector`).
//! - **Stream permits.** A call holds one permit of [`Shared::in_flight`] from `poll_ready`
//!   (or `call`) until its response body ends or is dropped; `poll_ready` is pending while
//!   the calls in flight reach the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (or the
//!   endpoint's limit), and every permit's release wakes the waiters.
//! - **A dropped call is cancelled.** Dropping the response future or body before the end
//!   fails the request body hyper is still sending ([`OutBody`]), so the stream is reset
//!   (never left half-open), and drops hyper's response, which resets it from this side.
//! - **Deadlines are local too.** A call with a `grpc-timeout` (tonic's `Request::set_timeout`,
//!   or the endpoint's default) ends with `DEADLINE_EXCEEDED` when it passes, whatever the
//!   server does: a spindle timer when the call is polled on a worker, otherwise a timer task
//!   on the channel's runtime ([`Deadline`]).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tonic::body::Body;
use tonic::Status;

use crate::balance::Phase;
use crate::connector::{self, ConnState};
use crate::endpoint::Endpoint;
use crate::remote_call::{
    encode_timeout, CallParts, CancelFlag, CancelOnDrop, Deadline, OutBody, Permit, RemoteBody, RemoteFuture,
    Stage,
};

impl Endpoint {
    /// Connects, waiting for the first attempt: `Err` if it fails (the channel is not kept).
    /// Run it with `.await` in a task, or `spindle::task::block_on` in a fiber or thread.
    pub async fn connect(&self) -> io::Result<RemoteChannel> {
        let channel = self.build()?;
        // Waiting from now on (module docs, "A call waits for one connection").
        let since = channel.shared.published.load(Ordering::Relaxed);
        channel.shared.start()?;
        std::future::poll_fn(|cx| channel.shared.poll_connected(cx, since)).await?;
        Ok(channel)
    }

    /// A channel that connects at its first call (and reconnects as [`Endpoint::connect`]'s).
    pub fn connect_lazy(&self) -> io::Result<RemoteChannel> {
        self.build()
    }

    fn build(&self) -> io::Result<RemoteChannel> {
        let mut endpoint = self.clone();
        // Built elsewhere, connected on a worker: that worker's runtime.
        endpoint.handle = endpoint.handle.or_else(spindle::Handle::current);
        if endpoint.handle.is_none() {
            return Err(io::Error::other(
                "spindle-grpc: connecting outside a spindle worker needs a runtime: Endpoint::handle",
            ));
        }
        #[cfg(feature = "tls")]
        match (endpoint.https, endpoint.tls.is_some()) {
            // No settings: the system's roots, loaded at the first attempt (module `roots`).
            (true, false) => endpoint.tls = Some(crate::tls::ClientTlsConfig::native_roots()),
            (false, true) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "spindle-grpc: Endpoint::tls was given for a URI that is not https://",
                ))
            }
            _ => {}
        }
        Ok(RemoteChannel { shared: Arc::new(Shared::new(endpoint)), reserved: false })
    }
}

/// The shared state of a channel and its clones.
pub(crate) struct Shared {
    pub(crate) endpoint: Endpoint,
    state: Mutex<ConnState>,
    /// Connections published so far (`Ready` states set; changed under `state`'s lock).
    published: AtomicU64,
    /// Woken at every change of `state`.
    state_waiters: Mutex<Vec<Waker>>,
    started: AtomicBool,
    in_flight: AtomicUsize,
    /// Waiting in `poll_ready` for a permit.
    permit_waiters: Mutex<Vec<Waker>>,
    /// A call wants a connection while the state is `Idle`; the manager's waker.
    wanted: AtomicBool,
    manager: Mutex<Option<Waker>>,
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`, as the manager last saw it.
    pub(crate) server_streams: Arc<AtomicUsize>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The manager, idle, notices that the channel is gone.
        if let Some(w) = lock(&self.manager).take() {
            w.wake();
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn new(endpoint: Endpoint) -> Shared {
        Shared {
            endpoint,
            state: Mutex::new(ConnState::Idle),
            published: AtomicU64::new(0),
            state_waiters: Mutex::default(),
            started: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            permit_waiters: Mutex::default(),
            wanted: AtomicBool::new(false),
            manager: Mutex::default(),
            server_streams: Arc::new(AtomicUsize::new(usize::MAX)),
        }
    }

    /// For the idle manager: ready once a call wants a connection.
    pub(crate) fn poll_wanted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.wanted.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        *lock(&self.manager) = Some(cx.waker().clone());
        if self.wanted.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn want(&self) {
        self.wanted.store(true, Ordering::Release);
        if let Some(w) = lock(&self.manager).take() {
            w.wake();
        }
    }

    /// Starts the manager fiber, once.
    fn start(self: &Arc<Self>) -> io::Result<()> {
        if self.started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.set_state(ConnState::Connecting);
        let weak = Arc::downgrade(self);
        let handle = self.endpoint.handle.as_ref().expect("checked by Endpoint::build");
        match handle.try_spawn(move || connector::manage(weak)) {
            Ok(_detached) => Ok(()),
            Err(closed) => {
                let e = io::Error::other(format!("spindle-grpc: {closed}"));
                self.set_state(ConnState::Down { error: e.to_string() });
                Err(e)
            }
        }
    }

    pub(crate) fn set_state(&self, state: ConnState) {
        {
            let mut slot = lock(&self.state);
            match state {
                ConnState::Ready(_) => {
                    self.published.fetch_add(1, Ordering::Relaxed);
                }
                // This attempt serves every call waiting now: their wishes are granted (a wish
                // left over would open a connection later that no call waits for).
                ConnState::Connecting => self.wanted.store(false, Ordering::Release),
                ConnState::Idle | ConnState::Down { .. } => {}
            }
            *slot = state;
        }
        let waiters = std::mem::take(&mut *lock(&self.state_waiters));
        for w in waiters {
            w.wake();
        }
        // A new connection may allow more streams.
        self.wake_permit_waiters();
    }

    /// Ready when the state is connected (`Ok`) or down (`Err`), as [`Shared::poll_sender`].
    fn poll_connected(&self, cx: &mut Context<'_>, since: u64) -> Poll<io::Result<()>> {
        match self.poll_sender(cx, since) {
            Poll::Ready(Ok(_)) => Poll::Ready(Ok(())),
            Poll::Ready(Err(status)) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionRefused, status.message())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// The connection to send a call on, or the status of a channel that is down; pending
    /// (waker registered) while connecting. `since` is the caller's: the connections published
    /// when it began to wait; once one more was published, a lost connection fails the call
    /// instead of asking for another (module docs, "A call waits for one connection").
    pub(crate) fn poll_sender(
        &self,
        cx: &mut Context<'_>,
        since: u64,
    ) -> Poll<Result<connector::Sender, Status>> {
        if let Some(outcome) = self.look(since) {
            return Poll::Ready(outcome);
        }
        lock(&self.state_waiters).push(cx.waker().clone());
        // Look again, the same way: the state may have changed before the waker was in (a
        // connection published and lost meanwhile, the manager idle again).
        match self.look(since) {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }

    /// What a caller waiting since `since` gets now (`None`: it waits, and an idle manager
    /// was asked for a connection).
    fn look(&self, since: u64) -> Option<Result<connector::Sender, Status>> {
        let state = lock(&self.state);
        match &*state {
            ConnState::Ready(sender) if !sender.is_closed() => return Some(Ok(sender.clone())),
            ConnState::Down { error } => {
                return Some(Err(Status::unavailable(format!("spindle-grpc: not connected: {error}"))))
            }
            _ if since != self.published.load(Ordering::Relaxed) => {
                return Some(Err(Status::unavailable(format!(
                    "spindle-grpc: the connection to {:?} closed before it could be used",
                    self.endpoint.target
                ))))
            }
            ConnState::Idle | ConnState::Ready(_) => self.want(),
            ConnState::Connecting => {}
        }
        None
    }

    /// The live connection's sender, if connected; else the connections published so far (a
    /// waiter's `since`, [`Shared::poll_sender`]).
    fn ready_sender(&self) -> Result<connector::Sender, u64> {
        match &*lock(&self.state) {
            ConnState::Ready(sender) if !sender.is_closed() => Ok(sender.clone()),
            _ => Err(self.published.load(Ordering::Relaxed)),
        }
    }

    /// The most calls in flight now: the server's stream limit and the endpoint's.
    fn stream_limit(&self) -> usize {
        self.server_streams.load(Ordering::Relaxed).min(self.endpoint.concurrency_limit)
    }

    fn try_reserve(&self) -> bool {
        let limit = self.stream_limit();
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
            .is_ok()
    }

    pub(crate) fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.wake_permit_waiters();
    }

    fn wake_permit_waiters(&self) {
        let waiters = std::mem::take(&mut *lock(&self.permit_waiters));
        for w in waiters {
            w.wake();
        }
    }
}

/// The transport of tonic-generated clients over the network: `FooClient::new(channel)`.
/// Cheap to clone; clones share the connection.
pub struct RemoteChannel {
    shared: Arc<Shared>,
    /// A permit taken by `poll_ready` for the next `call`.
    reserved: bool,
}

impl Clone for RemoteChannel {
    fn clone(&self) -> RemoteChannel {
        RemoteChannel { shared: self.shared.clone(), reserved: false }
    }
}

impl Drop for RemoteChannel {
    fn drop(&mut self) {
        if self.reserved {
            self.shared.release();
        }
    }
}

impl std::fmt::Debug for RemoteChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteChannel")
            .field("target", &self.shared.endpoint.target)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl RemoteChannel {
    /// Calls in flight on this channel and its clones (permits held, module docs).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the channel has a live connection now.
    pub fn is_connected(&self) -> bool {
        self.phase() == Phase::Connected
    }

    /// The connection's state now (for a balancer, module `balance`; a closed `Ready` is `Idle`).
    pub(crate) fn phase(&self) -> Phase {
        match &*lock(&self.shared.state) {
            ConnState::Ready(s) if !s.is_closed() => Phase::Connected,
            ConnState::Idle | ConnState::Ready(_) => Phase::Idle,
            ConnState::Connecting => Phase::Connecting,
            ConnState::Down { error } => Phase::Down(error.clone()),
        }
    }

    /// Connects now, not at the next call: starts the manager, or asks an idle one to reconnect.
    pub(crate) fn connect_now(&self) -> io::Result<()> {
        self.shared.start()?;
        match &*lock(&self.shared.state) {
            ConnState::Ready(s) if !s.is_closed() => {}
            ConnState::Idle | ConnState::Ready(_) => self.shared.want(),
            ConnState::Connecting | ConnState::Down { .. } => {}
        }
        Ok(())
    }

    /// A clone holding a stream permit for its next call (module docs), if one is free.
    pub(crate) fn try_reserved(&self) -> Option<RemoteChannel> {
        self.shared.try_reserve().then(|| RemoteChannel { shared: self.shared.clone(), reserved: true })
    }

    /// Wakes `waker` at the next permit release or change of state.
    pub(crate) fn wake_on_change(&self, waker: Waker) {
        lock(&self.shared.permit_waiters).push(waker);
    }

    fn start_call(&mut self, request: http::Request<Body>) -> RemoteFuture {
        if !self.reserved {
            self.shared.in_flight.fetch_add(1, Ordering::AcqRel);
        }
        self.reserved = false;
        let permit = Permit(self.shared.clone());
        // Before the manager may start: a call waits from now on.
        let ready = self.shared.ready_sender();
        if let Err(e) = self.shared.start() {
            return RemoteFuture::ready(Status::unavailable(e.to_string()));
        }
        let (mut parts, body) = request.into_parts();
        let timeout = crate::call::parse_timeout_header(&parts.headers);
        let timeout = match (timeout, self.shared.endpoint.timeout) {
            (Some(t), Some(d)) => Some(t.min(d)),
            (t, d) => t.or(d),
        };
        if let Some(t) = timeout {
            if !parts.headers.contains_key(&crate::call::GRPC_TIMEOUT) {
                parts.headers.insert(crate::call::GRPC_TIMEOUT.clone(), encode_timeout(t));
            }
        }
        let mut uri = http::uri::Parts::from(std::mem::take(&mut parts.uri));
        uri.scheme =
            Some(if self.shared.endpoint.https { http::uri::Scheme::HTTPS } else { http::uri::Scheme::HTTP });
        uri.authority = Some(self.shared.endpoint.origin.clone());
        if uri.path_and_query.is_none() {
            uri.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
        }
        parts.uri = match http::Uri::from_parts(uri) {
            Ok(uri) => uri,
            Err(e) => {
                return RemoteFuture::ready(Status::internal(format!("spindle-grpc: bad request URI: {e}")))
            }
        };
        let cancel = Arc::new(CancelFlag::default());
        let body = Body::new(OutBody { inner: body, cancel: cancel.clone() });
        let deadline = timeout
            .map(|t| Deadline::new(spindle::time::deadline_after(t), self.shared.endpoint.handle.as_ref()));
        let request = http::Request::from_parts(parts, body);
        // Connected (the usual case): send at once; otherwise wait for the connection.
        let stage = match ready {
            Ok(mut sender) => Stage::Sending(Box::pin(sender.send_request(request))),
            Err(since) => Stage::Waiting { request: Some(Box::new(request)), since },
        };
        RemoteFuture {
            stage,
            shared: Some(self.shared.clone()),
            call: Some(CallParts { _permit: permit, deadline, cancel: CancelOnDrop(Some(cancel)) }),
        }
    }
}

impl tower_service::Service<http::Request<Body>> for RemoteChannel {
    type Response = http::Response<RemoteBody>;
    type Error = std::convert::Infallible;
    type Future = RemoteFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.reserved || self.shared.try_reserve() {
            self.reserved = true;
            return Poll::Ready(Ok(()));
        }
        lock(&self.shared.permit_waiters).push(cx.waker().clone());
        if self.shared.try_reserve() {
            self.reserved = true;
            return Poll::Ready(Ok(()));
        }
        Poll::Pending
    }

    fn call(&mut self, request: http::Request<Body>) -> RemoteFuture {
        self.start_call(request)
    }
}
