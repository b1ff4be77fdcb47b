//! [`Server`]: the network server's settings, and `serve_tcp` / `serve_unix`, which start its
//! accept task (module `server` has the overview and the invariants). Each accepted
//! connection becomes a task of module `conn`; the running server is a [`Serving`].

use std::future::poll_fn;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use spindle::net::{TcpListener, UnixListener};
use tonic::body::Body;

use super::conn::{serve_connection, Conn, ConnSettings, Target};
use super::layer::{channel_routes, layered, Routes};
use super::serving::{ConnGuard, Local, Serving, Shared};
use crate::channel::Channel;

/// Serves the services of a [`Channel`] over HTTP/2 (module `server`). Built with the settings
/// below, then started with [`Server::serve_tcp`] or [`Server::serve_unix`]. A duration
/// setting (timeouts, keepalive, shutdown grace) of `Duration::MAX` means "no limit".
///
/// As grpc-go's server, it refuses a request whose `content-type` is not gRPC's (HTTP 415,
/// `INVALID_ARGUMENT`), whose `grpc-timeout` is malformed (400, `INTERNAL`) or whose method
/// is not `POST` (405, `INTERNAL`), in a trailers-only response, before any handler runs.
#[derive(Clone, Debug)]
pub struct Server {
    channel: Channel,
    handle: Option<spindle::Handle>,
    max_concurrent_streams: Option<u32>,
    keepalive_interval: Option<Duration>,
    keepalive_timeout: Duration,
    idle_timeout: Option<Duration>,
    max_header_list_size: u32,
    initial_stream_window: u32,
    initial_connection_window: u32,
    max_send_buf: usize,
    max_pending_accept_reset_streams: usize,
    nodelay: bool,
    shutdown_on: Option<(spindle::shutdown::ShutdownToken, Duration)>,
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::ServerTlsConfig>,
    /// The channel wrapped in the layers given to [`Server::layer`], if any.
    routes: Option<Routes>,
}

impl Server {
    /// A server for the services registered on `channel` (its message size limits apply), with
    /// these defaults: 200 concurrent streams per connection, no keepalive pings, no idle
    /// timeout, 16 KiB of request headers, 1 MiB stream and 2 MiB connection windows, 400 KiB of
    /// response data buffered per stream, `TCP_NODELAY`.
    pub fn new(channel: Channel) -> Server {
        Server {
            channel,
            handle: spindle::Handle::current(),
            max_concurrent_streams: Some(200),
            keepalive_interval: None,
            keepalive_timeout: Duration::from_secs(20),
            idle_timeout: None,
            max_header_list_size: 16 << 10,
            initial_stream_window: 1 << 20,
            initial_connection_window: 2 << 20,
            max_send_buf: 400 << 10,
            max_pending_accept_reset_streams: 20,
            nodelay: true,
            shutdown_on: None,
            #[cfg(feature = "tls")]
            tls: None,
            routes: None,
        }
    }

    /// Runs the server on `handle`'s runtime (default: the runtime of the worker that built
    /// the server).
    pub fn handle(mut self, handle: spindle::Handle) -> Server {
        self.handle = Some(handle);
        self
    }

    /// The most calls a client may have open at once on one connection (HTTP/2
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`); `None` for no limit. Streams past it are refused
    /// (`REFUSED_STREAM`, which gRPC clients see as `UNAVAILABLE`).
    pub fn max_concurrent_streams(mut self, max: impl Into<Option<u32>>) -> Server {
        self.max_concurrent_streams = max.into();
        self
    }

    /// Sends an HTTP/2 PING after `interval` without data from the client, and closes the
    /// connection if the answer takes longer than `timeout` (default: no pings).
    pub fn keepalive(mut self, interval: impl Into<Option<Duration>>, timeout: Duration) -> Server {
        self.keepalive_interval = interval.into();
        self.keepalive_timeout = timeout;
        self
    }

    /// Shuts down (GOAWAY) a connection that has had no call in progress for about this long
    /// (module `server`; default none).
    pub fn idle_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Server {
        self.idle_timeout = timeout.into();
        self
    }

    /// The largest header block of a request, in bytes (`SETTINGS_MAX_HEADER_LIST_SIZE`;
    /// default 16 KiB). A larger one is refused without reaching a handler.
    pub fn max_header_list_size(mut self, bytes: u32) -> Server {
        self.max_header_list_size = bytes;
        self
    }

    /// HTTP/2 flow-control windows: how much request data a client may send ahead, per stream
    /// and per connection (defaults 1 MiB and 2 MiB). They bound what a connection buffers of
    /// uploads that its handlers do not read.
    pub fn flow_control_windows(mut self, stream: u32, connection: u32) -> Server {
        self.initial_stream_window = stream;
        self.initial_connection_window = connection;
        self
    }

    /// The most response data buffered per stream for a client that does not read (default
    /// 400 KiB); past it the handler's response stream is not polled until the client reads.
    pub fn max_send_buf_size(mut self, bytes: usize) -> Server {
        self.max_send_buf = bytes;
        self
    }

    /// Begins the graceful shutdown (as [`Serving::begin_shutdown`] with `grace`) when `token`
    /// is triggered: a runtime's [`shutdown_token`](spindle::Runtime::shutdown_token), or one
    /// that [`trigger_on_signals`](spindle::shutdown::ShutdownToken::trigger_on_signals) fires
    /// on SIGTERM.
    pub fn shutdown_on(mut self, token: spindle::shutdown::ShutdownToken, grace: Duration) -> Server {
        self.shutdown_on = Some((token, grace));
        self
    }

    /// `TCP_NODELAY` on accepted TCP connections (default on).
    pub fn nodelay(mut self, on: bool) -> Server {
        self.nodelay = on;
        self
    }

    /// Serves TCP connections over TLS (feature `tls`; HTTP/2 by ALPN `h2`): each connection's
    /// task runs the handshake first, bounded by the configuration's handshake timeout and the
    /// server's shutdown; a client that fails it or never finishes it is disconnected (module
    /// `tls`). Unix sockets stay plain.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: crate::tls::ServerTlsConfig) -> Server {
        self.tls = Some(config);
        self
    }

    /// Wraps every call the server serves in `layer` (a tower `Layer`: tower-http's
    /// `TraceLayer`, a timeout, an authorization check, a metrics layer ...). Called more than
    /// once, the later layer wraps the earlier ones, so the last given sees a request first.
    /// Applies to the network server only; calls made in process on the channel do not go
    /// through it.
    ///
    /// ```
    /// # fn demo(channel: spindle_grpc::Channel) {
    /// let server = spindle_grpc::Server::new(channel).layer(tower::util::MapRequestLayer::new(
    ///     |mut request: http::Request<tonic::body::Body>| {
    ///         request.headers_mut().insert("x-served-by", http::HeaderValue::from_static("spindle"));
    ///         request
    ///     },
    /// ));
    /// # drop(server);
    /// # }
    /// ```
    pub fn layer<L, B>(mut self, layer: L) -> Server
    where
        L: tower_layer::Layer<Routes>,
        L::Service: tower_service::Service<http::Request<Body>, Response = http::Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        <L::Service as tower_service::Service<http::Request<Body>>>::Future: Send + 'static,
        <L::Service as tower_service::Service<http::Request<Body>>>::Error:
            Into<tonic::codegen::StdError> + Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<tonic::codegen::StdError>,
    {
        let inner = self.routes.take().unwrap_or_else(|| channel_routes(self.channel.clone()));
        self.routes = Some(layered(layer, inner));
        self
    }

    /// Starts serving the connections of `listener` (a spindle task accepts them). Must be
    /// called on a spindle worker, or after [`Server::handle`].
    pub fn serve_tcp(self, listener: TcpListener) -> io::Result<Serving> {
        let local = Local::Tcp(listener.local_addr()?);
        let nodelay = self.nodelay;
        self.serve(local, move |cx| {
            listener.poll_accept(cx).map_ok(|(stream, _)| {
                if nodelay {
                    let _ = stream.set_nodelay(true);
                }
                Conn::Tcp(stream)
            })
        })
    }

    /// Starts serving the connections of a Unix-domain `listener`; see [`Server::serve_tcp`].
    pub fn serve_unix(self, listener: UnixListener) -> io::Result<Serving> {
        let local = Local::Unix(listener.local_addr().ok().and_then(|a| a.as_pathname().map(Into::into)));
        self.serve(local, move |cx| listener.poll_accept(cx).map_ok(|(stream, _)| Conn::Unix(stream)))
    }

    /// Where the connections' requests go: the layered service, or the channel.
    fn target(&self) -> Target {
        match &self.routes {
            Some(routes) => Target::Routes(routes.clone()),
            None => Target::Channel(self.channel.clone()),
        }
    }

    /// What each connection is served with.
    fn conn_settings(&self) -> ConnSettings {
        ConnSettings {
            target: self.target(),
            max_concurrent_streams: self.max_concurrent_streams,
            keepalive_interval: self.keepalive_interval,
            keepalive_timeout: self.keepalive_timeout,
            idle_timeout: self.idle_timeout,
            max_header_list_size: self.max_header_list_size,
            initial_stream_window: self.initial_stream_window,
            initial_connection_window: self.initial_connection_window,
            max_send_buf: self.max_send_buf,
            max_pending_accept_reset_streams: self.max_pending_accept_reset_streams,
            #[cfg(feature = "tls")]
            tls: self.tls.clone(),
        }
    }

    fn serve<A>(self, local: Local, mut accept: A) -> io::Result<Serving>
    where
        A: FnMut(&mut Context<'_>) -> Poll<io::Result<Conn>> + Send + 'static,
    {
        let Some(handle) = self.handle.clone() else {
            return Err(io::Error::other(
                "spindle-grpc: Server::serve_* called outside a spindle worker (give it one with Server::handle)",
            ));
        };
        let shared = Arc::new(Shared::default());
        if let Some((token, grace)) = self.shutdown_on.clone() {
            let watched = shared.clone();
            drop(
                handle
                    .try_spawn_async(async move {
                        token.triggered().await;
                        watched.signal.trigger_with_deadline(spindle::time::deadline_after(grace));
                    })
                    .map_err(io::Error::other)?,
            );
        }
        let settings = Arc::new(self.conn_settings());
        let task_shared = shared.clone();
        let accept_task = handle
            .try_spawn_async(async move {
                let mut shutdown = spindle::graceful::Watch::new(task_shared.signal.clone());
                loop {
                    let next = poll_fn(|cx| {
                        if shutdown.poll_triggered(cx).is_ready() {
                            return Poll::Ready(None);
                        }
                        accept(cx).map(Some)
                    })
                    .await;
                    match next {
                        None => break,
                        Some(Ok(conn)) => {
                            let guard = ConnGuard::new(&task_shared);
                            let fut = serve_connection(settings.clone(), task_shared.clone(), conn, guard);
                            drop(spindle::task::Builder::new().batched(true).spawn(fut));
                        }
                        Some(Err(e)) => {
                            // Out of descriptors and the like: say so, wait a little, go on.
                            log::warn!("spindle-grpc: accept failed: {e}");
                            spindle::time::sleep_future(Duration::from_millis(20)).await;
                        }
                    }
                }
            })
            .map_err(io::Error::other)?;
        Ok(Serving { shared, local, accept: Some(accept_task) })
    }
}
