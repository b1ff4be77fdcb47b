//! The typed fast path: in-process calls that move the message and never encode it.
//!
//! `spindle-grpc-build` generates, beside tonic's client and server for each service, a
//! typed dispatch (a [`Dispatch`] over the service's trait, inside tonic's server module) and
//! a typed client (`foo_typed::FooClient`, tonic's client API with this fast path inside). A
//! server registered with [`crate::Channel::add_typed_service`] brings its typed [`Entry`];
//! a typed client built on that channel ([`Client::new`] finds the entry, once) calls the
//! handler with the client's `tonic::Request<M>` moved into it and gets its
//! `tonic::Response<R>` (or its stream's messages) moved back: no encoding, no decoding, no
//! `http::Request` or `Response`, no header maps, no body frames. Everything else takes the
//! encoded path through tonic's own client, unchanged: a remote transport, a service
//! registered with `add_service` (wrapped in tower layers that need bytes, say), a service
//! whose typed methods differ from the client's.
//!
//! The pieces: [`Client`] (the client's side: route, limits, interceptor), `driver` (the
//! handler run in the caller's call, under the channel's deadline, panic guard and
//! cancellation), [`Call`] and the handler adapters (`dispatch`: the server's side, what the
//! generated code calls), `upload` (a client's request stream handed to the handler as tonic's
//! `Streaming<M>`), [`Streaming`] (the client's response stream), `pump` (calls from outside
//! any worker), [`Intercepted`] (tonic interceptors on the typed path).
//!
//! # Invariants
//!
//! - **Types are checked once, at the route.** A client takes the typed path for a method only
//!   if the registered entry lists it with the same name, kind and request and response types
//!   ([`Method`], compared by `TypeId`). The `&mut dyn Any` slots through which messages cross
//!   the type-erased [`Dispatch`] and [`Handler`] then always downcast; if one did not, the
//!   call would end with `INTERNAL`, never carry a wrong message.
//! - **The handler lives in the call.** It is owned by the client's future, then by its
//!   response stream (or by the pump task that stands for them): dropping either drops the
//!   handler at once. A request stream the handler still reads elsewhere then fails with
//!   `CANCELLED` (module `upload`).
//! - **One status per call**, decided as on the encoded path (module `call`'s "one status per call"): the
//!   handler's, or the channel's (`DEADLINE_EXCEEDED`, `INTERNAL` for a panic,
//!   `RESOURCE_EXHAUSTED` for a message above a limit); once the channel decides, the handler
//!   is dropped and never polled again.
//! - **Limits on `encoded_len()`.** Each message is measured as the encoded path would frame it
//!   and checked against the same limits in the same order, with the same statuses
//!   (`limit::TypedLimits`): the client's encoding limit, the channel's limits, the server's
//!   codec limits, the client's decoding limit.
//! - **Pulled, not pushed.** From a worker, a stream's next message is produced only when the
//!   reader asks for it (the handler's stream is polled by the client's, the client's request
//!   stream by the handler's): a slow reader bounds the writer with no buffer at all. From
//!   outside a worker the pump holds at most [`crate::PIPE_FRAMES`] messages.

mod client;
mod dispatch;
mod driver;
mod intercept;
mod pump;
mod stream;
mod upload;

use std::any::{Any, TypeId};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::metadata::MetadataMap;
use tonic::{Extensions, Status};

pub use client::{Client, StreamFuture, UnaryFuture};
pub use dispatch::Call;
pub use intercept::Intercepted;
pub use stream::Streaming;

use crate::limit::{TONIC_MAX_DECODING, TONIC_MAX_ENCODING};

/// A server with a typed entry point: tonic's generated servers, with the code
/// `spindle-grpc-build` adds to them, and wrappers that keep the typed path ([`Intercepted`]).
/// Register one with [`crate::Channel::add_typed_service`].
pub trait TypedService {
    /// The typed entry point of this server, with its codec limits.
    fn typed_entry(&self) -> Entry;
}

/// The kind of a method: which sides stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One request, one response.
    Unary,
    /// One request, a stream of responses.
    ServerStreaming,
    /// A stream of requests, one response.
    ClientStreaming,
    /// Streams both ways.
    Streaming,
}

/// One method of a service, as the generated client and server both list it: the route
/// compares the two lists, so that messages cross only between matching types.
#[derive(Debug, Clone, Copy)]
pub struct Method {
    /// The method's name in the proto file (`UnaryCall`).
    pub name: &'static str,
    /// Which sides stream.
    pub kind: Kind,
    /// `TypeId::of` the request message.
    pub request: fn() -> TypeId,
    /// `TypeId::of` the response message.
    pub response: fn() -> TypeId,
}

impl Method {
    /// A method entry (for generated code).
    pub const fn new(
        name: &'static str,
        kind: Kind,
        request: fn() -> TypeId,
        response: fn() -> TypeId,
    ) -> Method {
        Method { name, kind, request, response }
    }

    /// The same name, kind and message types.
    pub fn matches(&self, other: &Method) -> bool {
        self.name == other.name
            && self.kind == other.kind
            && (self.request)() == (other.request)()
            && (self.response)() == (other.response)()
    }
}

/// A service's typed entry point, type-erased: the generated code implements it over the
/// service's trait; wrappers ([`Intercepted`]) implement it around another.
pub trait Dispatch: Send + Sync + 'static {
    /// The service's methods, in the order of their indices.
    fn methods(&self) -> &'static [Method];

    /// Starts the call of method `method` (an index into [`Dispatch::methods`]): the
    /// generated code hands `call` to the adapter of the method's kind ([`Call::unary`] and
    /// the others), which moves the request into the service's trait method. `Err` ends the
    /// call with that status before any handler runs.
    fn call(&self, method: usize, call: Call<'_>) -> Result<BoxHandler, Status>;
}

/// A started call's handler, type-erased: the service's future, then its response stream.
/// Messages cross through `&mut dyn Any` slots of type `&mut Option<R>`, `R` the response
/// message type (the module's invariant on types).
pub trait Handler: Send {
    /// Polls the handler to its response head. For a unary response (unary and client
    /// streaming methods) the response message is written into `message`.
    fn poll_head(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        message: &mut dyn Any,
    ) -> Poll<Result<Head, Status>>;

    /// Polls a streaming response for its next message, written into `message`; `None` at the
    /// end of the stream. Unary responses have none.
    fn poll_next(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _message: &mut dyn Any,
    ) -> Poll<Option<Result<(), Status>>> {
        Poll::Ready(None)
    }

    /// Called once when the handler ends the call itself (not when the channel ends it: a
    /// deadline, a panic, a limit, the client's drop), with the trailing metadata: empty for a
    /// stream that ended, the status's metadata for an error (before or after the head), the
    /// response's metadata for a unary response (tonic merges a unary call's trailers into
    /// it). Wrappers add theirs here; the generated handlers have none.
    fn trailers(self: Pin<&mut Self>, _trailers: &mut MetadataMap) {}
}

/// A boxed [`Handler`].
pub type BoxHandler = Pin<Box<dyn Handler>>;

/// A response's head: what tonic's `Response` carries besides the message.
#[derive(Debug, Default)]
pub struct Head {
    /// Response metadata (headers).
    pub metadata: MetadataMap,
    /// Response extensions (they cross in process, as on the encoded channel).
    pub extensions: Extensions,
}

/// A registered typed entry: the dispatch and the server's codec limits, which the typed path
/// applies as tonic's codec would.
#[derive(Clone)]
pub struct Entry {
    dispatch: Arc<dyn Dispatch>,
    max_decoding: usize,
    max_encoding: usize,
}

impl Entry {
    /// An entry for `dispatch`, with the server's `max_decoding_message_size` and
    /// `max_encoding_message_size` (tonic's defaults, 4 MiB and none, when `None`).
    pub fn new(
        dispatch: impl Dispatch,
        max_decoding_message_size: Option<usize>,
        max_encoding_message_size: Option<usize>,
    ) -> Entry {
        Entry {
            dispatch: Arc::new(dispatch),
            max_decoding: max_decoding_message_size.unwrap_or(TONIC_MAX_DECODING),
            max_encoding: max_encoding_message_size.unwrap_or(TONIC_MAX_ENCODING),
        }
    }

    /// The same entry with its dispatch wrapped by `wrap` (an interceptor, a middleware).
    pub fn map<D: Dispatch>(self, wrap: impl FnOnce(Arc<dyn Dispatch>) -> D) -> Entry {
        Entry { dispatch: Arc::new(wrap(self.dispatch)), ..self }
    }

    pub(crate) fn dispatch(&self) -> &dyn Dispatch {
        &*self.dispatch
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let methods: Vec<&str> = self.dispatch.methods().iter().map(|m| m.name).collect();
        f.debug_struct("Entry")
            .field("methods", &methods)
            .field("max_decoding_message_size", &self.max_decoding)
            .field("max_encoding_message_size", &self.max_encoding)
            .finish()
    }
}

/// The status of a slot that does not hold the type the route promised (never, by the
/// module's invariant on types; a status rather than a panic all the same).
pub(crate) fn mismatch() -> Status {
    Status::internal("spindle-grpc: typed call with mismatched message types")
}

/// Moves `message` into `slot`, an `&mut Option<R>`.
pub(crate) fn put<R: 'static>(slot: &mut dyn Any, message: R) -> Result<(), Status> {
    match slot.downcast_mut::<Option<R>>() {
        Some(slot) => {
            *slot = Some(message);
            Ok(())
        }
        None => Err(mismatch()),
    }
}
