//! The network client: [`Endpoint`] and [`RemoteChannel`], the transport of tonic-generated
//! clients over HTTP/2 on spindle sockets (hyper's HTTP/2 client driven by spindle).
//!
//! One connection per channel (its clones share it), calls multiplexed on it. A *manager*
//! fiber on the channel's runtime connects, runs the connection while it lives, and
//! reconnects with exponential backoff when it is lost (module `connector`). Calls read the
//! connection's state:
//!
//! - **connected**: the call is sent on the connection (hyper's `SendRequest`, usable from
//!   any thread: the connection's tasks run on spindle, the caller only exchanges messages
//!   with them);
//! - **connecting**: the call waits for the attempt's outcome (bounded by the connect
//!   timeout and the call's deadline);
//! - **down** (the last attempt failed, a retry is scheduled): the call fails at once with
//!   `UNAVAILABLE`, naming the error.
//!
//! # Invariants
//!
//! - **Never hang.** A call waiting for a connection is woken by every state change; the
//!   manager leaves the state `Down` whenever it stops (its guard), so no call waits on a
//!   manager that is gone. Every call's wait is bounded by its deadline too.
//! - **Stream permits.** A call holds one permit of [`Shared::in_flight`] from `poll_ready`
//!   (or `call`) until its response body ends or is dropped; `poll_ready` is pending while
//!   the calls in flight reach the server's `SETTINGS_MAX_CONCURRENT_STREAMS` (or the
//!   endpoint's limit), and every permit's release wakes the waiters.
//! - **A dropped call is cancelled.** Dropping the response future or body before the end
//!   fails the request body hyper is still sending ([`OutBody`]), so the stream is reset
//!   (never left half-open), and drops hyper's response, which resets it from this side.
//! - **Deadlines are local too.** A call with a `grpc-timeout` (tonic's `Request::set_timeout`,
//!   or the endpoint's default) ends with `DEADLINE_EXCEEDED` when it passes, whatever the
//!   server does: a spindle timer when the call is polled on a worker, otherwise a timer task
//!   on the channel's runtime ([`Deadline`]).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use tonic::body::Body;
use tonic::Status;

use crate::connector::{self, ConnState};
use crate::wire::{status_of, WireBody};

/// Where and how to connect: the builder of a [`RemoteChannel`].
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
}

/// What an [`Endpoint`] connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Tcp(String),
    Unix(std::path::PathBuf),
}

impl Endpoint {
    /// An endpoint for `uri`: `http://host:port` (TCP; port 80 if absent) or `unix:/path`
    /// (also `unix:///path`), with defaults: 5 s connect timeout, no default call timeout,
    /// reconnection backoff from 100 ms doubling up to 5 s, no keepalive pings. The connection
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
            if parsed.scheme_str() != Some("http") {
                return Err(invalid("only http:// (HTTP/2 without TLS) and unix: URIs are supported"));
            }
            let authority = parsed.authority().ok_or_else(|| invalid("no host"))?.clone();
            let port = authority.port_u16().unwrap_or(80);
            let host = authority.host().trim_start_matches('[').trim_end_matches(']');
            let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
            (Target::Tcp(addr), authority)
        };
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
        })
    }

    /// Runs the connection on `handle`'s runtime (default: the runtime of the worker that
    /// built or connects the endpoint). Needed to connect from a thread outside any runtime.
    pub fn handle(mut self, handle: spindle::Handle) -> Endpoint {
        self.handle = Some(handle);
        self
    }

    /// The limit on one connection attempt (TCP and HTTP/2 handshakes); default 5 s.
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
    /// at most `max` apart.
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

    /// Connects, waiting for the first attempt: `Err` if it fails (the channel is not kept).
    /// Run it with `.await` in a task, or `spindle::task::block_on` in a fiber or thread.
    pub async fn connect(&self) -> io::Result<RemoteChannel> {
        let channel = self.build()?;
        channel.shared.start()?;
        std::future::poll_fn(|cx| channel.shared.poll_connected(cx)).await?;
        Ok(channel)
    }

    /// A channel that connects at its first call (and reconnects as [`Endpoint::connect`]'s).
    pub fn connect_lazy(&self) -> io::Result<RemoteChannel> {
        self.build()
    }

    fn build(&self) -> io::Result<RemoteChannel> {
        let mut endpoint = self.clone();
        // Built elsewhere, connected on a worker: that worker's runtime.
        endpoint.handle = endpoint.handle.or_else(spindle::Handle::current);
        if endpoint.handle.is_none() {
            return Err(io::Error::other(
                "spindle-grpc: connecting outside a spindle worker needs a runtime: Endpoint::handle",
            ));
        }
        Ok(RemoteChannel { shared: Arc::new(Shared::new(endpoint)), reserved: false })
    }
}

/// The shared state of a channel and its clones.
pub(crate) struct Shared {
    pub(crate) endpoint: Endpoint,
    state: Mutex<ConnState>,
    /// Woken at every change of `state`.
    state_waiters: Mutex<Vec<Waker>>,
    started: AtomicBool,
    in_flight: AtomicUsize,
    /// Waiting in `poll_ready` for a permit.
    permit_waiters: Mutex<Vec<Waker>>,
    /// A call wants a connection while the state is `Idle`; the manager's waker.
    wanted: AtomicBool,
    manager: Mutex<Option<Waker>>,
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`, as the manager last saw it.
    pub(crate) server_streams: Arc<AtomicUsize>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The manager, idle, notices that the channel is gone.
        if let Some(w) = lock(&self.manager).take() {
            w.wake();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn new(endpoint: Endpoint) -> Shared {
        Shared {
            endpoint,
            state: Mutex::new(ConnState::Idle),
            state_waiters: Mutex::default(),
            started: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            permit_waiters: Mutex::default(),
            wanted: AtomicBool::new(false),
            manager: Mutex::default(),
            server_streams: Arc::new(AtomicUsize::new(usize::MAX)),
        }
    }

    /// For the idle manager: ready once a call wants a connection.
    pub(crate) fn poll_wanted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.wanted.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        *lock(&self.manager) = Some(cx.waker().clone());
        if self.wanted.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn want(&self) {
        self.wanted.store(true, Ordering::Release);
        if let Some(w) = lock(&self.manager).take() {
            w.wake();
        }
    }

    /// Starts the manager fiber, once.
    fn start(self: &Arc<Self>) -> io::Result<()> {
        if self.started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.set_state(ConnState::Connecting);
        let weak = Arc::downgrade(self);
        let handle = self.endpoint.handle.as_ref().expect("checked by Endpoint::build");
        match handle.try_spawn(move || connector::manage(weak)) {
            Ok(_detached) => Ok(()),
            Err(closed) => {
                let e = io::Error::other(format!("spindle-grpc: {closed}"));
                self.set_state(ConnState::Down { error: e.to_string() });
                Err(e)
            }
        }
    }

    pub(crate) fn set_state(&self, state: ConnState) {
        *lock(&self.state) = state;
        let waiters = std::mem::take(&mut *lock(&self.state_waiters));
        for w in waiters {
            w.wake();
        }
        // A new connection may allow more streams.
        self.wake_permit_waiters();
    }

    /// Ready when the state is connected (`Ok`) or down (`Err`).
    fn poll_connected(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.poll_sender(cx) {
            Poll::Ready(Ok(_)) => Poll::Ready(Ok(())),
            Poll::Ready(Err(status)) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionRefused, status.message())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// The connection to send a call on, or the status of a channel that is down; pending
    /// (waker registered) while connecting.
    fn poll_sender(&self, cx: &mut Context<'_>) -> Poll<Result<connector::Sender, Status>> {
        {
            let state = lock(&self.state);
            match &*state {
                ConnState::Ready(sender) if !sender.is_closed() => return Poll::Ready(Ok(sender.clone())),
                ConnState::Down { error } => {
                    return Poll::Ready(Err(Status::unavailable(format!(
                        "spindle-grpc: not connected: {error}"
                    ))))
                }
                ConnState::Idle | ConnState::Ready(_) => self.want(),
                ConnState::Connecting => {}
            }
        }
        lock(&self.state_waiters).push(cx.waker().clone());
        // Look again: the state may have changed before the waker was in.
        let state = lock(&self.state);
        match &*state {
            ConnState::Ready(sender) if !sender.is_closed() => Poll::Ready(Ok(sender.clone())),
            ConnState::Down { error } => {
                Poll::Ready(Err(Status::unavailable(format!("spindle-grpc: not connected: {error}"))))
            }
            _ => Poll::Pending,
        }
    }

    /// The live connection's sender, if connected.
    fn ready_sender(&self) -> Option<connector::Sender> {
        match &*lock(&self.state) {
            ConnState::Ready(sender) if !sender.is_closed() => Some(sender.clone()),
            _ => None,
        }
    }

    /// The most calls in flight now: the server's stream limit and the endpoint's.
    fn stream_limit(&self) -> usize {
        self.server_streams.load(Ordering::Relaxed).min(self.endpoint.concurrency_limit)
    }

    fn try_reserve(&self) -> bool {
        let limit = self.stream_limit();
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
            .is_ok()
    }

    fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.wake_permit_waiters();
    }

    fn wake_permit_waiters(&self) {
        let waiters = std::mem::take(&mut *lock(&self.permit_waiters));
        for w in waiters {
            w.wake();
        }
    }
}

/// The transport of tonic-generated clients over the network: `FooClient::new(channel)`.
/// Cheap to clone; clones share the connection.
pub struct RemoteChannel {
    shared: Arc<Shared>,
    /// A permit taken by `poll_ready` for the next `call`.
    reserved: bool,
}

impl Clone for RemoteChannel {
    fn clone(&self) -> RemoteChannel {
        RemoteChannel { shared: self.shared.clone(), reserved: false }
    }
}

impl Drop for RemoteChannel {
    fn drop(&mut self) {
        if self.reserved {
            self.shared.release();
        }
    }
}

impl std::fmt::Debug for RemoteChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteChannel")
            .field("target", &self.shared.endpoint.target)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl RemoteChannel {
    /// Calls in flight on this channel and its clones (permits held, module docs).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the channel has a live connection now.
    pub fn is_connected(&self) -> bool {
        matches!(&*lock(&self.shared.state), ConnState::Ready(s) if !s.is_closed())
    }

    fn start_call(&mut self, request: http::Request<Body>) -> RemoteFuture {
        if !self.reserved {
            self.shared.in_flight.fetch_add(1, Ordering::AcqRel);
        }
        self.reserved = false;
        let permit = Permit(self.shared.clone());
        if let Err(e) = self.shared.start() {
            return RemoteFuture::ready(Status::unavailable(e.to_string()));
        }
        let (mut parts, body) = request.into_parts();
        let timeout = crate::call::parse_timeout_header(&parts.headers);
        let timeout = match (timeout, self.shared.endpoint.timeout) {
            (Some(t), Some(d)) => Some(t.min(d)),
            (t, d) => t.or(d),
        };
        if let Some(t) = timeout {
            if !parts.headers.contains_key("grpc-timeout") {
                parts.headers.insert("grpc-timeout", encode_timeout(t));
            }
        }
        let mut uri = http::uri::Parts::from(std::mem::take(&mut parts.uri));
        uri.scheme = Some(http::uri::Scheme::HTTP);
        uri.authority = Some(self.shared.endpoint.origin.clone());
        if uri.path_and_query.is_none() {
            uri.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
        }
        parts.uri = match http::Uri::from_parts(uri) {
            Ok(uri) => uri,
            Err(e) => {
                return RemoteFuture::ready(Status::internal(format!("spindle-grpc: bad request URI: {e}")))
            }
        };
        let cancel = Arc::new(CancelFlag::default());
        let body = Body::new(OutBody { inner: body, cancel: cancel.clone() });
        let deadline =
            timeout.map(|t| Deadline::new(Instant::now() + t, self.shared.endpoint.handle.as_ref()));
        let request = http::Request::from_parts(parts, body);
        // Connected (the usual case): send at once; otherwise wait for the connection.
        let stage = match self.shared.ready_sender() {
            Some(mut sender) => Stage::Sending(Box::pin(sender.send_request(request))),
            None => Stage::Waiting(Some(Box::new(request))),
        };
        RemoteFuture {
            stage,
            shared: Some(self.shared.clone()),
            call: Some(CallParts { _permit: permit, deadline, cancel: CancelOnDrop(Some(cancel)) }),
        }
    }
}

impl tower_service::Service<http::Request<Body>> for RemoteChannel {
    type Response = http::Response<RemoteBody>;
    type Error = std::convert::Infallible;
    type Future = RemoteFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.reserved || self.shared.try_reserve() {
            self.reserved = true;
            return Poll::Ready(Ok(()));
        }
        lock(&self.shared.permit_waiters).push(cx.waker().clone());
        if self.shared.try_reserve() {
            self.reserved = true;
            return Poll::Ready(Ok(()));
        }
        Poll::Pending
    }

    fn call(&mut self, request: http::Request<Body>) -> RemoteFuture {
        self.start_call(request)
    }
}

/// A `grpc-timeout` value for `t`: at most 8 digits, in the finest unit that fits.
fn encode_timeout(t: Duration) -> http::HeaderValue {
    const MAX: u128 = 99_999_999;
    let nanos = t.as_nanos();
    let (n, unit) = if nanos <= MAX {
        (nanos, "n")
    } else if nanos / 1_000 <= MAX {
        (nanos.div_ceil(1_000), "u")
    } else if nanos / 1_000_000 <= MAX {
        (nanos.div_ceil(1_000_000), "m")
    } else if t.as_secs() as u128 <= MAX {
        (t.as_secs() as u128, "S")
    } else {
        ((t.as_secs() / 3600).min(MAX as u64) as u128, "H")
    };
    http::HeaderValue::from_str(&format!("{n}{unit}")).expect("digits and a unit letter")
}

/// A permit of [`Shared::in_flight`] (module docs).
struct Permit(Arc<Shared>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Set when the caller drops a call before its end; the request body then fails. Also holds
/// the request body's own failure (tonic's encoding errors), which the call reports in place
/// of the stream reset it causes.
#[derive(Default)]
struct CancelFlag {
    cancelled: AtomicBool,
    waker: Mutex<Option<Waker>>,
    failure: Mutex<Option<Status>>,
}

struct CancelOnDrop(Option<Arc<CancelFlag>>);

impl CancelOnDrop {
    /// The request body's own failure, if it failed.
    fn failure(&self) -> Option<Status> {
        self.0.as_ref().and_then(|flag| lock(&flag.failure).clone())
    }

    /// The call ended normally: the request body is left to finish.
    fn defuse(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.cancelled.store(true, Ordering::Release);
            let waker = lock(&flag.waker).take();
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

/// The request body as hyper sends it: tonic's, failing once the call was dropped.
struct OutBody {
    inner: Body,
    cancel: Arc<CancelFlag>,
}

impl http_body::Body for OutBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let cancelled = || Poll::Ready(Some(Err(Status::cancelled("the call was dropped"))));
        if self.cancel.cancelled.load(Ordering::Acquire) {
            return cancelled();
        }
        let poll = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Err(status))) = &poll {
            // tonic's client reports its encoding errors (its encoding limit among them) as an
            // error of the request body: the call ends with it, as the spec's code.
            *lock(&self.cancel.failure) = Some(crate::limit::respec(status.clone()));
        }
        if poll.is_pending() {
            *lock(&self.cancel.waker) = Some(cx.waker().clone());
            if self.cancel.cancelled.load(Ordering::Acquire) {
                return cancelled();
            }
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A call's deadline timer (module docs, "Deadlines are local too").
enum Deadline {
    Local(spindle::time::Sleep),
    Remote { alarm: Arc<CancelFlag>, task: Option<spindle::task::JoinHandle<()>> },
}

impl Deadline {
    fn new(at: Instant, handle: Option<&spindle::Handle>) -> Deadline {
        if spindle::Handle::on_worker() {
            return Deadline::Local(spindle::time::sleep_until_future(at));
        }
        let alarm = Arc::new(CancelFlag::default());
        let fire = alarm.clone();
        let task = handle.and_then(|h| {
            h.try_spawn_async(async move {
                spindle::time::sleep_until_future(at).await;
                fire.cancelled.store(true, Ordering::Release);
                if let Some(w) = lock(&fire.waker).take() {
                    w.wake();
                }
            })
            .ok()
        });
        if task.is_none() {
            alarm.cancelled.store(true, Ordering::Release);
        }
        Deadline::Remote { alarm, task }
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Deadline::Local(sleep) => Pin::new(sleep).poll(cx),
            Deadline::Remote { alarm, .. } => {
                if alarm.cancelled.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                *lock(&alarm.waker) = Some(cx.waker().clone());
                if alarm.cancelled.load(Ordering::Acquire) {
                    return Poll::Ready(());
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Deadline::Remote { task: Some(task), .. } = self {
            task.abort();
        }
    }
}

fn deadline_exceeded() -> Status {
    Status::deadline_exceeded("deadline exceeded (enforced by the spindle-grpc client)")
}

type SendFuture = Pin<Box<dyn Future<Output = hyper::Result<http::Response<hyper::body::Incoming>>> + Send>>;

enum Stage {
    /// Waiting for a connection (boxed: rare, and the request is large).
    Waiting(Option<Box<http::Request<Body>>>),
    Sending(SendFuture),
    Ready(Option<Box<http::Response<RemoteBody>>>),
}

/// What a call holds until its response body ends.
struct CallParts {
    _permit: Permit,
    deadline: Option<Deadline>,
    cancel: CancelOnDrop,
}

/// The response future of a call on a [`RemoteChannel`].
#[must_use = "futures do nothing unless polled"]
pub struct RemoteFuture {
    stage: Stage,
    /// `None` for a call decided at once.
    shared: Option<Arc<Shared>>,
    call: Option<CallParts>,
}

impl RemoteFuture {
    fn ready(status: Status) -> RemoteFuture {
        RemoteFuture { stage: Stage::Ready(Some(Box::new(status.into_http()))), shared: None, call: None }
    }

    fn fail(&mut self, status: Status) -> Poll<Result<http::Response<RemoteBody>, std::convert::Infallible>> {
        self.stage = Stage::Ready(None);
        // The permit and timers go now; dropping the hyper future resets the stream.
        self.call = None;
        Poll::Ready(Ok(status.into_http()))
    }
}

impl Future for RemoteFuture {
    type Output = Result<http::Response<RemoteBody>, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Stage::Ready(response) = &mut this.stage {
            let response = response.take().expect("spindle-grpc RemoteFuture polled after completion");
            return Poll::Ready(Ok(*response));
        }
        if let Some(deadline) = this.call.as_mut().and_then(|c| c.deadline.as_mut()) {
            if deadline.poll(cx).is_ready() {
                return this.fail(deadline_exceeded());
            }
        }
        if let Stage::Waiting(request) = &mut this.stage {
            let shared = this.shared.as_ref().expect("a waiting call has its channel");
            match shared.poll_sender(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(status)) => return this.fail(status),
                Poll::Ready(Ok(mut sender)) => {
                    let request = request.take().expect("a waiting call has its request");
                    this.stage = Stage::Sending(Box::pin(sender.send_request(*request)));
                }
            }
        }
        let Stage::Sending(send) = &mut this.stage else { unreachable!("the stages above return") };
        match send.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => {
                let local = this.call.as_ref().and_then(|c| c.cancel.failure());
                let status = local.unwrap_or_else(|| status_of(&e));
                this.fail(status)
            }
            Poll::Ready(Ok(response)) => {
                this.stage = Stage::Ready(None);
                let call = this.call.take();
                Poll::Ready(Ok(response.map(|body| {
                    let end = http_body::Body::is_end_stream(&body);
                    let mut body = RemoteBody { body: Some(WireBody::new(body)), call };
                    if end {
                        body.finish();
                    }
                    body
                })))
            }
        }
    }
}

impl std::fmt::Debug for RemoteFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::RemoteFuture")
    }
}

/// The response body of a call on a [`RemoteChannel`]: the server's message frames and
/// trailers, or a trailers frame with the status this side decided (deadline, lost
/// connection).
#[derive(Default)]
pub struct RemoteBody {
    body: Option<WireBody>,
    call: Option<CallParts>,
}

impl RemoteBody {
    /// The call ended: release the permit; the request body may finish on its own.
    fn finish(&mut self) {
        if let Some(call) = self.call.take() {
            call.cancel.defuse();
        }
    }

    fn fail(&mut self, status: &Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.body = None;
        self.call = None;
        Poll::Ready(Some(Ok(crate::call::status_trailers(status))))
    }
}

impl http_body::Body for RemoteBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let Some(body) = this.body.as_mut() else { return Poll::Ready(None) };
        match Pin::new(body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if frame.is_trailers() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(status))) => {
                let local = this.call.as_ref().and_then(|c| c.cancel.failure());
                this.fail(&local.unwrap_or(status))
            }
            Poll::Ready(None) => {
                this.body = None;
                this.finish();
                Poll::Ready(None)
            }
            Poll::Pending => {
                if let Some(deadline) = this.call.as_mut().and_then(|c| c.deadline.as_mut()) {
                    if deadline.poll(cx).is_ready() {
                        return this.fail(&deadline_exceeded());
                    }
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_none()
    }
}

impl std::fmt::Debug for RemoteBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::RemoteBody")
    }
}
