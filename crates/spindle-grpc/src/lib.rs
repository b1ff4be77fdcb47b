//! spindle-grpc: gRPC for [tonic] on spindle, in process ([`Channel`]) and over HTTP/2
//! ([`Server`], [`Endpoint`], [`RemoteChannel`]; [`BalancedChannel`] over several servers), or
//! either, chosen by URI ([`AnyChannel`]).
//!
//! A [`Channel`] holds tonic-generated servers (any `Service<http::Request<tonic::body::Body>>`
//! with a [`NamedService`] name) and is itself the transport of tonic-generated clients
//! ([`tonic::client::GrpcService`]): `FooClient::new(channel)`. There are no sockets and no
//! HTTP/2: a call hands the client's `http::Request` (headers and the body of encoded
//! messages) to the server, and the server's `http::Response` (headers, message frames,
//! trailers) back. Serve the same channel over the network with [`Server`], and call it from
//! elsewhere through a [`RemoteChannel`] ([`Endpoint::connect`]): the same client code runs
//! in process and remote, with no tokio runtime (the crate README has the network semantics).
//! With the feature `tls`, both sides speak TLS (`Server::tls`, `https://` endpoints trusting
//! the system's root certificates or those of `Endpoint::tls`), mutual TLS included.
//!
//! ```
//! use spindle_grpc::Channel;
//! use spindle_grpc_interop::pb::{test_service_client::TestServiceClient, test_service_server::TestServiceServer};
//! use spindle_grpc_interop::pb::SimpleRequest;
//!
//! let rt = spindle::Runtime::new().unwrap();
//! let server = spindle_grpc_interop::Server::new(|d| Box::pin(spindle::time::sleep_future(d)));
//! let channel = Channel::new().add_service(TestServiceServer::new(server));
//! let size = rt.block_on(move || {
//!     spindle::task::block_on(async move {
//!         let mut client = TestServiceClient::new(channel);
//!         let request = SimpleRequest { response_size: 10, ..Default::default() };
//!         let response = client.unary_call(request).await.unwrap().into_inner();
//!         response.payload.unwrap().body.len()
//!     })
//! });
//! assert_eq!(size, 10);
//! ```
//!
//! # In a fleet
//!
//! [`BalancedChannel::from_target`] takes a gRPC target name (`dns:///host:port`, `ipv4:`,
//! `ipv6:` lists, `unix:/path`; [`TargetName`]): a `dns` name is resolved off the workers
//! (spindle's resolver, the system's by default), again on a timer and when a server is
//! found down, and the channel keeps one child per address, added and dropped as the name's
//! records change, spreading calls `round_robin` or `pick_first` ([`LoadBalancing`]);
//! [`BalancedBuilder`] has the settings.
//!
//! # The typed fast path
//!
//! With the code `spindle-grpc-build` generates beside tonic's, a server registered with
//! [`Channel::add_typed_service`] and the generated typed client (`foo_typed::FooClient`) call
//! each other with the messages moved, never encoded: module [`typed`], and the crate README.
//!
//! # Where handlers run
//!
//! - **From a spindle worker** (a fiber or a task): the handler runs right in the caller's
//!   call, on the caller's worker: the client's response future polls the handler's future,
//!   the client's response body polls the handler's response stream, and the handler's request
//!   stream polls the client's. No task, queue, lock or thread hop sits between them, and a
//!   stream is pulled message by message (a slow reader bounds the writer: backpressure).
//! - **From outside any worker** (a plain thread, another executor): the call is spawned as a
//!   *pump* task on the channel's runtime ([`Channel::with_handle`]; by default the runtime of
//!   the worker that built the channel), and the response crosses through a bounded pipe
//!   (module `pipe`).
//!
//! # Semantics
//!
//! See the crate README for the table: deadlines (`grpc-timeout`, enforced with spindle timers
//! as `DEADLINE_EXCEEDED`), cancellation (dropping the call drops the handler; a request
//! stream the handler still reads fails with `CANCELLED`), unknown services (`UNIMPLEMENTED`),
//! a unary or server-streaming call with several request messages or none (`INTERNAL`, as
//! grpc-go, for a service whose method table the channel has: [`Channel::add_typed_service`],
//! [`Channel::add_service_with_methods`]),
//! panicking handlers (`INTERNAL`, and the channel keeps serving), message size limits
//! ([`Channel::max_request_message_size`], [`Channel::max_response_message_size`], 4 MiB by
//! default, and tonic's own codec limits, all reported as `RESOURCE_EXHAUSTED` as the gRPC spec
//! says; the one exception, a generated client's own `max_decoding_message_size`, is in the
//! README).

#![warn(missing_docs)]

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod admit;
mod balance;
mod call;
mod client;
mod connector;
mod either;
mod endpoint;
mod exec;
mod first_frame;
mod limit;
mod pipe;
mod remote_call;
mod request;
mod resolve;
mod retry;
mod retry_call;
#[cfg(feature = "tls")]
mod roots;
mod server;
mod signal;
mod target;
#[cfg(feature = "tls")]
mod tls;
pub mod typed;
mod wire;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::server::NamedService;
use tonic::Status;

pub use balance::{BalancedChannel, LoadBalancing};
use call::{CallState, Direct, End, FutureKind, HandlerFuture, LiveCall};
pub use call::{ResponseBody, ResponseFuture};
pub use client::RemoteChannel;
pub use either::{AnyBody, AnyChannel, AnyFuture};
pub use endpoint::Endpoint;
pub use limit::DEFAULT_MAX_MESSAGE_SIZE;
/// The most response bytes buffered between a pump task and a caller outside the runtime
/// (plus the frame being produced).
pub use pipe::BYTES as PIPE_BYTES;
/// The most response frames buffered between a pump task and a caller outside the runtime.
pub use pipe::CAPACITY as PIPE_FRAMES;
pub use remote_call::{RemoteBody, RemoteFuture};
use request::RequestBody;
pub use resolve::BalancedBuilder;
pub use retry::{RetryPolicy, RetryThrottle, ServiceConfig};
pub use retry_call::{BalancedFuture, DEFAULT_RETRY_BUFFER, TRANSPARENT_RETRIES};
pub use server::{Server, ServerStats, Serving, ShutdownReport};
pub use target::{TargetName, DEFAULT_PORT as DEFAULT_TARGET_PORT};
#[cfg(feature = "tls")]
pub use tls::{ClientTlsConfig, ServerTlsConfig};

/// A registered service, type-erased.
trait ErasedService: Send + Sync {
    fn call(&self, request: http::Request<Body>) -> HandlerFuture;
}

struct Registered<S>(S);

impl<S, B> ErasedService for Registered<S>
where
    S: tower_service::Service<http::Request<Body>, Response = http::Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Error: Into<tonic::codegen::StdError> + Send + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
{
    fn call(&self, request: http::Request<Body>) -> HandlerFuture {
        let mut service = self.0.clone();
        // tonic's generated servers are always ready: try once without a real waker, and on
        // success call at once (a service that is not ready waits below, with the real one).
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if let Poll::Ready(Ok(())) = service.poll_ready(&mut cx) {
            return into_handler_future(service.call(request));
        }
        Box::pin(async move {
            match std::future::poll_fn(|cx| service.poll_ready(cx)).await {
                Ok(()) => into_handler_future(service.call(request)).await,
                Err(e) => Ok(Status::from_error(e.into()).into_http()),
            }
        })
    }
}

/// A service's future as a [`HandlerFuture`]. tonic's generated servers return exactly that
/// type (`Pin<Box<dyn Future + Send>>` of `http::Response<Body>`): it is taken as it is,
/// saving an allocation per call. Other services (interceptors, tower layers) are boxed, with
/// their body made a `tonic::body::Body` and their error a status.
fn into_handler_future<F, B, E>(future: F) -> HandlerFuture
where
    F: Future<Output = Result<http::Response<B>, E>> + Send + 'static,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<tonic::codegen::StdError>,
    E: Into<tonic::codegen::StdError> + 'static,
{
    let mut slot = Some(future);
    if let Some(boxed) = <dyn std::any::Any>::downcast_mut::<Option<HandlerFuture>>(&mut slot) {
        if let Some(boxed) = boxed.take() {
            return boxed;
        }
    }
    let future = slot.expect("the future is still in its slot");
    Box::pin(async move {
        match future.await {
            Ok(response) => Ok(response.map(Body::new)),
            Err(e) => Ok(Status::from_error(e.into()).into_http()),
        }
    })
}

/// Registered services by name. A linear scan while there are few (comparing short strings is
/// cheaper than SipHash; it showed as 1% of a unary call), a hash map beyond that.
#[derive(Clone, Default)]
struct Services {
    list: Vec<(&'static str, Registration)>,
    index: Option<HashMap<&'static str, usize>>,
}

/// A registered service: its encoded entry (tonic's server as a tower service) and, if it was
/// registered with [`Channel::add_typed_service`], its typed entry.
#[derive(Clone)]
struct Registration {
    encoded: Arc<dyn ErasedService>,
    typed: Option<typed::Entry>,
    /// The service's methods, when known (its typed entry's, or those given to
    /// [`Channel::add_service_with_methods`]; none otherwise): the request cardinality of each.
    methods: &'static [typed::Method],
}

impl Registration {
    /// Whether `method` takes exactly one request message (unary and server-streaming
    /// methods), as far as the registration knows.
    fn single_request(&self, method: &str) -> bool {
        self.methods
            .iter()
            .any(|m| m.name == method && matches!(m.kind, typed::Kind::Unary | typed::Kind::ServerStreaming))
    }
}

impl Services {
    const SCAN_UP_TO: usize = 16;

    fn get(&self, name: &str) -> Option<&Registration> {
        let i = match &self.index {
            Some(index) => *index.get(name)?,
            None => self.list.iter().position(|(n, _)| *n == name)?,
        };
        Some(&self.list[i].1)
    }

    fn insert(&mut self, name: &'static str, service: Registration) {
        match self.list.iter().position(|(n, _)| *n == name) {
            Some(i) => self.list[i].1 = service,
            None => self.list.push((name, service)),
        }
        if self.list.len() > Self::SCAN_UP_TO {
            self.index = Some(self.list.iter().enumerate().map(|(i, (n, _))| (*n, i)).collect());
        }
    }

    fn names(&self) -> Vec<&'static str> {
        self.list.iter().map(|(n, _)| *n).collect()
    }
}

#[derive(Clone)]
struct Inner {
    services: Services,
    handle: Option<spindle::Handle>,
    live: Arc<AtomicUsize>,
    max_request: usize,
    max_response: usize,
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
    inner: Arc<Inner>,
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
    pub fn add_service_with_methods<S, B>(self, service: S, methods: &'static [typed::Method]) -> Channel
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

    fn register<S, B>(
        mut self,
        service: S,
        typed: Option<typed::Entry>,
        methods: &'static [typed::Method],
    ) -> Channel
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
    /// typed entry, such as [`typed::Intercepted`]) with its typed entry point, replacing one
    /// of the same name: the generated typed clients on this channel move their messages into
    /// its handlers, never encoding them (module [`typed`]); every other client (tonic's own,
    /// a typed client on another transport) reaches it on the encoded path, as with
    /// [`Channel::add_service`].
    pub fn add_typed_service<S, B>(self, service: S) -> Channel
    where
        S: typed::TypedService
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
    pub(crate) fn typed_entry(&self, service: &str) -> Option<&typed::Entry> {
        self.inner.services.get(service)?.typed.as_ref()
    }

    /// Calls in progress on this channel and its clones (a call ends when its response body
    /// has ended or the client dropped it). For tests and diagnostics.
    pub fn live_calls(&self) -> usize {
        self.inner.live.load(Ordering::Relaxed)
    }

    fn start(&self, request: http::Request<Body>) -> ResponseFuture {
        let path = request.uri().path();
        let found = path.strip_prefix('/').and_then(route).and_then(|(service, method)| {
            let registration = self.inner.services.get(service)?;
            Some((&registration.encoded, registration.single_request(method)))
        });
        let Some((service, single)) = found else {
            let status = Status::unimplemented(format!("unknown service for path {path}"));
            return ready(status);
        };
        let deadline = call::deadline_of(request.headers()).map(spindle::time::sleep_until_future);
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

/// The service and method of a gRPC path without its leading `/` (`package.Service/Method`):
/// what comes before and after the last `/`. A byte loop from the end: the method name is
/// short, and `rsplit_once` goes through `memrchr` (~100 instructions a call for this,
/// callgrind).
fn route(path: &str) -> Option<(&str, &str)> {
    let slash = path.bytes().rposition(|b| b == b'/')?;
    Some((&path[..slash], &path[slash + 1..]))
}

/// The status of a call from outside any worker on a channel without a runtime handle.
pub(crate) fn no_runtime() -> Status {
    Status::unavailable(
        "spindle-grpc: called outside a spindle worker on a channel without a runtime handle \
         (build the channel on a worker, or give it one with Channel::with_handle)",
    )
}

fn ready(status: Status) -> ResponseFuture {
    ResponseFuture { kind: FutureKind::Ready(Some(Box::new(status.into_http()))) }
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

    #[test]
    fn the_service_is_what_precedes_the_last_slash() {
        assert_eq!(super::route("pkg.Svc/Method"), Some(("pkg.Svc", "Method")));
        assert_eq!(super::route("a/b/Method"), Some(("a/b", "Method")));
        assert_eq!(super::route("pkg.Svc/"), Some(("pkg.Svc", "")));
        assert_eq!(super::route("no-slash"), None);
    }

    /// The `grpc-timeout` lookup scans a few headers and hashes beyond that: both find it.
    #[test]
    fn the_timeout_header_is_found_among_few_or_many_headers() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(crate::call::parse_timeout_header(&headers), None);
        headers.insert("te", http::HeaderValue::from_static("trailers"));
        headers.insert("grpc-timeout", http::HeaderValue::from_static("250m"));
        assert_eq!(crate::call::parse_timeout_header(&headers), Some(std::time::Duration::from_millis(250)));
        for i in 0..6 {
            headers.insert(
                http::HeaderName::try_from(format!("x-extra-{i}")).unwrap(),
                http::HeaderValue::from_static("v"),
            );
        }
        assert!(headers.len() > 4);
        assert_eq!(crate::call::parse_timeout_header(&headers), Some(std::time::Duration::from_millis(250)));
        headers.remove("grpc-timeout");
        assert_eq!(crate::call::parse_timeout_header(&headers), None);
        assert!(crate::call::deadline_of(&headers).is_none());
    }
}
