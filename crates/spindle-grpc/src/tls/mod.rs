//! gRPC over TLS (feature `tls`): the server's and the client's TLS settings, the handshakes,
//! and the TLS stream as hyper's I/O.
//!
//! rustls is driven through `futures-rustls` over spindle's `TcpStream` (which implements the
//! futures-io traits), as spindle-http does: the handshake and every record are plain futures
//! polled by the connection's task (the server) or the manager fiber (the client's
//! handshake), so no TLS state machine is written here.
//!
//! # Invariants
//!
//! - **HTTP/2 by ALPN.** Both sides offer only `h2` unless the caller's own rustls
//!   configuration says otherwise; a peer that agrees on another protocol is refused (gRPC is
//!   HTTP/2 only). A peer that sends no ALPN at all is served HTTP/2, as grpc-go's server does.
//! - **Bounded handshakes.** The server's handshake runs under
//!   [`ServerTlsConfig::handshake_timeout`] and the server's shutdown: a client that never
//!   finishes it is disconnected and its connection task ends. The client's runs within the
//!   endpoint's connect timeout. A failed handshake ends the connection (server: a `debug`
//!   log line; client: the attempt fails with the TLS error, the channel is `UNAVAILABLE`
//!   with it and retries after its backoff).
//! - **Bounded buffers.** rustls's plaintext send buffer keeps its default limit (64 KiB), so
//!   a peer that stops reading stalls the connection exactly as on a plain socket, and
//!   HTTP/2's flow control bounds the rest.
//! - **The client's authorities** are given ([`ClientTlsConfig::from_ca_pem`]...), or the
//!   system's ([`ClientTlsConfig::native_roots`], what an `https://` endpoint without
//!   `Endpoint::tls` uses), loaded once per process off the workers (module `roots`).
//!
//! The files: `config` (the settings), `handshake` (the server's and the client's), `io`
//! (the TLS stream as hyper's I/O), `roots` (the system's roots), `provider` (the crypto
//! provider).

mod config;
mod handshake;
mod io;
mod provider;
mod roots;

pub use config::{ClientTlsConfig, ServerTlsConfig};
pub(crate) use handshake::{accept, connect, ClientStream};
pub(crate) use io::TlsIo;
