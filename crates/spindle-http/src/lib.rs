//! spindle-http: an HTTP/1.1 and HTTP/2 server and client on spindle fibers, with hyper 1.x
//! as the protocol engine and a path of its own for plain HTTP/1.1 requests
//! ([`Builder::http1_fast_path`]: requests without a body, or with a small one that came
//! with the head, on a plain socket; the first request that is anything else hands the
//! connection to hyper).
//!
//! Each connection is a `Send` async task, which drives the connection and which
//! any worker may poll between requests (an idle worker takes over the connections of a busy
//! or preempted one). A handler is either a plain blocking function, called on a fiber of its
//! own per request, started at once inside the task's poll (so it may use spindle's blocking
//! channels, `sleep` and sockets: they park that fiber, not the worker or the connection), or
//! an async function whose `Send` future the connection's task polls.
//!
//! ```no_run
//! use spindle_http::{Body, Request, Response, Server};
//!
//! let server = Server::builder()
//!     .serve("127.0.0.1:8080", |_req: Request<Body>| Response::new("Hello, World!"))
//!     .unwrap();
//! server.wait(); // until a ShutdownHandle triggers the shutdown
//! ```
//!
//! What hyper does on the wire: keep-alive, pipelining (with [`Builder::pipeline_flush`],
//! the responses of a batch of pipelined requests go out in one write), chunked request and response
//! bodies, `400 Bad Request` for a malformed request, `431 Request Header Fields Too Large`
//! when the header exceeds [`Builder::max_buf_size`] or [`Builder::max_headers`]. A slow
//! client that does not finish its header within [`Builder::header_read_timeout`] is
//! disconnected (hyper sends no response then). A handler that panics answers `500`.
//!
//! HTTP/2 is served on the same port (h2c by prior knowledge: a connection that opens with
//! the HTTP/2 preface), with the same handlers and limits; [`Builder::http2`] turns it off.
//! Under HTTP/2 each stream is a task of its own, in which its blocking handler's fiber
//! starts (or its async handler's future is polled).
//!
//! [`Builder::serve_service`] serves a tower service instead of a handler: an axum `Router`,
//! or any tower stack (module `tower`).
//!
//! [`Client`] is the HTTP client (HTTP/1.1, HTTP/2, a connection pool), blocking style in
//! fibers and futures in tasks, following redirects ([`redirect::Policy`]); the `tls`
//! feature adds HTTPS to both sides (`TlsConfig`).
//!
//! [`Builder::workers`] runs the server on one spindle runtime with that many worker threads
//! (default: one per CPU, as `spindle::Runtime::new()`); [`Builder::accept`] picks how
//! connections are spread over them ([`Accept`]).
//!
//! The source has three rooms: `server/` (the accept loops, connections, spindle-http's own
//! HTTP/1 path, handlers, the graceful shutdown), `client/` (the client and its pool), and
//! `transport/` (what both sides use: the body type, the request body's limits, the socket
//! under hyper with its TLS streams, hyper's timer). Neither side imports the other; the
//! executors hyper spawns with, the system's root certificates and the shutdown's drain are
//! spindle's (`spindle::hyper_exec`, `spindle::native_roots`, `spindle::graceful`).

#![warn(missing_debug_implementations)]

mod client;
mod server;
mod transport;

/// This crate's README examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use client::error::{ClientError, ClientErrorKind};
pub use client::{redirect, Client, ClientBuilder};
pub use hyper::{header, Method, Request, Response, StatusCode, Uri, Version};
#[cfg(feature = "tls")]
pub use rustls;
pub use server::builder::Builder;
pub use server::config::Accept;
pub use server::running::{Server, ShutdownHandle, ShutdownReport};
#[cfg(feature = "tls")]
pub use server::tls::TlsConfig;
pub use transport::body::{Body, BoxError};
pub use transport::limits::{LimitError, MinRate};
pub use transport::timer::{HyperSleep, SpindleTimer};
