//! spindle-http: an HTTP/1.1 server on spindle fibers, with hyper 1.x as the protocol engine.
//!
//! Each connection runs in its own fiber, which drives hyper's `serve_connection` future
//! with [`spindle::task::block_on`]. A handler is either a plain blocking function, called on
//! that fiber (so it may use spindle's blocking channels, `sleep` and sockets: they park the
//! fiber, not the worker), or an async function whose future the fiber polls.
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
//! What hyper does on the wire: keep-alive, pipelining (with `pipeline_flush`, the responses
//! of a batch of pipelined requests go out in one write), chunked request and response
//! bodies, `400 Bad Request` for a malformed request, `431 Request Header Fields Too Large`
//! when the header exceeds [`Builder::max_buf_size`] or [`Builder::max_headers`]. A slow
//! client that does not finish its header within [`Builder::header_read_timeout`] is
//! disconnected (hyper sends no response then). A handler that panics answers `500`.
//!
//! [`Builder::workers`] runs the server on one spindle runtime with that many worker threads;
//! [`Builder::accept`] picks how connections are spread over them ([`Accept`]).

#![warn(missing_debug_implementations)]

mod body;
mod conn;
mod handler;
mod timer;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

pub use body::{Body, BoxError};
pub use hyper::{header, Method, Request, Response, StatusCode, Uri, Version};
pub use timer::{HyperSleep, SpindleTimer};

use handler::Respond;

/// Server settings. The defaults suit a server facing the internet: 64 KiB header buffer,
/// 100 headers, 30 s to send a request header, 60 s of idle keep-alive.
#[derive(Debug, Clone)]
pub struct Builder {
    config: Config,
}

/// How a server with several workers spreads connections over them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Accept {
    /// One spindle runtime with `workers` worker threads, one `SO_REUSEPORT` listener and
    /// accept fiber per worker; a connection stays on the worker that accepted it (the
    /// kernel spreads connections by a hash of their addresses).
    ReusePort,
    /// One spindle runtime with `workers` worker threads and one listener; its accept fiber
    /// places each connection's fiber on the next worker in turn (an exact even spread).
    RoundRobin,
    /// `workers` separate single-worker spindle runtimes, each with its own `SO_REUSEPORT`
    /// listener (the first design; nothing shared between workers).
    Runtimes,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    workers: usize,
    accept: Accept,
    keep_alive: bool,
    pub(crate) pipeline_flush: bool,
    max_buf_size: usize,
    max_headers: usize,
    header_read_timeout: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    shutdown_timeout: Duration,
    pub(crate) nodelay: bool,
    pub(crate) stack_size: usize,
    shutdown_on: Option<spindle::shutdown::ShutdownToken>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            config: Config {
                workers: 1,
                accept: Accept::RoundRobin,
                keep_alive: true,
                pipeline_flush: true,
                max_buf_size: 64 * 1024,
                max_headers: 100,
                header_read_timeout: Some(Duration::from_secs(30)),
                idle_timeout: Some(Duration::from_secs(60)),
                shutdown_timeout: Duration::from_secs(30),
                nodelay: true,
                stack_size: spindle::DEFAULT_STACK_SIZE,
                shutdown_on: None,
            },
        }
    }

    /// Worker threads (default 1), spread over as [`Builder::accept`] says.
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

    /// HTTP/1.1 keep-alive (default on).
    pub fn keep_alive(mut self, on: bool) -> Builder {
        self.config.keep_alive = on;
        self
    }

    /// Aggregates the responses to pipelined requests into one write (hyper's
    /// `pipeline_flush`; default on).
    pub fn pipeline_flush(mut self, on: bool) -> Builder {
        self.config.pipeline_flush = on;
        self
    }

    /// The connection's read buffer limit, which bounds the request line plus headers
    /// (default 64 KiB, at least 8 KiB). A larger header gets `431`.
    pub fn max_buf_size(mut self, bytes: usize) -> Builder {
        self.config.max_buf_size = bytes.max(8192);
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

    /// Stack size of the connection fibers (default spindle's, 256 KiB of address space
    /// committed lazily). Blocking handlers run on this stack.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.config.stack_size = bytes;
        self
    }

    /// Binds `addr` and serves each request with the blocking `handler`, called on the
    /// connection's fiber.
    pub fn serve<F, B>(self, addr: impl ToSocketAddrs, handler: F) -> io::Result<Server>
    where
        F: Fn(Request<Body>) -> Response<B> + Send + Sync + 'static,
        B: Into<Body>,
    {
        self.start(addr, handler::Blocking(Arc::new(handler)))
    }

    /// Binds `addr` and serves each request with the async `handler`; the connection's fiber
    /// polls its future (which therefore need not be `Send`).
    pub fn serve_async<F, Fut, B>(self, addr: impl ToSocketAddrs, handler: F) -> io::Result<Server>
    where
        F: Fn(Request<Body>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response<B>> + 'static,
        B: Into<Body>,
    {
        self.start(addr, handler::Async(handler))
    }

    fn start<H: Respond>(self, addr: impl ToSocketAddrs, handler: H) -> io::Result<Server> {
        let config = self.config;
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(spindle::hyper_rt::Timer)
            .keep_alive(config.keep_alive)
            .pipeline_flush(config.pipeline_flush)
            .max_buf_size(config.max_buf_size)
            .max_headers(config.max_headers)
            .header_read_timeout(config.header_read_timeout);
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
        let shared = Arc::new(Shared {
            handler,
            http,
            shutdown: ShutdownState::default(),
            active: Arc::default(),
            config: config.clone(),
        });
        let mut runtimes = Vec::with_capacity(n);
        let stack = config.stack_size;
        match config.accept {
            Accept::Runtimes => {
                for (i, listener) in listeners.into_iter().enumerate() {
                    let rt = spindle::Builder::new()
                        .worker_threads(1)
                        .thread_name(format!("spindle-http-{i}"))
                        .build()?;
                    let shared = shared.clone();
                    rt.spawn(move || conn::accept_loop(listener, shared, None));
                    runtimes.push(rt);
                }
            }
            Accept::ReusePort | Accept::RoundRobin => {
                let rt = spindle::Builder::new().worker_threads(n).thread_name("spindle-http").build()?;
                let spread = (config.accept == Accept::RoundRobin && n > 1).then_some(n);
                for (i, listener) in listeners.into_iter().enumerate() {
                    let shared = shared.clone();
                    spindle::fiber::Builder::new()
                        .name("spindle-http accept")
                        .stack_size(stack)
                        .worker(i)
                        .spawn_on(&rt, move || conn::accept_loop(listener, shared, spread))?;
                }
                runtimes.push(rt);
            }
        }
        let control: Arc<dyn Control> = shared;
        if let (Some(token), Some(rt)) = (config.shutdown_on.clone(), runtimes.first()) {
            let handle = ShutdownHandle { control: control.clone() };
            rt.spawn(move || {
                token.wait();
                handle.trigger();
            });
        }
        Ok(Server { local_addr, control, runtimes, shutdown_timeout: config.shutdown_timeout })
    }
}

/// State shared by the workers of one server.
pub(crate) struct Shared<H> {
    pub(crate) handler: H,
    pub(crate) http: hyper::server::conn::http1::Builder,
    pub(crate) shutdown: ShutdownState,
    pub(crate) active: Arc<Active>,
    pub(crate) config: Config,
}

/// The handler-independent part of [`Shared`], for [`Server`] and [`ShutdownHandle`].
trait Control: Send + Sync {
    fn shutdown(&self) -> &ShutdownState;
    fn active(&self) -> &Active;
}

impl<H: Respond> Control for Shared<H> {
    fn shutdown(&self) -> &ShutdownState {
        &self.shutdown
    }
    fn active(&self) -> &Active {
        &self.active
    }
}

/// The shutdown flag and the wakers of the fibers that watch it.
#[derive(Default)]
pub(crate) struct ShutdownState {
    triggered: AtomicBool,
    next_key: AtomicU64,
    wakers: Mutex<HashMap<u64, Waker>>,
}

impl ShutdownState {
    pub(crate) fn is_triggered(&self) -> bool {
        self.triggered.load(Ordering::Acquire)
    }

    /// Registers (or replaces, under `key`) a waker to call when shutdown begins.
    pub(crate) fn register(&self, key: Option<u64>, waker: Waker) -> u64 {
        let key = key.unwrap_or_else(|| self.next_key.fetch_add(1, Ordering::Relaxed));
        lock(&self.wakers).insert(key, waker);
        key
    }

    pub(crate) fn deregister(&self, key: u64) {
        lock(&self.wakers).remove(&key);
    }

    fn trigger(&self) {
        self.triggered.store(true, Ordering::Release);
        let wakers: Vec<Waker> = lock(&self.wakers).drain().map(|(_, w)| w).collect();
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// Counts accept loops and connections, so that shutdown can wait for them.
#[derive(Default)]
pub(crate) struct Active {
    count: Mutex<usize>,
    zero: Condvar,
}

pub(crate) struct ActiveGuard(Arc<Active>);

impl Active {
    pub(crate) fn enter(self: &Arc<Self>) -> ActiveGuard {
        *lock(&self.count) += 1;
        ActiveGuard(self.clone())
    }

    /// Waits until the count is zero or `deadline` passes; returns the count left.
    fn wait_zero(&self, deadline: Instant) -> usize {
        let mut count = lock(&self.count);
        while *count > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            count = self.zero.wait_timeout(count, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *count
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        let mut count = lock(&self.0.count);
        *count -= 1;
        if *count == 0 {
            self.0.zero.notify_all();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running server. Dropping it stops the workers at once (connections are cancelled);
/// [`Server::shutdown`] stops gracefully.
pub struct Server {
    local_addr: SocketAddr,
    control: Arc<dyn Control>,
    runtimes: Vec<spindle::Runtime>,
    shutdown_timeout: Duration,
}

/// What a graceful shutdown achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Connections still open at the deadline, which were then cancelled (0: all drained).
    pub cancelled_connections: usize,
}

impl Server {
    /// A [`Builder`] with the default settings.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The address the server listens on (with the actual port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A handle that starts the graceful shutdown from anywhere: another thread, a handler.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle { control: self.control.clone() }
    }

    /// Graceful shutdown, bounded by the builder's `shutdown_timeout`: see
    /// [`Server::shutdown_timeout`].
    pub fn shutdown(self) -> ShutdownReport {
        let timeout = self.shutdown_timeout;
        self.shutdown_timeout(timeout)
    }

    /// Stops accepting (the listeners close), closes idle keep-alive connections, lets the
    /// requests in flight finish (their connections close after the response), and waits for
    /// that at most `timeout`; then cancels what is left and stops the workers.
    ///
    /// Blocks the calling thread: call it from outside the server (not from a handler; a
    /// handler can use a [`ShutdownHandle`]).
    pub fn shutdown_timeout(self, timeout: Duration) -> ShutdownReport {
        self.control.shutdown().trigger();
        self.finish(Instant::now() + timeout)
    }

    /// Blocks until a [`ShutdownHandle`] triggers the shutdown, then finishes it as
    /// [`Server::shutdown`] does.
    pub fn wait(self) -> ShutdownReport {
        self.control.active().wait_triggered(self.control.shutdown());
        let deadline = Instant::now() + self.shutdown_timeout;
        self.finish(deadline)
    }

    fn finish(mut self, deadline: Instant) -> ShutdownReport {
        let left = self.control.active().wait_zero(deadline);
        // Dropping the runtimes cancels the fibers still running (they unwind) and joins the
        // worker threads.
        self.runtimes.clear();
        ShutdownReport { cancelled_connections: left }
    }
}

impl Active {
    /// Waits until shutdown is triggered ([`ShutdownHandle::trigger`] sets the flag, then
    /// notifies under the lock: no lost wake-up).
    fn wait_triggered(&self, shutdown: &ShutdownState) {
        let mut count = lock(&self.count);
        while !shutdown.is_triggered() {
            count = self.zero.wait(count).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .field("runtimes", &self.runtimes.len())
            .finish_non_exhaustive()
    }
}

/// Starts a server's graceful shutdown (see [`Server::shutdown_timeout`]); cheap to clone,
/// usable from any thread or fiber, including a handler of the server itself.
#[derive(Clone)]
pub struct ShutdownHandle {
    control: Arc<dyn Control>,
}

impl ShutdownHandle {
    /// Begins the graceful shutdown: stops accepting, closes idle connections. Returns at
    /// once; [`Server::wait`] finishes it.
    pub fn trigger(&self) {
        self.control.shutdown().trigger();
        // Wake a `Server::wait` at once.
        let _count = lock(&self.control.active().count);
        self.control.active().zero.notify_all();
    }

    pub fn is_triggered(&self) -> bool {
        self.control.shutdown().is_triggered()
    }
}

impl fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownHandle").field("triggered", &self.is_triggered()).finish()
    }
}
