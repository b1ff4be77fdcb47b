//! [`Builder`]: the server's settings, and starting it (listeners, runtimes, accept tasks).

use std::future::Future;
use std::io;
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::Duration;

use hyper::{Request, Response};

use crate::server::accept;
use crate::server::config::{Accept, Config};
use crate::server::handler::{self, Respond};
use crate::server::running::{Server, ShutdownHandle};
use crate::server::shared::Shared;
use crate::transport::body::{Body, BoxError};
use crate::transport::limits::MinRate;

/// Server settings. The defaults suit a server facing the internet: request headers of at
/// most 64 KiB and 100 fields, 30 s to send them, bodies of at most 2 MiB sent at 240 B/s or
/// faster (after 5 s), 60 s of idle keep-alive, a strict `Host` rule. A duration setting of
/// `Duration::MAX` means "no limit".
#[derive(Debug, Clone)]
pub struct Builder {
    config: Config,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    pub fn new() -> Builder {
        Builder { config: Config::default() }
    }

    /// Worker threads, spread over as [`Builder::accept`] says. Default: one per CPU this
    /// process may use, as `spindle::Runtime::new()` (`workers(1)` for a server that should
    /// keep to one core).
    pub fn workers(mut self, n: usize) -> Builder {
        self.config.workers = n.max(1);
        self
    }

    /// How connections are spread over the workers (default [`Accept::RoundRobin`]; see the
    /// README for the measurements behind the choice).
    pub fn accept(mut self, accept: Accept) -> Builder {
        self.config.accept = accept;
        self
    }

    /// Serves HTTP/2 beside HTTP/1.1 on the same port (default on): a connection that opens
    /// with HTTP/2's preface (h2c "prior knowledge", as `curl --http2-prior-knowledge` and
    /// gRPC clients do) is served by hyper's HTTP/2 server, with the same handler and the same
    /// limits. Off: every connection is HTTP/1.
    pub fn http2(mut self, on: bool) -> Builder {
        self.config.http2 = on;
        self
    }

    /// The most HTTP/2 streams (concurrent requests) one connection may have open (default
    /// 100); each has its own send buffer of up to `max_buf_size`. Handlers count until they
    /// end: a stream the client reset cancels its blocking handler at the handler's next
    /// park, and until it has ended a new stream that would pass this limit is refused
    /// (`REFUSED_STREAM`, safe for the client to retry). A client that keeps opening streams
    /// past 20 such refusals in a row gets a GOAWAY of `ENHANCE_YOUR_CALM` and the connection
    /// ends.
    pub fn max_concurrent_streams(mut self, n: u32) -> Builder {
        self.config.max_concurrent_streams = n.max(1);
        self
    }

    /// The most response bytes one HTTP/2 connection may hold unsent (default 4 MiB): the
    /// bytes its responses' bodies still hold while the client's flow-control window keeps
    /// them from going out. Past it, new streams are refused (`REFUSED_STREAM`) until the
    /// client reads. A body's bytes leave it at most one frame ahead of the window (a
    /// streaming body is pulled, and its producer's writes wait, only as the window opens).
    /// A handler that builds a large body in memory before it returns holds it meanwhile: a
    /// connection holds at most this budget plus the bodies of the handlers already running
    /// when it was passed (at most [`Builder::max_concurrent_streams`] of them), and for at
    /// most [`Builder::http2_send_timeout`] without progress.
    pub fn http2_max_unsent(mut self, bytes: u64) -> Builder {
        self.config.http2_max_unsent = bytes;
        self
    }

    /// How long an HTTP/2 connection may have a response waiting for the client's
    /// flow-control window with nothing written to the client (default 10 s; keep it shorter
    /// than [`Builder::idle_timeout`]): past it, the connection is closed (a GOAWAY, then the
    /// socket), and the memory its responses held is freed. It is checked once per period,
    /// so such a connection closes after one to two periods. `None` disables it (then only
    /// the idle timeout closes such a connection).
    pub fn http2_send_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Builder {
        self.config.http2_send_timeout = timeout.into();
        self
    }

    /// Serves HTTPS: every connection is TLS (rustls), HTTP/2 or HTTP/1.1 chosen by ALPN
    /// (feature `tls`). See [`TlsConfig`](crate::TlsConfig).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: crate::server::tls::TlsConfig) -> Builder {
        self.config.tls = Some(tls);
        self
    }

    /// HTTP/1.1 keep-alive (default on).
    pub fn keep_alive(mut self, on: bool) -> Builder {
        self.config.keep_alive = on;
        self
    }

    /// Serves plain HTTP/1.1 requests (no body, or a `Content-Length` body of a few KiB that
    /// came with its head; no `Expect` or `Upgrade`) on plain sockets with spindle-http's
    /// own HTTP/1 path instead of hyper's dispatcher (default on): the same handlers,
    /// answers and limits, fewer instructions a request, and idle connections without
    /// hyper's buffers. The first request on a connection that is anything else (a chunked,
    /// large or slow body, HTTP/1.0, a malformed head) hands the connection to hyper, which
    /// serves it from that request on. Off: hyper serves every request.
    pub fn http1_fast_path(mut self, on: bool) -> Builder {
        self.config.http1_fast_path = on;
        self
    }

    /// Coalesces the responses hyper produces in one pass (a batch of pipelined requests)
    /// into one write, through a buffer of at most 32 KiB per connection (default on). This
    /// is spindle-http's own buffer, not hyper's `pipeline_flush`, which lifts hyper's
    /// write-buffer limit and can lose the response to a closing request; with either
    /// setting a client that does not read stalls its connection instead of growing memory.
    pub fn pipeline_flush(mut self, on: bool) -> Builder {
        self.config.pipeline_flush = on;
        self
    }

    /// The limit of hyper's read and write buffers per connection (default 64 KiB, at least
    /// 8 KiB). It also bounds the request head: a head larger than the smaller of this and
    /// [`Builder::max_header_size`] gets `431`.
    pub fn max_buf_size(mut self, bytes: usize) -> Builder {
        self.config.max_buf_size = bytes.max(8192);
        self
    }

    /// The largest request head (request line and header fields, as parsed) a client may send
    /// (default 64 KiB); a larger one gets `431 Request Header Fields Too Large`, however the
    /// client splits its writes (hyper's `max_header_size`: without it, a head that arrived in
    /// one read could pass the buffer limit).
    pub fn max_header_size(mut self, bytes: usize) -> Builder {
        self.config.max_header_size = bytes;
        self
    }

    /// The largest request body (default 2 MiB, as axum's; `None`: no limit). A declared
    /// `Content-Length` above it gets `413 Payload Too Large` before the handler runs; a
    /// chunked body that passes it ends with [`LimitError::BodyTooLarge`](crate::LimitError)
    /// and the handler's answer is replaced by `413`. The connection closes after a `413`.
    pub fn max_body_size(mut self, bytes: impl Into<Option<u64>>) -> Builder {
        self.config.body_limits.max_size = bytes.into();
        self
    }

    /// The slowest a client may send a request body (default [`MinRate::default`]: 240 B/s
    /// after a 5 s grace; `None`: no minimum). Only the time the handler spends waiting for
    /// body data counts. A slower client's body ends with
    /// [`LimitError::BodyTooSlow`](crate::LimitError), the answer is `408 Request Timeout`
    /// and the connection closes. (The header has its own deadline,
    /// [`Builder::header_read_timeout`].)
    pub fn min_body_rate(mut self, rate: impl Into<Option<MinRate>>) -> Builder {
        self.config.body_limits.min_rate = rate.into();
        self
    }

    /// The most header fields a request may have (default 100); more get `431`.
    pub fn max_headers(mut self, n: usize) -> Builder {
        self.config.max_headers = n;
        self
    }

    /// How long a client has to send a complete request header, counted from the moment the
    /// server starts waiting for it: the connection's start, or the end of the previous
    /// response on a keep-alive connection, so it also bounds idle keep-alive time. `None`
    /// disables it (default 30 s). A client that misses it is disconnected.
    pub fn header_read_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Builder {
        self.config.header_read_timeout = timeout.into();
        self
    }

    /// Closes a connection on which no byte has been read or written for this long while no
    /// handler is running for it (default 60 s; `None` disables it). It is checked once per
    /// period, so an idle connection closes after one to two periods. It covers what the
    /// header timeout does not: a client that stalls while sending a body or while reading
    /// a response. A response body that the application produces slowly counts as idle.
    pub fn idle_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Builder {
        self.config.idle_timeout = timeout.into();
        self
    }

    /// How long [`Server::shutdown`] and [`Server::wait`] let in-flight requests finish
    /// before the remaining connections are cancelled (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Builder {
        self.config.shutdown_timeout = timeout;
        self
    }

    /// Begins the graceful shutdown when `token` is triggered (a runtime's
    /// [`shutdown_token`](spindle::Runtime::shutdown_token), or one that
    /// [`trigger_on_signals`](spindle::shutdown::ShutdownToken::trigger_on_signals) fires on
    /// SIGTERM), as a [`ShutdownHandle::trigger`] would; [`Server::wait`] then finishes it.
    pub fn shutdown_on(mut self, token: spindle::shutdown::ShutdownToken) -> Builder {
        self.config.shutdown_on = Some(token);
        self
    }

    /// `TCP_NODELAY` on accepted connections (default on).
    pub fn nodelay(mut self, on: bool) -> Builder {
        self.config.nodelay = on;
        self
    }

    /// Stack size of the handler fibers, one per request of a blocking handler (default
    /// spindle's [`DEFAULT_STACK_SIZE`](spindle::DEFAULT_STACK_SIZE), 256 KiB of address space
    /// in optimized builds, committed lazily: a fiber costs the pages it touched, not this
    /// size).
    ///
    /// Size it for the deepest handler: a fiber that overflows its stack hits a guard page,
    /// and spindle then prints which fiber overflowed (`spindle-http <peer> <method> <path>`)
    /// and its stack size, and
    /// **aborts the process**, the whole server with it. That is by design (spindle's
    /// soundness rule "guard pages"): a fault on a guard page cannot be recovered safely (the fiber's
    /// frames are corrupt, and unwinding them could run arbitrary code), as a thread's
    /// overflow aborts in Rust. Larger stacks cost only address space until touched.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.config.stack_size = bytes;
        self
    }

    /// Binds `addr` and serves each request with the blocking `handler`, called on a fiber
    /// of its own (so it may park: spindle's channels, `sleep`, sockets, reading the body).
    pub fn serve<F, B>(self, addr: impl ToSocketAddrs, handler: F) -> io::Result<Server>
    where
        F: Fn(Request<Body>) -> Response<B> + Send + Sync + 'static,
        B: Into<Body>,
    {
        self.start(addr, handler::Blocking(Arc::new(handler)))
    }

    /// Binds `addr` and serves each request with the async `handler`; the connection's task
    /// polls its future, and may move to another worker between polls, hence `Send`.
    pub fn serve_async<F, Fut, B>(self, addr: impl ToSocketAddrs, handler: F) -> io::Result<Server>
    where
        F: Fn(Request<Body>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response<B>> + Send + 'static,
        B: Into<Body>,
    {
        self.start(addr, handler::Async(handler))
    }

    /// Binds `addr` and serves each request with a [`tower_service::Service`]: an axum
    /// `Router`, or any tower stack whose responses have a body of `Bytes`. Each request calls
    /// a clone of `service` (`poll_ready`, then `call`), whose future the connection's task
    /// polls as an async handler's (`serve_async`), hence `Send` and `Sync`
    /// (`tower::util::BoxCloneSyncService` erases a stack's type). The server's limits and
    /// refusals apply first; a panic answers `500`, and so does a service's error (which is
    /// logged: it has no HTTP form of its own). A route that must block can run on a fiber:
    /// `spindle::spawn(move || work()).await` (a fiber's `JoinHandle` is a future).
    pub fn serve_service<S, B>(self, addr: impl ToSocketAddrs, service: S) -> io::Result<Server>
    where
        S: tower_service::Service<Request<Body>, Response = Response<B>> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        self.start(addr, handler::Async(move |req| crate::server::tower::call(service.clone(), req)))
    }

    fn start<H: Respond>(self, addr: impl ToSocketAddrs, handler: H) -> io::Result<Server> {
        let shared = Arc::new(Shared::new(handler, self.config));
        let config = shared.config.clone();
        // Listeners first, on this thread: a bind error is returned before any thread starts.
        let n = config.workers;
        let listener_count = if config.accept == Accept::RoundRobin { 1 } else { n };
        let mut listeners = Vec::with_capacity(listener_count);
        let first = if listener_count == 1 {
            spindle::net::TcpListener::bind(addr)?
        } else {
            spindle::net::TcpListener::bind_reuseport(addr)?
        };
        let local_addr = first.local_addr()?;
        listeners.push(first);
        for _ in 1..listener_count {
            listeners.push(spindle::net::TcpListener::bind_reuseport(local_addr)?);
        }
        let mut runtimes = Vec::with_capacity(n);
        match config.accept {
            Accept::Runtimes => {
                for (i, listener) in listeners.into_iter().enumerate() {
                    let rt = spindle::Builder::new()
                        .worker_threads(1)
                        .thread_name(format!("spindle-http-{i}"))
                        .build()?;
                    drop(rt.spawn_async(accept::accept_loop(listener, shared.clone())));
                    runtimes.push(rt);
                }
            }
            Accept::ReusePort | Accept::RoundRobin => {
                let rt = spindle::Builder::new().worker_threads(n).thread_name("spindle-http").build()?;
                for listener in listeners {
                    drop(rt.spawn_async(accept::accept_loop(listener, shared.clone())));
                }
                runtimes.push(rt);
            }
        }
        let drain = shared.drain.clone();
        if let (Some(token), Some(rt)) = (config.shutdown_on.clone(), runtimes.first()) {
            let handle = ShutdownHandle { drain: drain.clone() };
            rt.spawn(move || {
                token.wait();
                handle.trigger();
            });
        }
        Ok(Server { local_addr, drain, _state: shared, runtimes, shutdown_timeout: config.shutdown_timeout })
    }
}

impl Server {
    /// A [`Builder`] with the default settings.
    pub fn builder() -> Builder {
        Builder::new()
    }
}
