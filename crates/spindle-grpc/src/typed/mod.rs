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
//! The pieces: `entry` ([`TypedService`], [`Entry`], [`Dispatch`], the method table: what a
//! service registers), `handler` ([`Handler`], [`Head`]: the handler, type-erased),
//! [`Client`] (the client's side: route, limits, interceptor), `prepared` (a call ready for the
//! server's side), `driver` (the handler run in the caller's call, under the channel's
//! deadline, panic guard and cancellation), `response` (the unary response and the stream
//! driven from it), [`Call`] and the handler adapters (`dispatch`: the server's side, what the
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
//! - **One status per call**, decided as on the encoded path (module `channel::direct`'s "one
//!   status per call"): the handler's, or the channel's (`DEADLINE_EXCEEDED`, `INTERNAL` for a
//!   panic, `RESOURCE_EXHAUSTED` for a message above a limit); once the channel decides, the
//!   handler is dropped and never polled again.
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
pub(crate) mod entry;
mod handler;
mod intercept;
mod prepared;
mod pump;
mod response;
mod stream;
mod upload;

pub use client::{Client, StreamFuture, UnaryFuture};
pub use dispatch::Call;
pub use entry::{Dispatch, Entry, Kind, Method, TypedService};
pub use handler::{BoxHandler, Handler, Head};
pub use intercept::Intercepted;
pub use stream::Streaming;
