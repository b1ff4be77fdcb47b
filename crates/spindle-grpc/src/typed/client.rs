//! The client's side of the typed path: [`Client`], which the generated typed client holds,
//! finds the route once and starts each call; [`UnaryFuture`] and [`StreamFuture`] are the
//! calls' futures.
//!
//! A call starts where tonic's encoded client would start it, in the same order: the client's
//! interceptor, then (on the server's side, in [`Dispatch::call`](super::Dispatch::call)) the
//! server's wrappers and the request's size, then the handler. From a worker the handler is
//! created and driven right in the caller's call; from outside any worker the start itself
//! (module `prepared`) moves to a pump task (module `pump`).
//!
//! # Invariants
//!
//! - **A route or none, decided at construction.** [`Client::new`] looks at the transport
//!   once: an in-process [`Channel`] (or `AnyChannel::Local`) with a typed entry for the
//!   service whose methods match gives a route; anything else none, and every call takes the
//!   encoded path (the generated client hands the request back to tonic's client).
//! - **A request handed back is untouched**: a method without a typed route returns the
//!   request before anything is taken from it.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use prost::Message;
use tonic::codegen::tokio_stream::Stream;
use tonic::codegen::GrpcMethod;
use tonic::service::Interceptor;
use tonic::{Request, Response, Status};

use super::driver::Driver;
use super::entry::{Entry, Kind, Method};
use super::prepared::Prepared;
use super::pump;
use super::response::poll_unary;
use super::stream::Streaming;
use super::upload::RequestStream;
use crate::channel::call_state::{CallState, LiveCall};
use crate::channel::{no_runtime, Channel};
use crate::either::AnyChannel;
use crate::limit::{TypedLimits, TONIC_MAX_DECODING, TONIC_MAX_ENCODING};
use crate::timeout::deadline_of;

/// The typed path of a generated client: its route to a registered typed entry (if any), its
/// interceptor and its own codec limits. The generated typed client holds one beside tonic's
/// client and asks it first; a method it has no route for gets the request back.
#[derive(Clone)]
pub struct Client {
    route: Option<Route>,
    interceptor: Option<Box<dyn DynInterceptor>>,
    max_decoding: usize,
    max_encoding: usize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("typed", &self.is_typed())
            .field("interceptor", &self.interceptor.is_some())
            .field("max_decoding_message_size", &self.max_decoding)
            .field("max_encoding_message_size", &self.max_encoding)
            .finish()
    }
}

/// Where typed calls go: the channel and the service's registered entry.
#[derive(Clone)]
struct Route {
    channel: Channel,
    entry: Entry,
    service: &'static str,
    /// The client's methods, by index.
    methods: &'static [Method],
    /// The entry lists exactly the client's methods, in the same order.
    exact: bool,
}

impl Route {
    fn find(channel: &Channel, service: &'static str, methods: &'static [Method]) -> Option<Route> {
        let entry = channel.typed_entry(service)?.clone();
        let theirs = entry.dispatch().methods();
        let exact = theirs.len() == methods.len() && theirs.iter().zip(methods).all(|(a, b)| a.matches(b));
        if !exact && !methods.iter().any(|m| theirs.iter().any(|t| t.matches(m))) {
            return None;
        }
        Some(Route { channel: channel.clone(), entry, service, methods, exact })
    }
}

/// The transport as an in-process channel, if it is one.
fn local_channel<T: 'static>(transport: &T) -> Option<&Channel> {
    let any: &dyn Any = transport;
    if let Some(channel) = any.downcast_ref::<Channel>() {
        return Some(channel);
    }
    match any.downcast_ref::<AnyChannel>() {
        Some(AnyChannel::Local(channel)) => Some(channel),
        _ => None,
    }
}

/// A clonable tonic interceptor, boxed.
trait DynInterceptor: Send + Sync {
    fn intercept(&mut self, request: Request<()>) -> Result<Request<()>, Status>;
    fn clone_box(&self) -> Box<dyn DynInterceptor>;
}

impl<F: Interceptor + Clone + Send + Sync + 'static> DynInterceptor for F {
    fn intercept(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.call(request)
    }

    fn clone_box(&self) -> Box<dyn DynInterceptor> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn DynInterceptor> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl Client {
    /// The typed path of a client of `service` (its methods `methods`, as the generated code
    /// lists them) on `transport`: a route if the transport is an in-process [`Channel`] (or
    /// [`AnyChannel::Local`]) with a matching typed entry for the service, else none.
    pub fn new<T: 'static>(transport: &T, service: &'static str, methods: &'static [Method]) -> Client {
        Client {
            route: local_channel(transport).and_then(|channel| Route::find(channel, service, methods)),
            interceptor: None,
            max_decoding: TONIC_MAX_DECODING,
            max_encoding: TONIC_MAX_ENCODING,
        }
    }

    /// Runs `interceptor` on every typed call's request, as tonic's client interceptor does on
    /// the encoded path.
    pub fn with_interceptor<F: Interceptor + Clone + Send + Sync + 'static>(
        mut self,
        interceptor: F,
    ) -> Client {
        self.interceptor = Some(Box::new(interceptor));
        self
    }

    /// The client's decoding limit on responses (tonic's `max_decoding_message_size`).
    pub fn max_decoding_message_size(mut self, limit: usize) -> Client {
        self.max_decoding = limit;
        self
    }

    /// The client's encoding limit on requests (tonic's `max_encoding_message_size`).
    pub fn max_encoding_message_size(mut self, limit: usize) -> Client {
        self.max_encoding = limit;
        self
    }

    /// Whether this client has a typed route (some or all of its methods take the typed path).
    pub fn is_typed(&self) -> bool {
        self.route.is_some()
    }

    /// The entry's index of the client's method `method`, if it has a typed route.
    fn index(&self, method: usize, kind: Kind) -> Option<usize> {
        let route = self.route.as_ref()?;
        let mine = route.methods.get(method).filter(|m| m.kind == kind)?;
        if route.exact {
            return Some(method);
        }
        route.entry.dispatch().methods().iter().position(|theirs| theirs.matches(mine))
    }

    /// Starts the unary method `method` (the client's index), or hands the request back.
    pub fn unary<M, R>(&mut self, method: usize, request: Request<M>) -> Result<UnaryFuture<R>, Request<M>>
    where
        M: Message + 'static,
        R: Message + 'static,
    {
        let Some(index) = self.index(method, Kind::Unary) else { return Err(request) };
        Ok(UnaryFuture::start(self.begin(method, index, request, None)))
    }

    /// Starts the server-streaming method `method`, or hands the request back.
    pub fn server_streaming<M, R>(
        &mut self,
        method: usize,
        request: Request<M>,
    ) -> Result<StreamFuture<R>, Request<M>>
    where
        M: Message + 'static,
        R: Message + 'static,
    {
        let Some(index) = self.index(method, Kind::ServerStreaming) else { return Err(request) };
        Ok(StreamFuture::start(self.begin(method, index, request, None)))
    }

    /// Starts the client-streaming method `method`, or hands the request back.
    pub fn client_streaming<M, R, S>(
        &mut self,
        method: usize,
        request: Request<S>,
    ) -> Result<UnaryFuture<R>, Request<S>>
    where
        M: Message + 'static,
        R: Message + 'static,
        S: Stream<Item = M> + Send + 'static,
    {
        let Some(index) = self.index(method, Kind::ClientStreaming) else { return Err(request) };
        let request = request.map(|stream| RequestStream { stream: Box::pin(stream) });
        Ok(UnaryFuture::start(self.begin(method, index, request, Some(Arc::default()))))
    }

    /// Starts the bidirectional streaming method `method`, or hands the request back.
    pub fn streaming<M, R, S>(
        &mut self,
        method: usize,
        request: Request<S>,
    ) -> Result<StreamFuture<R>, Request<S>>
    where
        M: Message + 'static,
        R: Message + 'static,
        S: Stream<Item = M> + Send + 'static,
    {
        let Some(index) = self.index(method, Kind::Streaming) else { return Err(request) };
        let request = request.map(|stream| RequestStream { stream: Box::pin(stream) });
        Ok(StreamFuture::start(self.begin(method, index, request, Some(Arc::default()))))
    }

    /// Starts a call with a route: the client's interceptor, then the server's side, here on
    /// a worker, else in a pump task.
    fn begin<X: Send + 'static>(
        &mut self,
        method: usize,
        index: usize,
        request: Request<X>,
        upload: Option<Arc<CallState>>,
    ) -> Begun<X> {
        let Client { route, interceptor, max_decoding, max_encoding } = self;
        let route = route.as_ref().expect("typed calls start only with a route");
        let request = match interceptor {
            Some(interceptor) => match intercept(&mut **interceptor, request) {
                Ok(request) => request,
                Err(status) => return Begun::Failed(status),
            },
            None => request,
        };
        let (metadata, mut extensions, message) = request.into_parts();
        extensions.insert(GrpcMethod::new(route.service, route.methods[method].name));
        let inner = &route.channel.inner;
        let limits = TypedLimits {
            client_encoding: *max_encoding,
            channel_request: inner.max_request,
            server_decoding: route.entry.max_decoding,
            server_encoding: route.entry.max_encoding,
            channel_response: inner.max_response,
            client_decoding: *max_decoding,
        };
        let deadline = deadline_of(metadata.as_ref());
        let prepared = Prepared { index, metadata, extensions, message, limits, deadline, upload };
        let live = LiveCall::new(&inner.live);
        if spindle::Handle::on_worker() {
            // On a worker: the handler runs right here, in the caller's call.
            return match prepared.dispatch(&route.entry, Some(live)) {
                Ok(driver) => Begun::Direct(driver, limits),
                Err(status) => Begun::Failed(status),
            };
        }
        match &inner.handle {
            Some(handle) => {
                let entry = route.entry.clone();
                Begun::Outside(Box::new(Outside { prepared, entry, handle: handle.clone(), live }))
            }
            None => Begun::Failed(no_runtime()),
        }
    }
}

/// tonic's client interceptor on a typed request (its metadata and extensions).
fn intercept<X>(interceptor: &mut dyn DynInterceptor, request: Request<X>) -> Result<Request<X>, Status> {
    let (metadata, extensions, message) = request.into_parts();
    let (metadata, extensions, ()) =
        interceptor.intercept(Request::from_parts(metadata, extensions, ()))?.into_parts();
    Ok(Request::from_parts(metadata, extensions, message))
}

/// A call as [`Client::begin`] left it.
enum Begun<X> {
    Failed(Status),
    Direct(Driver, TypedLimits),
    /// Boxed: the common variant stays small (the pump's spawn allocates anyway).
    Outside(Box<Outside<X>>),
}

/// A call to start in a pump task.
struct Outside<X> {
    prepared: Prepared<X>,
    entry: Entry,
    handle: spindle::Handle,
    live: LiveCall,
}

/// The future of a typed call with a unary response.
#[must_use = "futures do nothing unless polled"]
pub struct UnaryFuture<R> {
    inner: UnaryInner<R>,
}

enum UnaryInner<R> {
    Ready(Option<Status>),
    Direct(Driver, TypedLimits),
    Pumped(pump::UnaryClient<R>),
}

impl<R: Message + 'static> UnaryFuture<R> {
    fn start<X: Send + 'static>(begun: Begun<X>) -> UnaryFuture<R> {
        let inner = match begun {
            Begun::Failed(status) => UnaryInner::Ready(Some(status)),
            Begun::Direct(driver, limits) => UnaryInner::Direct(driver, limits),
            Begun::Outside(outside) => {
                let Outside { prepared, entry, handle, live } = *outside;
                match pump::unary::<X, R>(&handle, prepared, entry, live) {
                    Ok(client) => UnaryInner::Pumped(client),
                    Err(status) => UnaryInner::Ready(Some(status)),
                }
            }
        };
        UnaryFuture { inner }
    }
}

impl<R: Message + 'static> Future for UnaryFuture<R> {
    type Output = Result<Response<R>, Status>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            UnaryInner::Ready(status) => {
                Poll::Ready(Err(status.take().expect("spindle-grpc typed call polled after completion")))
            }
            UnaryInner::Direct(driver, limits) => poll_unary(driver, limits, cx),
            UnaryInner::Pumped(client) => Pin::new(client).poll(cx),
        }
    }
}

impl<R> std::fmt::Debug for UnaryFuture<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::typed::UnaryFuture")
    }
}

/// The future of a typed call with a streaming response: the response's head, then a
/// [`Streaming`] of its messages.
#[must_use = "futures do nothing unless polled"]
pub struct StreamFuture<R> {
    inner: StreamInner<R>,
}

enum StreamInner<R> {
    Ready(Option<Status>),
    Direct(Option<(Driver, TypedLimits)>),
    Pumped(pump::HeadClient<R>),
}

impl<R: Message + 'static> StreamFuture<R> {
    fn start<X: Send + 'static>(begun: Begun<X>) -> StreamFuture<R> {
        let inner = match begun {
            Begun::Failed(status) => StreamInner::Ready(Some(status)),
            Begun::Direct(driver, limits) => StreamInner::Direct(Some((driver, limits))),
            Begun::Outside(outside) => {
                let Outside { prepared, entry, handle, live } = *outside;
                match pump::streaming::<X, R>(&handle, prepared, entry, live) {
                    Ok(client) => StreamInner::Pumped(client),
                    Err(status) => StreamInner::Ready(Some(status)),
                }
            }
        };
        StreamFuture { inner }
    }
}

impl<R: Message + 'static> Future for StreamFuture<R> {
    type Output = Result<Response<Streaming<R>>, Status>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        const DONE: &str = "spindle-grpc typed call polled after completion";
        match &mut self.inner {
            StreamInner::Ready(status) => Poll::Ready(Err(status.take().expect(DONE))),
            StreamInner::Direct(call) => {
                let (driver, _) = call.as_mut().expect(DONE);
                let head = ready!(driver.poll_head(cx, &mut None::<R>));
                let (driver, limits) = call.take().expect(DONE);
                Poll::Ready(head.map(|head| {
                    Response::from_parts(head.metadata, Streaming::direct(driver, limits), head.extensions)
                }))
            }
            StreamInner::Pumped(client) => {
                Pin::new(client).poll(cx).map(|head| head.map(|response| response.map(Streaming::pumped)))
            }
        }
    }
}

impl<R> std::fmt::Debug for StreamFuture<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::typed::StreamFuture")
    }
}
