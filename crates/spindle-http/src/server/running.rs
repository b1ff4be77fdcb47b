//! [`Server`] and [`ShutdownHandle`]: a running server and its graceful shutdown, through
//! the server's [`Drain`] (spindle's: the shutdown signal that its accept loops and
//! connections watch, and the count of those still live that the shutdown waits on).

use std::any::Any;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle::graceful::Drain;

/// A running server. Dropping it stops the workers at once (connections are cancelled);
/// [`Server::shutdown`] stops gracefully.
pub struct Server {
    pub(crate) local_addr: SocketAddr,
    pub(crate) drain: Arc<Drain>,
    /// The state the server's tasks share (its handler among it), kept until the server is
    /// dropped, after its runtimes when it shuts down.
    pub(crate) _state: Arc<dyn Any + Send + Sync>,
    pub(crate) runtimes: Vec<spindle::Runtime>,
    pub(crate) shutdown_timeout: Duration,
}

/// What a graceful shutdown achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Connections still open at the deadline, which were then cancelled (0: all drained).
    pub cancelled_connections: usize,
}

impl Server {
    /// The address the server listens on (with the actual port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Every live fiber of the server's runtimes (spindle's
    /// [`Runtime::dump_fibers`](spindle::Runtime::dump_fibers)): one `spindle-http <peer>
    /// <method> <path>` fiber per blocking handler running. (Accept loops and connections
    /// are tasks, not fibers: they hold no stack between requests.) Blocks (or parks a
    /// calling fiber) until every worker has answered.
    pub fn dump_fibers(&self) -> Vec<spindle::FiberInfo> {
        self.runtimes.iter().flat_map(|rt| rt.dump_fibers()).collect()
    }

    /// How many connections are open: accepted and not yet closed, whatever they are doing
    /// (a TLS handshake, serving a request, idle between requests).
    pub fn open_connections(&self) -> usize {
        self.drain.connections()
    }

    /// The counters of the server's workers (spindle's
    /// [`Runtime::metrics`](spindle::Runtime::metrics)): polls, steals, sleeps, busy time.
    pub fn metrics(&self) -> Vec<spindle::WorkerMetrics> {
        self.runtimes.iter().flat_map(|rt| rt.metrics()).collect()
    }

    /// The handle of the server's runtime, to run other services on the server's workers
    /// rather than on a runtime of their own: a gRPC server
    /// (`spindle_grpc::Server::new(channel).handle(server.handle())`), background fibers
    /// and tasks, clients. One process then has one pool of worker threads, as many as
    /// [`Builder::workers`](crate::Builder::workers), instead of one per server.
    ///
    /// With [`Accept::Runtimes`](crate::Accept::Runtimes) (one single-worker runtime per
    /// worker) it is the first of them, whose one worker then runs what is spawned there.
    /// The runtime ends with the server: a graceful shutdown waits for the server's own
    /// connections only, and once [`Server::shutdown`] (or `wait`) has returned, or the server
    /// is dropped, what else runs there is cancelled and the handle refuses new work
    /// (`try_spawn` returns `RuntimeClosed`; `spawn` panics). Shut the other services down
    /// first (a gRPC server's `Serving::shutdown` drains its calls), then the server.
    ///
    /// ```no_run
    /// use spindle_http::{Body, Request, Response, Server};
    ///
    /// let server = Server::builder()
    ///     .workers(2)
    ///     .serve("127.0.0.1:8080", |_req: Request<Body>| Response::new("ok"))
    ///     .unwrap();
    /// // A second listener, served by the same two workers.
    /// let echo = server.handle().spawn(|| {
    ///     let listener = spindle::net::TcpListener::bind("127.0.0.1:9000")?;
    ///     let (mut stream, _) = listener.accept()?;
    ///     let mut reader = stream.try_clone()?;
    ///     std::io::copy(&mut reader, &mut stream)
    /// });
    /// # drop(echo);
    /// server.wait();
    /// ```
    pub fn handle(&self) -> spindle::Handle {
        self.runtimes
            .first()
            .expect("a running server has at least one runtime (Builder::start makes them)")
            .handle()
    }

    /// A handle that starts the graceful shutdown from anywhere: another thread, a handler.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle { drain: self.drain.clone() }
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
        self.drain.trigger();
        self.finish(spindle::time::deadline_after(timeout))
    }

    /// Blocks until a [`ShutdownHandle`] triggers the shutdown, then finishes it as
    /// [`Server::shutdown`] does.
    pub fn wait(self) -> ShutdownReport {
        self.drain.wait_triggered();
        let deadline = spindle::time::deadline_after(self.shutdown_timeout);
        self.finish(deadline)
    }

    fn finish(mut self, deadline: Instant) -> ShutdownReport {
        let left = self.drain.wait_idle(deadline);
        // Dropping the runtimes cancels the fibers still running (they unwind) and joins the
        // worker threads.
        self.runtimes.clear();
        ShutdownReport { cancelled_connections: left }
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
    pub(crate) drain: Arc<Drain>,
}

impl ShutdownHandle {
    /// Begins the graceful shutdown: stops accepting, closes idle connections. Returns at
    /// once; [`Server::wait`] finishes it.
    pub fn trigger(&self) {
        // Wakes a `Server::wait` too.
        self.drain.trigger();
    }

    pub fn is_triggered(&self) -> bool {
        self.drain.is_triggered()
    }
}

impl fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownHandle").field("triggered", &self.is_triggered()).finish()
    }
}
