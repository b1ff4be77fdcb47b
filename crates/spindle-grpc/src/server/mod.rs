//! The network server: the services of a [`Channel`](crate::Channel) over HTTP/2 on spindle's TCP and Unix
//! sockets, with hyper's HTTP/2 server driven by spindle (hyper's executor and timer from
//! `spindle::hyper_rt`, spindle sockets as hyper's I/O).
//!
//! One spindle task accepts; each connection is one spindle task driving hyper's connection
//! future (after the TLS handshake, with `Server::tls`: module `tls`); hyper runs each
//! stream (call) in a task of its own, which polls the channel's
//! call: the handler, its deadline, size limits and panic isolation are the in-process
//! channel's (module `channel`), so the semantics are the same in process and over the network.
//! A request that is not gRPC (its content type, `grpc-timeout` or method) is refused before
//! it reaches the channel (module `admit`).
//!
//! # Invariants
//!
//! - **A stream owns its call.** The handler lives in the response future, then the response
//!   body, that hyper's stream task holds. A reset stream or a lost connection makes hyper drop
//!   them, which drops the handler and marks the call cancelled (a request body still read
//!   elsewhere fails with `CANCELLED`, module `channel::call_state`).
//! - **Counted while alive.** [`ServerStats::connections`] counts connection tasks alive,
//!   [`ServerStats::calls`] the calls whose response future or body hyper still holds; each is
//!   incremented when created and decremented by a guard's drop, so that both are back to
//!   zero once the server has nothing left.
//! - **Shutdown drains, then cuts.** After [`Serving::shutdown`] the accept task stops at once;
//!   each connection sends GOAWAY (hyper's graceful shutdown), lets its in-flight calls finish,
//!   and is dropped (with its calls) at the drain deadline if they have not.
//! - **Idle connections close.** A connection with no call for the idle timeout is shut down
//!   gracefully (GOAWAY); the check runs once per timeout period, so an idle connection closes
//!   between one and two periods after its last call ended. One more period later it is
//!   dropped if it has not ended (a client that never sent the HTTP/2 preface cannot take a
//!   GOAWAY).
//!
//! The files: `builder` ([`Server`]: the settings, the accept task), `serving` ([`Serving`]:
//! the counters and the shutdown), `conn` (one connection and its service), `admit` (the
//! requests refused before the channel), `layer` (tower layers over the channel), `trace`
//! (the call spans of feature `tracing`).

mod admit;
mod builder;
mod conn;
mod layer;
mod serving;
mod trace;

pub use builder::Server;
pub use serving::{ServerStats, Serving, ShutdownReport};
