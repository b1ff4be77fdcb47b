//! [`Server`] and [`ShutdownHandle`]: a running server, its graceful shutdown, and the state
//! its workers share (the shutdown flag with the wakers of the tasks that watch it, and the
//! count of live accept loops and connections that shutdown waits on).

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

use crate::builder::{Builder, Config};
use crate::handler::Respond;

/// State shared by the workers of one server.
pub(crate) struct Shared<H> {
    pub(crate) handler: H,
    pub(crate) http: hyper::server::conn::http1::Builder,
    pub(crate) http2: hyper::server::conn::http2::Builder<crate::exec::TaskExec>,
    pub(crate) shutdown: ShutdownState,
    pub(crate) active: Arc<Active>,
    pub(crate) config: Config,
}

/// The handler-independent part of [`Shared`], for [`Server`] and [`ShutdownHandle`].
pub(crate) trait Control: Send + Sync {
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

/// The shutdown flag and the wakers of the tasks that watch it.
#[derive(Default)]
pub(crate) struct ShutdownState {
    triggered: AtomicBool,
    wakers: Mutex<Wakers>,
}

/// The watchers' wakers by key, in a slab: 16 bytes a watcher (a hash map took 25 a bucket,
/// with its table rounded further up), and every idle connection is one. A key stays its
/// watcher's until it deregisters, across the trigger too (which takes the wakers, not the
/// keys), so a key is never reused while its watcher may still use it.
#[derive(Default)]
struct Wakers {
    slots: Vec<Option<Waker>>,
    free: Vec<u32>,
}

impl ShutdownState {
    pub(crate) fn is_triggered(&self) -> bool {
        self.triggered.load(Ordering::Acquire)
    }

    /// Registers (or replaces, under `key`) a waker to call when shutdown begins.
    pub(crate) fn register(&self, key: Option<u32>, waker: Waker) -> u32 {
        let mut wakers = lock(&self.wakers);
        let key = match key.or_else(|| wakers.free.pop()) {
            Some(key) => key,
            None => {
                wakers.slots.push(None);
                u32::try_from(wakers.slots.len() - 1).expect("fewer than 2^32 shutdown watchers")
            }
        };
        wakers.slots[key as usize] = Some(waker);
        key
    }

    pub(crate) fn deregister(&self, key: u32) {
        let mut wakers = lock(&self.wakers);
        wakers.slots[key as usize] = None;
        wakers.free.push(key);
    }

    fn trigger(&self) {
        self.triggered.store(true, Ordering::Release);
        let wakers: Vec<Waker> = lock(&self.wakers).slots.iter_mut().filter_map(Option::take).collect();
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// Counts accept loops and connections, so that shutdown can wait for them.
#[derive(Default)]
pub(crate) struct Active {
    count: Mutex<usize>,
    zero: Condvar,
    /// Open connections alone (`Server::open_connections`).
    connections: AtomicUsize,
}

pub(crate) struct ActiveGuard(Arc<Active>);

/// An [`ActiveGuard`] that also counts an open connection.
pub(crate) struct ConnectionGuard(ActiveGuard);

impl Active {
    pub(crate) fn enter(self: &Arc<Self>) -> ActiveGuard {
        *lock(&self.count) += 1;
        ActiveGuard(self.clone())
    }

    pub(crate) fn enter_connection(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self.enter())
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

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        (self.0).0.connections.fetch_sub(1, Ordering::Relaxed);
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
    pub(crate) local_addr: SocketAddr,
    pub(crate) control: Arc<dyn Control>,
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
    /// A [`Builder`] with the default settings.
    pub fn builder() -> Builder {
        Builder::new()
    }

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
        self.control.active().connections.load(Ordering::Relaxed)
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
    /// [`Builder::workers`], instead of one per server.
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
        self.finish(spindle::time::deadline_after(timeout))
    }

    /// Blocks until a [`ShutdownHandle`] triggers the shutdown, then finishes it as
    /// [`Server::shutdown`] does.
    pub fn wait(self) -> ShutdownReport {
        self.control.active().wait_triggered(self.control.shutdown());
        let deadline = spindle::time::deadline_after(self.shutdown_timeout);
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
    pub(crate) control: Arc<dyn Control>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_trigger_wakes_the_registered_watchers_and_keys_stay_theirs() {
        let state = ShutdownState::default();
        let counts: Vec<_> = (0..3).map(|_| Arc::new(Count(AtomicUsize::new(0)))).collect();
        let waker = |i: usize| Waker::from(counts[i].clone());
        let a = state.register(None, waker(0));
        let b = state.register(None, waker(1));
        assert_ne!(a, b);
        assert_eq!(state.register(Some(a), waker(0)), a, "re-registering keeps the key");
        state.deregister(b);
        let c = state.register(None, waker(2));
        assert_eq!(c, b, "a freed key is reused");
        state.trigger();
        let woken: Vec<_> = counts.iter().map(|c| c.0.load(Ordering::SeqCst)).collect();
        assert_eq!(woken, [1, 0, 1], "the deregistered watcher is not woken, the others once");
        // Keys outlive the trigger: a new watcher does not get a key still held by another.
        let d = state.register(None, waker(1));
        assert!(d != a && d != c);
        state.deregister(a);
        state.deregister(c);
        state.deregister(d);
    }
}
