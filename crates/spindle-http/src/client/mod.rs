//! The HTTP client: HTTP/1.1 and HTTP/2 (prior knowledge for `http://`, ALPN for `https://`
//! with the `tls` feature) over spindle sockets, hyper's client `conn` API as the engine.
//!
//! ```no_run
//! # spindle::Runtime::new().unwrap().block_on(|| {
//! let client = spindle_http::Client::new();
//! // Blocking style, in a fiber: parks the fiber until the response head arrives.
//! let res = client.get("http://127.0.0.1:8080/").unwrap();
//! println!("{} {} bytes", res.status(), res.into_body().bytes().unwrap().len());
//! # });
//! ```
//!
//! `https://` (feature `tls`) trusts the system's root certificates unless the client was
//! given a TLS configuration of its own (`ClientBuilder::tls`,
//! `ClientBuilder::root_certificates_pem`): they are read once per process, at the first
//! connection that needs them, on spindle's blocking pool (module `roots`).
//!
//! From an async task use [`Client::send`] (a future). Bodies stream both ways with hyper's
//! backpressure: a request body is polled as the connection can take it, a response body is
//! read from the socket as the caller reads it. An HTTP/1.1 connection goes back to the pool
//! when its response body has been read to the end and hyper is ready for its next request
//! (a response body dropped early closes it; one that still sends the request body of a
//! server that answered before reading it waits for that first).
//!
//! Against broken servers (`tests/client_broken_server.rs`, `tests/client_stale_connections.rs`):
//! a server that says nothing, or stalls within the response head, ends in
//! [`ClientErrorKind::RequestTimeout`] (the request timeout covers up to the response head; a body
//! is read at the caller's pace, and a server that stalls within it ends the body with
//! [`ClientErrorKind::ReadTimeout`] once a wait for its data passes the read timeout); garbage, a
//! head larger than the 64 KiB read buffer (or over hyper's 100 headers), or a connection
//! closed or reset before the head, in [`ClientErrorKind::Protocol`]; a body cut short (closed or
//! reset before its Content-Length or last chunk) in an error from the body, and its
//! connection is not reused. 1xx responses before the final one are skipped (an endless
//! stream of them ends with the request timeout: an HTTP/1.1 connection's driver completes
//! at most 2 reads a poll, `connect::Capped`). A request that fails on a *reused* connection
//! the server had closed is sent again on another (at most 4 times), as browsers and Go's
//! client do: a request hyper gives back unsent (any method), or an idempotent one (GET,
//! HEAD, OPTIONS, TRACE, PUT, DELETE) whose body is held in memory (not a stream) when the
//! connection was closed or reset before a response head. Otherwise (a POST, a streamed
//! body, a new connection) the caller gets the `Protocol` error.
//!
//! Redirects (`301`, `302`, `303`, `307`, `308` with a `Location`) are followed, at most 10 a
//! request by default ([`ClientBuilder::redirect`]; module [`redirect`] has the rules).

mod body;
mod config;
mod connect;
pub(crate) mod error;
mod exchange;
mod follow;
mod key;
mod pool;
pub mod redirect;
mod retry;
#[cfg(feature = "tls")]
mod roots;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::{Request, Response, Uri};

use crate::client::config::ClientConfig;
use crate::client::error::{ClientError, ClientErrorKind};
use crate::client::exchange::{exchange, within, Inner};
use crate::client::retry::Kept;
use crate::transport::body::Body;

/// Client settings: 10 s to connect (TCP and TLS), 30 s for the response head, 30 s for each
/// wait for response body data, idle pooled connections closed after 90 s, at most 32 idle
/// and 256 open connections per host. A timeout of `Duration::MAX` means "no limit".
///
/// TLS (feature `tls`): without `ClientBuilder::tls` or
/// `ClientBuilder::root_certificates_pem`, `https://` trusts the system's root certificates,
/// found by rustls-native-certs: the PEM file in `SSL_CERT_FILE` and the directories in
/// `SSL_CERT_DIR` when either variable is set, else the distribution's bundle. They are read
/// once per process, at the first connection that needs them, on spindle's blocking pool (the
/// wait for it bounded by the connect timeout), and kept for every client. Files that could not
/// be read beside certificates that could are logged once (`warn`) and the rest is used; when
/// no certificate could be loaded, every such request fails with [`ClientErrorKind::Tls`], its message
/// naming `SSL_CERT_FILE` and `ClientBuilder::tls` as the fixes.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    config: ClientConfig,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder::new()
    }
}

impl ClientBuilder {
    pub fn new() -> ClientBuilder {
        ClientBuilder {
            config: ClientConfig {
                connect_timeout: Duration::from_secs(10),
                request_timeout: Some(Duration::from_secs(30)),
                read_timeout: Some(Duration::from_secs(30)),
                idle_timeout: Duration::from_secs(90),
                max_idle_per_host: 32,
                max_connections_per_host: 256,
                http2_prior_knowledge: false,
                max_buf_size: 64 * 1024,
                redirect: redirect::Policy::default(),
                #[cfg(feature = "tls")]
                tls: None,
            },
        }
    }

    /// Limit on resolving, connecting and the TLS handshake of a new connection (each), and on
    /// the wait for the first load of the system's root certificates.
    pub fn connect_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.connect_timeout = timeout;
        self
    }

    /// Limit from the call to the response head (waiting for a pooled connection included,
    /// and every redirect followed on the way to the final response; the body is read
    /// afterwards at the caller's pace, each wait for its data bounded by
    /// [`ClientBuilder::read_timeout`]). `None`: no limit.
    pub fn request_timeout(mut self, timeout: impl Into<Option<Duration>>) -> ClientBuilder {
        self.config.request_timeout = timeout.into();
        self
    }

    /// Limit on each wait for response body data (default 30 s): a server that sends the
    /// head, then nothing more (a stalled or hostile peer), ends the body with an error of
    /// kind [`ClientErrorKind::ReadTimeout`] after between one and two read timeouts of silence,
    /// instead of hanging the reader. It bounds the gaps, not the whole body: a slow body that
    /// keeps coming is read to its end. Streams with long quiet spells (server-sent events,
    /// long polls) want a longer one or `None` (no limit). Enforced when the body is read on a
    /// spindle worker (a fiber or a task).
    pub fn read_timeout(mut self, timeout: impl Into<Option<Duration>>) -> ClientBuilder {
        self.config.read_timeout = timeout.into();
        self
    }

    /// How long a pooled connection (HTTP/1.1, or the shared HTTP/2 one once its last stream
    /// ended) may stay idle before it is closed.
    pub fn idle_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.config.idle_timeout = timeout;
        self
    }

    /// Idle HTTP/1.1 connections kept per host (more are closed when they come back).
    pub fn max_idle_per_host(mut self, n: usize) -> ClientBuilder {
        self.config.max_idle_per_host = n;
        self
    }

    /// Open connections per host; a request that finds none free waits for one (within
    /// its request timeout).
    pub fn max_connections_per_host(mut self, n: usize) -> ClientBuilder {
        self.config.max_connections_per_host = n.max(1);
        self
    }

    /// Speak HTTP/2 to `http://` URLs without negotiation (h2c prior knowledge): one
    /// multiplexed connection per host.
    pub fn http2_prior_knowledge(mut self, on: bool) -> ClientBuilder {
        self.config.http2_prior_knowledge = on;
        self
    }

    /// Which redirects are followed: [`redirect::Policy::limited`]`(10)` by default,
    /// [`redirect::Policy::none`] to get every 3xx response as it is. The request timeout
    /// covers the whole chain; module [`redirect`] has the rules (method and body, headers
    /// dropped on the way to another host, the final URL as [`redirect::ResponseUrl`]).
    pub fn redirect(mut self, policy: redirect::Policy) -> ClientBuilder {
        self.config.redirect = policy;
        self
    }

    /// TLS for `https://` URLs (feature `tls`), instead of the system's roots. ALPN is set to
    /// `h2`, `http/1.1` if the configuration leaves it empty.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: Arc<rustls::ClientConfig>) -> ClientBuilder {
        let mut config = Arc::unwrap_or_clone(config);
        if config.alpn_protocols.is_empty() {
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        }
        self.config.tls = Some(Arc::new(config));
        self
    }

    /// TLS trusting the certificates in `pem` (feature `tls`; ring provider, ALPN `h2`,
    /// `http/1.1`) and no others: they replace the system's roots.
    ///
    /// # Errors
    ///
    /// `InvalidData` when `pem` holds no usable certificate.
    #[cfg(feature = "tls")]
    pub fn root_certificates_pem(self, pem: &[u8]) -> std::io::Result<ClientBuilder> {
        use rustls::pki_types::pem::PemObject;
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| invalid(format!("reading the root certificate PEM: {e}")))?;
            roots.add(cert).map_err(|e| invalid(format!("root certificate refused: {e}")))?;
        }
        if roots.is_empty() {
            return Err(invalid("no CERTIFICATE block in the root certificate PEM".to_owned()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS versions: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(self.tls(Arc::new(config)))
    }

    pub fn build(self) -> Client {
        Client { inner: Arc::new(Inner { config: self.config, pool: Arc::default() }) }
    }
}

/// An HTTP client with a connection pool; cheap to clone (clones share the pool). Use it
/// inside a spindle runtime: from fibers with [`Client::request`] / [`Client::get`], from
/// async tasks with [`Client::send`]. With the `tls` feature, `https://` URLs trust the
/// system's root certificates unless the builder was given a TLS configuration
/// ([`ClientBuilder`] says how they are found).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

impl Default for Client {
    fn default() -> Self {
        Client::new()
    }
}

impl Client {
    /// A client with the default settings (`https://`, feature `tls`: the system's roots).
    pub fn new() -> Client {
        ClientBuilder::new().build()
    }

    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// How many hosts the connection pool keeps a record for: the hosts with a connection open
    /// or being opened. For tests: not part of the API.
    #[doc(hidden)]
    pub fn pooled_hosts(&self) -> usize {
        self.inner.pool.hosts()
    }

    /// How many connections the pool counts open or being opened, over all hosts. For tests:
    /// not part of the API.
    #[doc(hidden)]
    pub fn pooled_connections(&self) -> usize {
        self.inner.pool.open_connections()
    }

    /// `GET url`, blocking style (see [`Client::request`]).
    pub fn get(&self, url: &str) -> Result<Response<Body>, ClientError> {
        let uri: Uri = url
            .parse()
            .map_err(|e| ClientError::new(ClientErrorKind::InvalidUrl, format!("{url:?}: {e}")))?;
        self.request(Request::get(uri).body(Body::empty()).expect("a GET with a parsed URI"))
    }

    /// Sends `req` (an absolute URL) and returns the response once its head has arrived
    /// (following redirects as the builder's [`redirect::Policy`] says), blocking style: in a
    /// fiber, the fiber parks meanwhile. Read the body with [`Body::bytes`] or as a stream.
    pub fn request<B: Into<Body>>(&self, req: Request<B>) -> Result<Response<Body>, ClientError> {
        spindle::task::block_on(self.send(req))
    }

    /// Sends `req` (an absolute URL); the future resolves to the response once its head has
    /// arrived (following redirects as the builder's [`redirect::Policy`] says). For async
    /// tasks: the future is `Send`, so a `spindle::task::spawn_async` task that any worker may
    /// poll can await it. A connection it opens stays with the worker that
    /// opened it (its driver is a task pinned there); requests from other workers reach it
    /// through hyper's channel.
    pub fn send<B: Into<Body>>(
        &self,
        req: Request<B>,
    ) -> impl Future<Output = Result<Response<Body>, ClientError>> + 'static {
        let inner = self.inner.clone();
        let req = req.map(Into::into);
        async move {
            if spindle::Handle::current().is_none() {
                return Err(ClientError::new(
                    ClientErrorKind::NoRuntime,
                    "spindle_http::Client used outside a spindle runtime".into(),
                ));
            }
            // The request timeout written out (as `spindle::time::timeout` polls it: the
            // exchange first), so that its timer can go on into the body (module `body`); it
            // covers the redirects followed, if any. The exchange is pinned here, in this
            // future, and the redirect chain (rare) boxed: each layer of future around the
            // exchange was one more move of its whole state (module `follow`).
            let limit = inner.config.request_timeout;
            let mut timer = limit.map(spindle::time::sleep_future);
            // Kept for a redirect's next hop, and lent to the exchange's retries (one copy).
            let kept = inner.config.redirect.limit.map(|_| Kept::of(&req));
            let res = {
                let mut exchange = std::pin::pin!(exchange(&inner, req, kept.as_ref()));
                within(exchange.as_mut(), &mut timer, limit).await??
            };
            let res = match (inner.config.redirect.limit, kept) {
                (Some(max), Some(kept)) if follow::is_redirect(&res) => {
                    let mut chain = Box::pin(follow::chain(&inner, max, kept, res));
                    within(chain.as_mut(), &mut timer, limit).await??
                }
                _ => res,
            };
            Ok(res.map(|body| body.into_body(timer.zip(limit))))
        }
    }
}
