//! spindle-grpc: gRPC for [tonic] on spindle, in process ([`Channel`]) and over HTTP/2
//! ([`Server`], [`Endpoint`], [`RemoteChannel`]; [`BalancedChannel`] over several servers), or
//! either, chosen by URI ([`AnyChannel`]).
//!
//! A [`Channel`] holds tonic-generated servers (any `Service<http::Request<tonic::body::Body>>`
//! with a [`NamedService`](tonic::server::NamedService) name) and is itself the transport of
//! tonic-generated clients ([`tonic::client::GrpcService`]): `FooClient::new(channel)`. There
//! are no sockets and no HTTP/2: a call hands the client's `http::Request` (headers and the
//! body of encoded messages) to the server, and the server's `http::Response` (headers,
//! message frames, trailers) back. Serve the same channel over the network with [`Server`],
//! and call it from elsewhere through a [`RemoteChannel`] ([`Endpoint::connect`]): the same
//! client code runs in process and remote, with no tokio runtime (the crate README has the
//! network semantics). With the feature `tls`, both sides speak TLS (`Server::tls`, `https://`
//! endpoints trusting the system's root certificates or those of `Endpoint::tls`), mutual TLS
//! included.
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
//! [`BalancedBuilder`] has the settings. Calls the server never processed are retried on
//! another pick; a [`ServiceConfig`] adds retry policies ([`RetryPolicy`]) and a throttle;
//! servers whose calls keep failing are ejected for a while ([`OutlierEjection`]), and those
//! that report they are not serving (`grpc.health.v1`, `BalancedBuilder::health_check`) are
//! left out. With the feature `metrics`, calls are counted per method on both sides.
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

mod call_metrics;
mod channel;
mod client;
mod either;
mod limit;
mod lock;
mod path;
mod server;
mod status;
mod timeout;
#[cfg(feature = "tls")]
mod tls;
pub mod typed;
mod wire;

pub use call_metrics::MAX_METHODS as MAX_METHODS_WITH_METRICS;
/// The most response bytes buffered between a pump task and a caller outside the runtime
/// (plus the frame being produced).
pub use channel::pipe::BYTES as PIPE_BYTES;
/// The most response frames buffered between a pump task and a caller outside the runtime.
pub use channel::pipe::CAPACITY as PIPE_FRAMES;
pub use channel::{Channel, ResponseBody, ResponseFuture};
pub use client::{
    BalancedBuilder, BalancedChannel, BalancedFuture, Endpoint, LoadBalancing, OutlierEjection, RemoteBody,
    RemoteChannel, RemoteFuture, RetryPolicy, RetryThrottle, ServiceConfig, TargetName, DEFAULT_RETRY_BUFFER,
    DEFAULT_TARGET_PORT, TRANSPARENT_RETRIES,
};
pub use either::{AnyBody, AnyChannel, AnyFuture};
pub use limit::DEFAULT_MAX_MESSAGE_SIZE;
pub use server::{Server, ServerStats, Serving, ShutdownReport};
#[cfg(feature = "tls")]
pub use tls::{ClientTlsConfig, ServerTlsConfig};
