//! The network server: the services of a [`Channel`] over HTTP/2 on spindle's TCP and Unix
//! sockets, with hyper's HTTP/2 server driven by spindle (hyper's executor and timer from
//! `spindle::hyper_rt`, spindle sockets as hyper's I/O).
//!
//! One spindle task accepts; each connection is one spindle task driving hyper's connection
//! future (after the TLS handshake, with `Server::tls`: module `tls`); hyper runs each
//! stream (call) in a task of its own, which polls the channel's
//! call: the handler, its deadline, size limits and panic isolation are the in-process
//! channel's (module `call`), so the semantics are the same in process and over the network.
//! A request that is not gRPC (its content type, `grpc-timeout` or method) is refused before
//! it reaches the channel (module `admit`).
//!
//! # Invariants
//!
//! - **A stream owns its call.** The handler lives in the response future, then the response
//!   body, that hyper's stream task holds. A reset stream or a lost connection makes hyper drop
//!   them, which drops the handler and marks the call cancelled (a request body still read
//!   elsewhere fails with `CANCELLED`, module `call`).
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

use std::future::poll_fn;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use spindle::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::signal::Signal;
use crate::Channel;

mod conn;
mod layer;
mod trace;

use conn::serve_connection;
pub use layer::Routes;

/// Serves the services of a [`Channel`] over HTTP/2 (module docs). Built with the settings
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
    /// (module docs; default none).
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
    fn target(&self) -> conn::Target {
        match &self.routes {
            Some(routes) => conn::Target::Routes(routes.clone()),
            None => conn::Target::Channel(self.channel.clone()),
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
                        watched.signal.fire(spindle::time::deadline_after(grace));
                    })
                    .map_err(io::Error::other)?,
            );
        }
        let this = Arc::new(self);
        let task_shared = shared.clone();
        let accept_task = handle
            .try_spawn_async(async move {
                let mut shutdown = task_shared.signal.waiter();
                loop {
                    let next = poll_fn(|cx| {
                        if shutdown.poll(cx).is_ready() {
                            return Poll::Ready(None);
                        }
                        accept(cx).map(Some)
                    })
                    .await;
                    match next {
                        None => break,
                        Some(Ok(conn)) => {
                            let guard = ConnGuard::new(&task_shared);
                            let fut = serve_connection(this.clone(), task_shared.clone(), conn, guard);
                            drop(spindle::task::spawn_async(crate::exec::Deferred::new(fut)));
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

/// A listening address.
#[derive(Debug, Clone)]
enum Local {
    Tcp(std::net::SocketAddr),
    Unix(Option<std::path::PathBuf>),
}

/// An accepted connection.
enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

#[derive(Debug, Default)]
struct Shared {
    signal: Arc<Signal>,
    connections: AtomicUsize,
    connections_total: AtomicU64,
    calls: AtomicUsize,
    calls_total: AtomicU64,
    /// Connections dropped at the drain deadline.
    cut: AtomicUsize,
}

/// Counts a connection task in [`ServerStats::connections`] while alive.
struct ConnGuard(Arc<Shared>);

impl ConnGuard {
    fn new(shared: &Arc<Shared>) -> ConnGuard {
        shared.connections.fetch_add(1, Ordering::Relaxed);
        shared.connections_total.fetch_add(1, Ordering::Relaxed);
        ConnGuard(shared.clone())
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Release);
    }
}

/// A snapshot of a server's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// Connections being served now.
    pub connections: usize,
    /// Connections accepted in all.
    pub connections_total: u64,
    /// Calls in progress now (their response not yet finished or dropped).
    pub calls: usize,
    /// Calls started in all.
    pub calls_total: u64,
}

/// What a graceful shutdown achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Connections still open at the drain deadline, dropped with their calls.
    pub dropped_connections: usize,
}

/// A running server: its address, counters and shutdown. Dropping it does not stop the
/// server (call [`Serving::shutdown`]).
#[derive(Debug)]
pub struct Serving {
    shared: Arc<Shared>,
    local: Local,
    accept: Option<spindle::task::JoinHandle<()>>,
}

impl Serving {
    /// The TCP address served (`None` for a Unix socket).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match &self.local {
            Local::Tcp(addr) => Some(*addr),
            Local::Unix(_) => None,
        }
    }

    /// The Unix socket path served (`None` for TCP or an unnamed socket).
    pub fn unix_path(&self) -> Option<&std::path::Path> {
        match &self.local {
            Local::Unix(path) => path.as_deref(),
            Local::Tcp(_) => None,
        }
    }

    /// The server's counters now.
    pub fn stats(&self) -> ServerStats {
        let s = &self.shared;
        ServerStats {
            connections: s.connections.load(Ordering::Relaxed),
            connections_total: s.connections_total.load(Ordering::Relaxed),
            calls: s.calls.load(Ordering::Relaxed),
            calls_total: s.calls_total.load(Ordering::Relaxed),
        }
    }

    /// Starts a graceful shutdown without waiting: the server stops accepting, every
    /// connection sends GOAWAY, and calls still running after `grace` are dropped.
    pub fn begin_shutdown(&self, grace: Duration) {
        self.shared.signal.fire(spindle::time::deadline_after(grace));
    }

    /// Shuts down gracefully (see [`Serving::begin_shutdown`]) and waits until every
    /// connection has ended or been dropped at the deadline (parks a fiber, blocks a thread;
    /// from a task, use [`Serving::begin_shutdown`] and poll [`Serving::stats`]).
    pub fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        self.begin_shutdown(grace);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let deadline = self.shared.signal.deadline().unwrap_or_else(Instant::now);
        // Connections end on their own by the deadline (each watches it); wait for that, with
        // a margin for the tasks to run.
        loop {
            let open = self.shared.connections.load(Ordering::Acquire);
            if open == 0 {
                break;
            }
            if Instant::now() > deadline + Duration::from_secs(5) {
                log::warn!("spindle-grpc: {open} connections still open 5 s after the drain deadline");
                break;
            }
            pause(Duration::from_millis(2));
        }
        let dropped = self.shared.cut.load(Ordering::Acquire);
        ShutdownReport { dropped_connections: dropped }
    }
}

/// Sleeps a fiber, or a thread outside the runtime.
fn pause(d: Duration) {
    if spindle::Handle::on_worker() {
        spindle::time::sleep(d);
    } else {
        std::thread::sleep(d);
    }
}
