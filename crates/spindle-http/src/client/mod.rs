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
mod connect;
mod pool;
pub mod redirect;
mod retry;
#[cfg(feature = "tls")]
mod roots;

use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use hyper::header::{HeaderValue, HOST};
use hyper::{Request, Response, Uri, Version};

use crate::transport::body::{Body, BoxError};
use body::{GiveBack, PooledBody};
use pool::{Checkout, Conn, IdleFlag, Lease, Pool};
use retry::{failed, Kept, Replay, MAX_RETRIES};

/// Where a pooled connection goes: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) https: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port) // an IPv6 address
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

impl Key {
    fn from_uri(uri: &Uri) -> Result<Key, ClientError> {
        let bad = |why: &str| ClientError::new(ClientErrorKind::InvalidUrl, format!("{uri}: {why}"));
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => return Err(bad(&format!("unsupported scheme {other:?}"))),
            None => return Err(bad("an absolute URL (http:// or https://) is needed")),
        };
        let host = uri.host().ok_or_else(|| bad("no host"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Key { https, host, port })
    }
}

/// What went wrong with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientErrorKind {
    /// The URL is not an absolute `http://` or `https://` URL with a host; or a redirect's
    /// `Location` is not an `http://` or `https://` URL (the message names both).
    InvalidUrl,
    /// The name did not resolve or the TCP connect failed.
    Connect,
    /// The TCP connect, the TLS handshake, or the first load of the system's root
    /// certificates took longer than the connect timeout.
    ConnectTimeout,
    /// TLS: no configuration (no system root certificate found, or no `tls` feature), a bad
    /// server name, or the handshake failed (certificate...).
    Tls,
    /// No response head within the request timeout.
    RequestTimeout,
    /// No data of the response body within the read timeout (an error of the body; the
    /// connection is not reused).
    ReadTimeout,
    /// The HTTP exchange failed (connection closed, protocol error).
    Protocol,
    /// Called outside a spindle runtime (the client's connections run on its workers).
    NoRuntime,
    /// A redirect past the limit of the client's [`redirect::Policy`] (a redirect loop ends
    /// here); the message names the limit and the last URLs.
    TooManyRedirects,
}

/// A client error: its kind, a message naming the target, and the underlying error if any.
#[derive(Debug)]
pub struct ClientError {
    kind: ClientErrorKind,
    message: String,
    source: Option<BoxError>,
}

impl ClientError {
    pub(crate) fn new(kind: ClientErrorKind, message: String) -> ClientError {
        ClientError { kind, message, source: None }
    }

    pub(crate) fn with_source(
        kind: ClientErrorKind,
        message: String,
        source: impl Into<BoxError>,
    ) -> ClientError {
        ClientError { kind, message, source: Some(source.into()) }
    }

    pub fn kind(&self) -> ClientErrorKind {
        self.kind
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) read_timeout: Option<Duration>,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_idle_per_host: usize,
    pub(crate) max_connections_per_host: usize,
    pub(crate) http2_prior_knowledge: bool,
    pub(crate) max_buf_size: usize,
    pub(crate) redirect: redirect::Policy,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
}

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

struct Inner {
    config: ClientConfig,
    pool: Arc<Pool>,
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
            // exchange was one more move of its ~1.1 KB (module `redirect`).
            let limit = inner.config.request_timeout;
            let mut timer = limit.map(spindle::time::sleep_future);
            // Kept for a redirect's next hop, and lent to the exchange's retries (one copy).
            let kept = inner.config.redirect.limit.map(|_| Kept::of(&req));
            let res = {
                let mut exchange = std::pin::pin!(exchange(&inner, req, kept.as_ref()));
                within(exchange.as_mut(), &mut timer, limit).await??
            };
            let res = match (inner.config.redirect.limit, kept) {
                (Some(max), Some(kept)) if redirect::is_redirect(&res) => {
                    let mut chain = Box::pin(redirect::chain(&inner, max, kept, res));
                    within(chain.as_mut(), &mut timer, limit).await??
                }
                _ => res,
            };
            Ok(res.map(|body| body.into_body(timer.zip(limit))))
        }
    }
}

/// `future`'s output, or the request timeout's error once `timer` (if any) fires first.
fn within<'a, F: Future + ?Sized>(
    mut future: Pin<&'a mut F>,
    timer: &'a mut Option<spindle::time::Sleep>,
    limit: Option<Duration>,
) -> impl Future<Output = Result<F::Output, ClientError>> + 'a {
    poll_fn(move |cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        match (timer.as_mut(), limit) {
            (Some(timer), Some(limit)) => Pin::new(timer).poll(cx).map(|()| {
                Err(ClientError::new(
                    ClientErrorKind::RequestTimeout,
                    format!("no response within {limit:?}"),
                ))
            }),
            _ => Poll::Pending,
        }
    })
}

/// One request: a connection from the pool (or a new one), the exchange, and the response
/// body wrapped so that the connection returns to the pool when it ends.
///
/// A request that fails on a *reused* connection because the server had closed it is sent
/// again, on another connection, at most [`MAX_RETRIES`] times: any request hyper gives
/// back unsent, and an idempotent one (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) with a body
/// held in memory when the connection ended (closed or reset) before a response head. A
/// failure on a new connection is final (no retry loop against a server that closes at once).
async fn exchange(
    inner: &Arc<Inner>,
    mut req: Request<Body>,
    kept: Option<&Kept>,
) -> Result<Response<PooledBody>, ClientError> {
    let key = Key::from_uri(req.uri())?;
    let mut retries = 0;
    loop {
        let (conn, reused) = checkout(inner, &key).await?;
        let may_retry = reused && retries < MAX_RETRIES;
        // What is kept to send the request again if the connection turns out closed after
        // it went out. The send is written out here, not in a function of its own: each hop
        // of the request through another future's state was one more copy of it.
        let replay = if may_retry { Replay::of(&req, kept) } else { None };
        let refused = match conn {
            Conn::H1 { mut sender, idle } => {
                // HTTP/1.1 wants the origin form and a Host header.
                if !req.headers().contains_key(HOST) {
                    if let Some(value) = host_header(req.uri()) {
                        req.headers_mut().insert(HOST, value);
                    }
                }
                *req.uri_mut() = origin_form(req.uri());
                *req.version_mut() = Version::HTTP_11;
                match sender.try_send_request(req).await {
                    Ok(res) => {
                        let giveback = GiveBack::H1 {
                            pool: inner.pool.clone(),
                            key,
                            max_idle: inner.config.max_idle_per_host,
                            sender,
                            idle,
                        };
                        let read_timeout = inner.config.read_timeout;
                        return Ok(res.map(|body| PooledBody::new(body, giveback, read_timeout)));
                    }
                    Err(e) => e,
                }
            }
            Conn::H2 { mut sender, lease } => {
                *req.version_mut() = Version::HTTP_2;
                match sender.try_send_request(req).await {
                    Ok(res) => {
                        let read_timeout = inner.config.read_timeout;
                        return Ok(res.map(|body| PooledBody::new(body, GiveBack::H2(lease), read_timeout)));
                    }
                    Err(e) => e,
                }
            }
        };
        match failed(&key, refused, may_retry, replay) {
            (error, None) => return Err(error),
            (error, Some(again)) => {
                log::debug!("{}; sending the request again on another connection", error);
                req = again;
            }
        }
        retries += 1;
    }
}

/// A connection for `key`: a live pooled one (`true`: reused) or a new one (`false`).
async fn checkout(inner: &Arc<Inner>, key: &Key) -> Result<(Conn, bool), ClientError> {
    let config = &inner.config;
    let h2_wanted = !key.https && config.http2_prior_knowledge;
    loop {
        let checkout =
            poll_fn(|cx| inner.pool.poll_checkout(cx, key, config.max_connections_per_host, h2_wanted)).await;
        let (mut conn, fresh) = match checkout {
            Checkout::Reuse(conn) => (conn, false),
            Checkout::Open(guard) => {
                // Boxed: opening (resolve, connect, TLS, handshake) is rare, and its state
                // inline made every request's future 2,584 bytes instead of 1,488, all of it
                // in the caller's fiber stack (callgrind, keep-alive GETs: ~500 instructions
                // and ~45 L1 misses a request fewer with this and `block_on` pinning in place).
                let conn = Box::pin(connect::open(key, config, guard)).await?;
                inner.pool.set_h2(key, &conn);
                (conn, true)
            }
        };
        // A pooled connection may have been closed by the server meanwhile: then take
        // another. A new one that is not usable is an error (no retry loop against a server
        // that closes at once).
        let ready = match &mut conn {
            Conn::H1 { sender, .. } => sender.ready().await,
            Conn::H2 { sender, .. } => sender.ready().await,
        };
        match ready {
            Ok(()) => return Ok((conn, !fresh)),
            Err(e) if fresh => {
                return Err(ClientError::with_source(
                    ClientErrorKind::Protocol,
                    format!("new connection to {key}"),
                    e,
                ))
            }
            Err(_) => {}
        }
    }
}

/// The Host header of a request for `uri`: its authority as written (an IPv6 host keeps
/// its brackets, a port given stays), without any user information. One copy of the
/// authority's bytes, no formatting.
fn host_header(uri: &Uri) -> Option<HeaderValue> {
    let authority = uri.authority()?.as_str();
    // A byte scan: the authority is short, and `rsplit_once` costs a generic searcher.
    let host = match authority.bytes().rposition(|b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    HeaderValue::from_str(host).ok()
}

/// `uri`'s origin form (path and query only), for an HTTP/1.1 request line: the parsed path
/// is shared, not parsed again.
fn origin_form(uri: &Uri) -> Uri {
    match uri.path_and_query() {
        Some(path) => {
            let mut parts = hyper::http::uri::Parts::default();
            parts.path_and_query = Some(path.clone());
            Uri::from_parts(parts).expect("a path and query alone is a valid URI")
        }
        None => Uri::from_static("/"),
    }
}
