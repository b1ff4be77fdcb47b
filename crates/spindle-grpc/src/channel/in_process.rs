//! [`Channel`]: the in-process transport. It holds the registered services (module
//! `registry`) and starts each call: the route (`package.Service/Method`), the deadline from
//! `grpc-timeout`, the request body with the channel's limits (module `request`), then the
//! handler driven in the caller's call from a worker (module `direct`), or in a pump task on
//! the channel's runtime for a caller outside any worker (module `pipe`). The crate docs have
//! the semantics.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::server::NamedService;
use tonic::Status;

use super::call_state::{CallState, End, LiveCall};
use super::direct::Direct;
use super::pipe;
use super::registry::{Registered, Registration, Services};
use super::request::RequestBody;
use super::response::{FutureKind, ResponseBody, ResponseFuture};
use crate::limit::DEFAULT_MAX_MESSAGE_SIZE;
use crate::path::service_and_method;
use crate::timeout::deadline_of;
use crate::typed::entry::{Entry, Method, TypedService};

/// A channel's settings and services, shared by its clones (copied on write by the builder
/// methods).
#[derive(Clone)]
pub(crate) struct Inner {
    services: Services,
    pub(crate) handle: Option<spindle::Handle>,
    pub(crate) live: Arc<AtomicUsize>,
    pub(crate) max_request: usize,
    pub(crate) max_response: usize,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            services: Services::default(),
            handle: None,
            live: Arc::default(),
            max_request: DEFAULT_MAX_MESSAGE_SIZE,
            max_response: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }
}

/// An in-process gRPC channel: the transport of tonic-generated clients, serving the
/// tonic-generated servers registered on it. Cheap to clone (an `Arc`); clones share the
/// services.
#[derive(Clone)]
pub struct Channel {
    pub(crate) inner: Arc<Inner>,
}

impl Default for Channel {
    fn default() -> Self {
        Channel::new()
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names = self.inner.services.names();
        names.sort_unstable();
        f.debug_struct("Channel")
            .field("services", &names)
            .field("handle", &self.inner.handle)
            .field("max_request_message_size", &self.inner.max_request)
            .field("max_response_message_size", &self.inner.max_response)
            .finish()
    }
}

impl Channel {
    /// A channel with no services. Built on a spindle worker, it runs the calls made from
    /// outside any worker on that worker's runtime ([`Channel::with_handle`] chooses another).
    pub fn new() -> Channel {
        Channel { inner: Arc::new(Inner { handle: spindle::Handle::current(), ..Inner::default() }) }
    }

    /// Runs the calls made from outside any spindle worker on `handle`'s runtime (as pump
    /// tasks). Calls made from a worker always run on the caller's worker.
    pub fn with_handle(mut self, handle: spindle::Handle) -> Channel {
        Arc::make_mut(&mut self.inner).handle = Some(handle);
        self
    }

    /// The largest request message this channel carries, in bytes: [`DEFAULT_MAX_MESSAGE_SIZE`]
    /// (4 MiB, tonic's and grpc-go's default receive limit) unless set; `usize::MAX` for no
    /// limit. A call whose client sends a larger message ends with `RESOURCE_EXHAUSTED`, and
    /// its handler is dropped without seeing that message (the messages before it in the
    /// stream it does see). The channel reads the 5-byte gRPC length prefix of each message;
    /// tonic's server still applies its own `max_decoding_message_size` (also 4 MiB by
    /// default) behind it, so raising this one alone does not let a larger request through.
    pub fn max_request_message_size(mut self, limit: usize) -> Channel {
        Arc::make_mut(&mut self.inner).max_request = limit;
        self
    }

    /// The largest response message this channel carries, in bytes: [`DEFAULT_MAX_MESSAGE_SIZE`]
    /// (4 MiB) unless set; `usize::MAX` for no limit. A larger one never reaches the client:
    /// the call ends with `RESOURCE_EXHAUSTED` in its place (after the messages before it),
    /// and the handler is dropped. tonic's client still applies its own
    /// `max_decoding_message_size` (4 MiB by default) behind it, reported by tonic as
    /// `OUT_OF_RANGE`; lower this limit rather than the client's to get `RESOURCE_EXHAUSTED`.
    pub fn max_response_message_size(mut self, limit: usize) -> Channel {
        Arc::make_mut(&mut self.inner).max_response = limit;
        self
    }

    /// Registers a tonic-generated server (or any service with a [`NamedService`] name, such
    /// as a server wrapped in interceptors or tower layers), replacing one of the same name.
    /// Registration affects this channel and the clones made from it afterwards.
    ///
    /// Calls reach it on the encoded path: tonic's client encodes, the server decodes. To
    /// register a server's typed fast path too, see [`Channel::add_typed_service`].
    pub fn add_service<S, B>(self, service: S) -> Channel
    where
        S: tower_service::Service<http::Request<Body>, Response = http::Response<B>>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<tonic::codegen::StdError> + Send + 'static,
        S::Future: Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<tonic::codegen::StdError>,
    {
        self.register(service, None, &[])
    }

    /// [`Channel::add_service`] with the service's method table, as `spindle-grpc-build`
    /// generates it beside tonic's code (`foo_typed::METHODS`): the channel then knows which
    /// methods take exactly one request message (unary and server-streaming ones) and ends a
    /// call to one of them that sends several, or none, with `INTERNAL` ("cardinality
    /// violation"), as grpc-go does; the handler never runs. Without the table a tonic server
    /// reads the first message of such a call and ignores the rest (an empty request is
    /// `INTERNAL` from tonic). [`Channel::add_typed_service`] takes the table from the typed
    /// entry.
    pub fn add_service_with_methods<S, B>(self, service: S, methods: &'static [Method]) -> Channel
    where
        S: tower_service::Service<http::Request<Body>, Response = http::Response<B>>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<tonic::codegen::StdError> + Send + 'static,
        S::Future: Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<tonic::codegen::StdError>,
    {
        self.register(service, None, methods)
    }

    fn register<S, B>(mut self, service: S, typed: Option<Entry>, methods: &'static [Method]) -> Channel
    where
        S: tower_service::Service<http::Request<Body>, Response = http::Response<B>>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<tonic::codegen::StdError> + Send + 'static,
        S::Future: Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<tonic::codegen::StdError>,
    {
        let registration = Registration { encoded: Arc::new(Registered(service)), typed, methods };
        Arc::make_mut(&mut self.inner).services.insert(S::NAME, registration);
        self
    }

    /// Registers a server generated by `spindle-grpc-build` (or a wrapper that keeps its
    /// typed entry, such as [`typed::Intercepted`](crate::typed::Intercepted)) with its typed
    /// entry point, replacing one of the same name: the generated typed clients on this
    /// channel move their messages into its handlers, never encoding them (module
    /// [`typed`](crate::typed)); every other client (tonic's own, a typed client on another
    /// transport) reaches it on the encoded path, as with [`Channel::add_service`].
    pub fn add_typed_service<S, B>(self, service: S) -> Channel
    where
        S: TypedService
            + tower_service::Service<http::Request<Body>, Response = http::Response<B>>
            + NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<tonic::codegen::StdError> + Send + 'static,
        S::Future: Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<tonic::codegen::StdError>,
    {
        let typed = service.typed_entry();
        let methods = typed.dispatch().methods();
        self.register(service, Some(typed), methods)
    }

    /// The typed entry registered for `service`, if any.
    pub(crate) fn typed_entry(&self, service: &str) -> Option<&Entry> {
        self.inner.services.get(service)?.typed.as_ref()
    }

    /// Calls in progress on this channel and its clones (a call ends when its response body
    /// has ended or the client dropped it). For tests and diagnostics.
    pub fn live_calls(&self) -> usize {
        self.inner.live.load(Ordering::Relaxed)
    }

    /// Starts a call (the tower service's `call`; the network server's too).
    pub(crate) fn start(&self, request: http::Request<Body>) -> ResponseFuture {
        let path = request.uri().path();
        let found = path.strip_prefix('/').and_then(service_and_method).and_then(|(service, method)| {
            let registration = self.inner.services.get(service)?;
            Some((&registration.encoded, registration.single_request(method)))
        });
        let Some((service, single)) = found else {
            let status = Status::unimplemented(format!("unknown service for path {path}"));
            return ready(status);
        };
        let deadline = deadline_of(request.headers()).map(spindle::time::sleep_until_future);
        let state = Arc::new(CallState::default());
        let max_request = self.inner.max_request;
        let request =
            request.map(|inner| Body::new(RequestBody::new(inner, state.clone(), max_request, single)));
        let response_limit = self.inner.max_response;
        if spindle::Handle::on_worker() {
            // On a worker: run the handler right here (module docs).
            let live = LiveCall::new(&self.inner.live);
            let handler = service.call(request);
            let end = End::new(state, Some(live));
            return ResponseFuture {
                kind: FutureKind::Direct(Direct {
                    handler: Some(handler),
                    deadline,
                    end: Some(end),
                    response_limit,
                }),
            };
        }
        let Some(handle) = self.inner.handle.as_ref() else {
            return ready(no_runtime());
        };
        let pipe = Arc::new(pipe::Pipe::default());
        let live = LiveCall::new(&self.inner.live);
        let service = service.clone();
        let pump_pipe = pipe.clone();
        let spawned = handle.try_spawn_async(async move {
            // The handler is created on the worker, so that it runs there from its first poll.
            let handler = service.call(request);
            let end = Some(End::new(state, None));
            let direct = Direct { handler: Some(handler), deadline, end, response_limit };
            pipe::Pump::new(pump_pipe, direct).await
        });
        match spawned {
            Ok(_detached) => ResponseFuture { kind: FutureKind::Remote(pipe::ClientFuture::new(pipe, live)) },
            Err(closed) => ready(Status::unavailable(format!("spindle-grpc: {closed}"))),
        }
    }
}

/// The status of a call from outside any worker on a channel without a runtime handle.
pub(crate) fn no_runtime() -> Status {
    Status::unavailable(
        "spindle-grpc: called outside a spindle worker on a channel without a runtime handle \
         (build the channel on a worker, or give it one with Channel::with_handle)",
    )
}

fn ready(status: Status) -> ResponseFuture {
    ResponseFuture::ready(status.into_http())
}

impl tower_service::Service<http::Request<Body>> for Channel {
    type Response = http::Response<ResponseBody>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> ResponseFuture {
        self.start(request)
    }
}

/// The channel is a valid tonic transport: `Send` futures and bodies, a `Send + Sync` channel.
#[allow(dead_code)]
fn _assert_bounds() {
    fn send<T: Send>() {}
    fn sync<T: Sync>() {}
    fn future<T: Future>() {}
    send::<ResponseFuture>();
    send::<ResponseBody>();
    send::<Channel>();
    sync::<Channel>();
    future::<ResponseFuture>();
}

#[cfg(test)]
mod tests {
    /// Futures and bodies are moved by value through tonic's client: keep them small.
    #[test]
    fn sizes() {
        let (f, b) =
            (std::mem::size_of::<super::ResponseFuture>(), std::mem::size_of::<super::ResponseBody>());
        assert!(f <= 160 && b <= 160, "ResponseFuture {f} bytes, ResponseBody {b} bytes");
    }
}
