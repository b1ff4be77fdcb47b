//! [`RemoteChannel`]: the transport of tonic-generated clients over HTTP/2 (module `client`
//! has the overview), and [`Endpoint::connect`], which builds one. A call takes a stream
//! permit, finds the connection (module `shared`, whose invariants it keeps) and is sent on
//! it, or waits for it; the call's own life (its request body, deadline and response) is
//! module `call`'s.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tonic::body::Body;
use tonic::Status;

use super::call::{
    CallParts, CancelFlag, CancelOnDrop, Deadline, OutBody, Permit, RemoteBody, RemoteFuture, Stage,
};
use super::connector;
use super::endpoint::Endpoint;
use super::shared::Shared;
use super::state::{ConnState, Phase};
use super::trace::ClientTrace;
use crate::lock::lock;
use crate::timeout::{encode_timeout, parse_timeout_header, GRPC_TIMEOUT};

impl Endpoint {
    /// Connects, waiting for the first attempt: `Err` if it fails (the channel is not kept).
    /// Run it with `.await` in a task, or `spindle::task::block_on` in a fiber or thread.
    pub async fn connect(&self) -> io::Result<RemoteChannel> {
        let channel = self.build()?;
        // Waiting from now on (module `shared`, "a call waits for one connection").
        let since = channel.shared.published.load(Ordering::Relaxed);
        connector::start(&channel.shared)?;
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
            // No settings: the system's roots, loaded at the first attempt (module `tls::roots`).
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
    /// Calls in flight on this channel and its clones (permits held, module `shared`).
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
        connector::start(&self.shared)?;
        match &*lock(&self.shared.state) {
            ConnState::Ready(s) if !s.is_closed() => {}
            ConnState::Idle | ConnState::Ready(_) => self.shared.want(),
            ConnState::Connecting | ConnState::Down { .. } => {}
        }
        Ok(())
    }

    /// A clone holding a stream permit for its next call (module `shared`), if one is free.
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
        if let Err(e) = connector::start(&self.shared) {
            return RemoteFuture::ready(Status::unavailable(e.to_string()));
        }
        let (mut parts, body) = request.into_parts();
        let timeout = parse_timeout_header(&parts.headers);
        let timeout = match (timeout, self.shared.endpoint.timeout) {
            (Some(t), Some(d)) => Some(t.min(d)),
            (t, d) => t.or(d),
        };
        if let Some(t) = timeout {
            if !parts.headers.contains_key(&GRPC_TIMEOUT) {
                parts.headers.insert(GRPC_TIMEOUT.clone(), encode_timeout(t));
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
        let trace = ClientTrace::start(parts.uri.path());
        let request = http::Request::from_parts(parts, body);
        // Connected (the usual case): send at once; otherwise wait for the connection.
        let stage = match ready {
            Ok(mut sender) => Stage::Sending(Box::pin(sender.send_request(request))),
            Err(since) => Stage::Waiting { request: Some(Box::new(request)), since },
        };
        RemoteFuture {
            stage,
            shared: Some(self.shared.clone()),
            call: Some(CallParts { _permit: permit, deadline, cancel: CancelOnDrop(Some(cancel)), trace }),
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
