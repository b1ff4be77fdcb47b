//! [`Endpoint`]: where and how a [`RemoteChannel`](crate::RemoteChannel) connects (the URI
//! parsed into a target and an origin, and the connection's settings). Connecting is the
//! channel's part (`Endpoint::connect`, `connect_lazy` in module `remote_channel`).

use std::io;
use std::time::Duration;

/// Where and how to connect: the builder of a [`RemoteChannel`](crate::RemoteChannel). A timeout or keepalive
/// setting of `Duration::MAX` means "no limit".
///
/// ```no_run
/// # async fn f() -> std::io::Result<()> {
/// let channel = spindle_grpc::Endpoint::new("http://127.0.0.1:50051")?.connect().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub(crate) target: Target,
    /// Scheme and authority of the requests' URIs.
    pub(crate) origin: http::uri::Authority,
    pub(crate) handle: Option<spindle::Handle>,
    pub(crate) connect_timeout: Duration,
    pub(crate) timeout: Option<Duration>,
    pub(crate) backoff_initial: Duration,
    pub(crate) backoff_max: Duration,
    pub(crate) keepalive_interval: Option<Duration>,
    pub(crate) keepalive_timeout: Duration,
    pub(crate) concurrency_limit: usize,
    pub(crate) initial_stream_window: u32,
    pub(crate) initial_connection_window: u32,
    pub(crate) nodelay: bool,
    /// An `https://` URI: the connection must be TLS.
    pub(crate) https: bool,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<crate::tls::ClientTlsConfig>,
}

/// What an [`Endpoint`] connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Tcp(String),
    Unix(std::path::PathBuf),
}

impl Endpoint {
    /// An endpoint for `uri`: `http://host:port` (TCP; port 80 if absent), `https://host:port`
    /// (TLS, feature `tls`, trusting the system's root certificates unless `Endpoint::tls` says
    /// otherwise; port 443 if absent) or `unix:/path` (also `unix:///path`), with defaults: 5 s
    /// connect timeout, no default call timeout, reconnection backoff from 100 ms doubling up to
    /// 5 s, no keepalive pings. The connection
    /// runs on the runtime of [`Endpoint::handle`], else of the worker that built the
    /// endpoint, else of the worker that connects it.
    pub fn new(uri: impl AsRef<str>) -> io::Result<Endpoint> {
        let uri = uri.as_ref();
        let invalid =
            |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("spindle-grpc: {why}: {uri:?}"));
        let (target, origin) = if let Some(path) = uri.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if !path.starts_with('/') {
                return Err(invalid("a unix URI needs an absolute path (unix:/path)"));
            }
            (Target::Unix(path.into()), http::uri::Authority::from_static("localhost"))
        } else {
            let parsed: http::Uri = uri.parse().map_err(|_| invalid("not a URI"))?;
            let default_port = match parsed.scheme_str() {
                Some("http") => 80,
                Some("https") if cfg!(feature = "tls") => 443,
                Some("https") => return Err(invalid("https:// needs spindle-grpc's `tls` feature")),
                _ => return Err(invalid("only http://, https:// and unix: URIs are supported")),
            };
            let authority = parsed.authority().ok_or_else(|| invalid("no host"))?.clone();
            let port = authority.port_u16().unwrap_or(default_port);
            let host = authority.host().trim_start_matches('[').trim_end_matches(']');
            let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
            (Target::Tcp(addr), authority)
        };
        let https = uri.starts_with("https:");
        Ok(Endpoint {
            target,
            origin,
            handle: spindle::Handle::current(),
            connect_timeout: Duration::from_secs(5),
            timeout: None,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            keepalive_interval: None,
            keepalive_timeout: Duration::from_secs(20),
            concurrency_limit: usize::MAX,
            initial_stream_window: 1 << 20,
            initial_connection_window: 2 << 20,
            nodelay: true,
            https,
            #[cfg(feature = "tls")]
            tls: None,
        })
    }

    /// The TLS settings of an `https://` endpoint (feature `tls`): which authorities to trust,
    /// a client certificate for mutual TLS, the name to check. Without it, an `https://`
    /// endpoint trusts the system's root certificates
    /// ([`ClientTlsConfig::native_roots`](crate::ClientTlsConfig::native_roots), loaded once per
    /// process at the first attempt, off the workers). A failed handshake (an untrusted
    /// or expired certificate, a wrong name, a server that does not speak TLS or HTTP/2) fails
    /// the connection attempt with the TLS error, as a refused connection does.
    ///
    /// A `connect` or `connect_lazy` of an endpoint whose URI is not `https://` but has TLS
    /// settings is refused (`InvalidInput`).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: crate::tls::ClientTlsConfig) -> Endpoint {
        self.tls = Some(config);
        self
    }

    /// Runs the connection on `handle`'s runtime (default: the runtime of the worker that
    /// built or connects the endpoint). Needed to connect from a thread outside any runtime.
    pub fn handle(mut self, handle: spindle::Handle) -> Endpoint {
        self.handle = Some(handle);
        self
    }

    /// The limit on one connection attempt (TCP, TLS and HTTP/2 handshakes, and the first
    /// attempt's wait for the system's root certificates); default 5 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Endpoint {
        self.connect_timeout = timeout;
        self
    }

    /// A deadline for the calls that set none (sent as `grpc-timeout` and enforced here).
    pub fn timeout(mut self, timeout: Duration) -> Endpoint {
        self.timeout = Some(timeout);
        self
    }

    /// Reconnection backoff: the first retry after `initial`, each next one twice as late,
    /// at most `max` apart, each wait randomised by ±20% (as gRPC's connection backoff), so
    /// that the clients of a server that restarts do not all reconnect at the same moment.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Endpoint {
        self.backoff_initial = initial;
        self.backoff_max = max.max(initial);
        self
    }

    /// HTTP/2 PINGs every `interval` (also while no call is open), closing the connection if
    /// one is not answered within `timeout` (it is then re-established).
    pub fn keepalive(mut self, interval: Duration, timeout: Duration) -> Endpoint {
        self.keepalive_interval = Some(interval);
        self.keepalive_timeout = timeout;
        self
    }

    /// The most calls in flight at once (`poll_ready` waits past it), besides the server's own
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`.
    pub fn concurrency_limit(mut self, limit: usize) -> Endpoint {
        self.concurrency_limit = limit.max(1);
        self
    }

    /// HTTP/2 flow-control windows: how much response data the server may send ahead, per
    /// call and per connection (defaults 1 MiB and 2 MiB). They bound what the client buffers
    /// of responses its callers do not read.
    pub fn flow_control_windows(mut self, stream: u32, connection: u32) -> Endpoint {
        self.initial_stream_window = stream;
        self.initial_connection_window = connection;
        self
    }

    /// `TCP_NODELAY` on the connection (default on).
    pub fn nodelay(mut self, on: bool) -> Endpoint {
        self.nodelay = on;
        self
    }
}
