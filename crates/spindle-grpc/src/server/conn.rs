//! One connection of the network server: the TLS handshake when asked, hyper's HTTP/2
//! connection driven to its end (drain, cut and idle invariants of module `server`), and the
//! service that turns each request into a call on the channel, or on the server's layered
//! service (module `server::layer`), counted while alive.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use hyper::body::Incoming;
use tonic::Status;

use spindle::net::{CoalescedStream, TcpStream, UnixStream};

use super::admit;
use super::layer::Routes;
use super::serving::{ConnGuard, Shared};
use super::trace::CallTrace;
use crate::channel::{Channel, ResponseBody, ResponseFuture};
use crate::wire::WireBody;
use spindle::graceful::{Drain, Watch};

/// An accepted connection.
pub(super) enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// What each connection of a server is served with: where its requests go, the server's
/// HTTP/2 settings and its TLS configuration (module `builder`'s `Server` sets them; one
/// copy per `serve_*`, shared by its connections).
pub(super) struct ConnSettings {
    pub(super) target: Target,
    pub(super) max_concurrent_streams: Option<u32>,
    pub(super) keepalive_interval: Option<Duration>,
    pub(super) keepalive_timeout: Duration,
    pub(super) idle_timeout: Option<Duration>,
    pub(super) max_header_list_size: u32,
    pub(super) initial_stream_window: u32,
    pub(super) initial_connection_window: u32,
    pub(super) max_send_buf: usize,
    pub(super) max_pending_accept_reset_streams: usize,
    #[cfg(feature = "tls")]
    pub(super) tls: Option<crate::tls::ServerTlsConfig>,
}

/// One connection's task: the TLS handshake if the server has TLS, then [`drive`].
pub(super) async fn serve_connection(
    settings: Arc<ConnSettings>,
    shared: Arc<Shared>,
    conn: Conn,
    guard: ConnGuard,
) {
    let _guard = guard;
    match conn {
        #[cfg(feature = "tls")]
        Conn::Tcp(io) if settings.tls.is_some() => {
            let tls = settings.tls.as_ref().expect("checked by the guard");
            if let Some(io) = crate::tls::accept(tls, Watch::new(shared.signal.clone()), io).await {
                drive(&settings, &shared, crate::tls::TlsIo(io)).await;
            }
        }
        // A socket gathers the frames hyper writes during a burst of the worker's work and
        // sends them together (`spindle::net::CoalescedStream`; under TLS, `tls::accept`
        // puts it below rustls).
        Conn::Tcp(io) => drive(&settings, &shared, CoalescedStream::from(io)).await,
        Conn::Unix(io) => drive(&settings, &shared, CoalescedStream::from(io)).await,
    }
}

/// Drives one connection to its end (module `server`: shutdown and idle invariants).
async fn drive<I>(settings: &ConnSettings, shared: &Arc<Shared>, io: I)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut builder =
        hyper::server::conn::http2::Builder::new(spindle::hyper_exec::TaskExecutor::new().batched(true));
    // Capped: hyper adds these to an `Instant` itself, which panics for `Duration::MAX`
    // ("no limit"); capped, they are 35,000 years.
    builder
        .timer(spindle::hyper_rt::Timer)
        .max_concurrent_streams(settings.max_concurrent_streams)
        .keep_alive_interval(settings.keepalive_interval.map(|t| t.min(spindle::time::NEVER)))
        .keep_alive_timeout(settings.keepalive_timeout.min(spindle::time::NEVER))
        .max_header_list_size(settings.max_header_list_size)
        .initial_stream_window_size(settings.initial_stream_window)
        .initial_connection_window_size(settings.initial_connection_window)
        .max_send_buf_size(settings.max_send_buf)
        .max_pending_accept_reset_streams(settings.max_pending_accept_reset_streams)
        .auto_date_header(false);
    let activity = Arc::new(Activity::default());
    let service =
        ConnService { target: settings.target.clone(), shared: shared.clone(), activity: activity.clone() };
    let mut conn = pin!(builder.serve_connection(io, service));
    let mut shutdown: Watch<Arc<Drain>> = Watch::new(shared.signal.clone());
    let mut draining = false;
    let mut cut: Option<spindle::time::Sleep> = None;
    let idle_timeout = settings.idle_timeout;
    let mut idle = idle_timeout.map(spindle::time::sleep_future);
    let mut idle_seen = activity.generation.load(Ordering::Relaxed);
    let result = poll_fn(|cx| {
        if !draining && shutdown.poll_triggered(cx).is_ready() {
            draining = true;
            conn.as_mut().graceful_shutdown();
            let deadline = shared.signal.deadline().unwrap_or_else(Instant::now);
            cut = Some(spindle::time::sleep_until_future(deadline));
        }
        if let Some(sleep) = cut.as_mut() {
            if Pin::new(sleep).poll(cx).is_ready() {
                if shared.signal.is_triggered() {
                    shared.cut.fetch_add(1, Ordering::AcqRel);
                }
                return Poll::Ready(Err(None));
            }
        }
        if let (Some(sleep), Some(timeout)) = (idle.as_mut(), idle_timeout) {
            if Pin::new(&mut *sleep).poll(cx).is_ready() {
                let now = activity.generation.load(Ordering::Relaxed);
                if now == idle_seen && activity.calls.load(Ordering::Relaxed) == 0 {
                    log::debug!("spindle-grpc: closing a connection idle for {timeout:?}");
                    idle = None;
                    if !draining {
                        draining = true;
                        conn.as_mut().graceful_shutdown();
                    }
                    // A connection still handshaking (no preface yet) only takes the GOAWAY
                    // after its handshake: cut it if it has not ended one period later.
                    if cut.is_none() {
                        let mut sleep = spindle::time::sleep_future(timeout);
                        if Pin::new(&mut sleep).poll(cx).is_ready() {
                            return Poll::Ready(Err(None));
                        }
                        cut = Some(sleep);
                    }
                } else {
                    idle_seen = now;
                    sleep.reset(spindle::time::deadline_after(timeout));
                    // Register the new deadline.
                    let _ = Pin::new(sleep).poll(cx);
                }
            }
        }
        conn.as_mut().poll(cx).map_err(Some)
    })
    .await;
    match result {
        Ok(()) => {}
        Err(None) => log::info!("spindle-grpc: a connection did not end in time after GOAWAY (drain deadline or idle timeout): dropped with its calls"),
        Err(Some(e)) => log::info!("spindle-grpc: connection ended: {e}"),
    }
}

/// Calls in progress on one connection, and a count of call starts and ends (for the idle
/// timeout).
#[derive(Debug, Default)]
struct Activity {
    calls: AtomicUsize,
    generation: AtomicU64,
}

/// What a connection's requests go to: the channel, or the server's layered service.
#[derive(Clone)]
pub(super) enum Target {
    Channel(Channel),
    Routes(Routes),
}

/// hyper's service for one connection: each request is a call on the channel (through the
/// server's layers, if it has any).
#[derive(Clone)]
struct ConnService {
    target: Target,
    shared: Arc<Shared>,
    activity: Arc<Activity>,
}

impl hyper::service::Service<http::Request<Incoming>> for ConnService {
    type Response = http::Response<ServedBody>;
    type Error = std::convert::Infallible;
    type Future = ServedFuture;

    fn call(&self, request: http::Request<Incoming>) -> ServedFuture {
        if let Some(refused) = admit::check(&request) {
            return ServedFuture { inner: Inner::Channel(refused), guard: None, trace: CallTrace::none() };
        }
        let guard = CallGuard::new(&self.shared, &self.activity);
        let trace = CallTrace::new(request.uri().path());
        let request = request.map(|body| tonic::body::Body::new(WireBody::request(body)));
        let inner = {
            let _in_span = trace.enter();
            match &self.target {
                Target::Channel(channel) => Inner::Channel(channel.start(request)),
                Target::Routes(routes) => Inner::Routes(tower::ServiceExt::oneshot(routes.clone(), request)),
            }
        };
        ServedFuture { inner, guard: Some(guard), trace }
    }
}

/// Counts a call in [`ServerStats::calls`](crate::ServerStats::calls) and its connection's
/// [`Activity`] while alive (a refused request has none).
struct CallGuard {
    shared: Arc<Shared>,
    activity: Arc<Activity>,
}

impl CallGuard {
    fn new(shared: &Arc<Shared>, activity: &Arc<Activity>) -> CallGuard {
        shared.calls.fetch_add(1, Ordering::Relaxed);
        shared.calls_total.fetch_add(1, Ordering::Relaxed);
        activity.calls.fetch_add(1, Ordering::Relaxed);
        activity.generation.fetch_add(1, Ordering::Relaxed);
        CallGuard { shared: shared.clone(), activity: activity.clone() }
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.activity.generation.fetch_add(1, Ordering::Relaxed);
        self.activity.calls.fetch_sub(1, Ordering::Relaxed);
        self.shared.calls.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The response future of the channel, or of the layered service.
enum Inner {
    Channel(ResponseFuture),
    Routes(tower::util::Oneshot<Routes, http::Request<tonic::body::Body>>),
}

/// A call's response future as hyper holds it.
struct ServedFuture {
    inner: Inner,
    guard: Option<CallGuard>,
    trace: CallTrace,
}

impl Future for ServedFuture {
    type Output = Result<http::Response<ServedBody>, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let _in_span = this.trace.enter();
        let response = match &mut this.inner {
            Inner::Channel(future) => match std::task::ready!(Pin::new(future).poll(cx)) {
                Ok(response) => response.map(Body::Channel),
                Err(never) => match never {},
            },
            Inner::Routes(future) => match std::task::ready!(Pin::new(future).poll(cx)) {
                Ok(response) => response.map(Body::Routes),
                Err(never) => match never {},
            },
        };
        drop(_in_span);
        let guard = this.guard.take();
        let trace = std::mem::replace(&mut this.trace, CallTrace::none());
        // A trailers-only response (its status in the headers: an error decided before any
        // message) must end the stream with its HEADERS frame, as the gRPC spec says; the
        // channel's body may not say it is empty (a wrapped handler's body), so drop it.
        if let Some(status) = response.headers().get(&Status::GRPC_STATUS) {
            trace.finish(Some(status));
            return Poll::Ready(Ok(response.map(|_| ServedBody {
                body: Body::Channel(ResponseBody::default()),
                _guard: None,
                trace: CallTrace::none(),
            })));
        }
        Poll::Ready(Ok(response.map(|body| ServedBody { body, _guard: guard, trace })))
    }
}

/// The body of the channel's response, or of the layered service's.
enum Body {
    Channel(ResponseBody),
    Routes(tonic::body::Body),
}

/// A call's response body as hyper holds it.
struct ServedBody {
    body: Body,
    _guard: Option<CallGuard>,
    trace: CallTrace,
}

impl http_body::Body for ServedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let in_span = this.trace.enter();
        let poll = match &mut this.body {
            Body::Channel(body) => Pin::new(body).poll_frame(cx),
            Body::Routes(body) => Pin::new(body).poll_frame(cx),
        };
        drop(in_span);
        match &poll {
            Poll::Ready(None) => {
                this._guard = None;
                std::mem::replace(&mut this.trace, CallTrace::none()).finish(None);
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    let status = trailers.get(&Status::GRPC_STATUS);
                    std::mem::replace(&mut this.trace, CallTrace::none()).finish(status);
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let code = http::HeaderValue::from(e.code() as i32);
                std::mem::replace(&mut this.trace, CallTrace::none()).finish(Some(&code));
            }
            Poll::Pending => {}
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        match &self.body {
            Body::Channel(body) => http_body::Body::is_end_stream(body),
            Body::Routes(body) => http_body::Body::is_end_stream(body),
        }
    }
}
