//! Handlers: blocking functions, each call on a fiber of its own, or async functions whose
//! futures the connection's task polls. Both catch panics and answer 500.

use std::any::Any;
use std::convert::Infallible;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};

use crate::server::counters::{CountersRef, WeakCounters};
use crate::server::origin::Origin;
use crate::transport::body::Body;

/// Counts one running handler in its connection's
/// [`Counters::busy`](crate::server::counters::Counters::busy) while alive: a blocking handler's fiber
/// holds it until the fiber ends, even after its stream was reset (the handler then still
/// holds a worker's time or memory until its next park, where it is cancelled). Holds the
/// counters weakly: a handler that outlives its connection does not keep its socket open.
pub(crate) struct Busy(WeakCounters);

impl Busy {
    pub(crate) fn enter(counters: &CountersRef) -> Busy {
        counters.busy.fetch_add(1, Ordering::Relaxed);
        Busy(counters.downgrade())
    }

    /// Counted nowhere: spindle-http's own HTTP/1 path knows when its one handler runs.
    pub(crate) fn untracked() -> Busy {
        Busy(WeakCounters::none())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(counters) = self.0.upgrade() {
            counters.busy.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// How the server turns a request into a response. The response future lives in the
/// connection's task (or, under HTTP/2, in the stream's), which moves between workers:
/// `Send`.
pub(crate) trait Respond: Send + Sync + 'static {
    /// Its output is what hyper's service returns (a `Result` that cannot fail), so that the
    /// response goes through the service's future without one more change of layout (a copy
    /// of the response on every request).
    type Future: Future<Output = Result<Response<Body>, Infallible>> + Send + 'static;
    fn respond(&self, req: Request<Body>, busy: Busy, origin: &Origin) -> Self::Future;
}

/// A blocking handler: each call runs on a fiber of its own, so that the handler may park
/// (channels, sleep, sockets, reading the body) without blocking the worker or the task
/// that drives the connection (which must keep driving hyper's dispatcher meanwhile: that
/// is what reads the body the handler may be waiting for). The fiber never moves once
/// started; the tasks may.
///
/// **No handler outlives its request.** Dropping the response future before the fiber has
/// answered (an HTTP/2 stream reset by the client, a connection that ended) cancels the
/// fiber: it unwinds at its next park. Until it ends it stays counted as busy (its [`Busy`]
/// lives in the fiber), so that a client cannot pile up handlers by resetting their streams.
///
/// The fiber starts at once, inside the task's poll (`spawn_now`): a handler that does not
/// park has answered when it returns, with no queueing and no wake-up. Under HTTP/1 it
/// starts when hyper hands over the request, in the connection task's poll (which serves
/// one request at a time anyway); under HTTP/2 at the response future's first poll, in the
/// stream's own task (hyper spawns one per stream), so that the connection's other streams
/// go on while a handler runs.
pub(crate) struct Blocking<F>(pub(crate) Arc<F>);

impl<F, B> Respond for Blocking<F>
where
    F: Fn(Request<Body>) -> Response<B> + Send + Sync + 'static,
    B: Into<Body>,
{
    type Future = BlockingResponse<F>;

    fn respond(&self, req: Request<Body>, busy: Busy, origin: &Origin) -> Self::Future {
        let state = if origin.http2 {
            // The box first, then the call written into it (`Box::new` built it on the
            // stack and copied it in: one more copy of the request).
            let (handler, origin) = (self.0.clone(), *origin);
            let call = Box::new_uninit();
            State::Start(Box::write(call, Call { handler, req, origin, busy }))
        } else {
            // At once: hyper's HTTP/1 dispatcher reads the socket (to notice a client that
            // goes away) before it polls this future, and the request, while alive, pins
            // its read buffer, which would then be reallocated for every request. Started
            // here rather than through a `Call` (each hop was one more copy of the request).
            start(self.0.clone(), req, origin, busy)
        };
        BlockingResponse { state }
    }
}

/// A handler call not started yet.
pub(crate) struct Call<F> {
    handler: Arc<F>,
    req: Request<Body>,
    origin: Origin,
    busy: Busy,
}

/// Starts the handler's fiber, which runs at once until it parks or finishes. The fiber
/// holds `busy` until it ends.
#[inline(always)]
fn start<F, B>(handler: Arc<F>, req: Request<Body>, origin: &Origin, busy: Busy) -> State<F>
where
    F: Fn(Request<Body>) -> Response<B> + Send + Sync + 'static,
    B: Into<Body>,
{
    let name = origin.handler_name(&req);
    let spawned =
        spindle::fiber::Builder::new().name(name).stack_size(origin.stack_size).spawn_now(move || {
            let _busy = busy;
            let result = catch_unwind(AssertUnwindSafe(|| handler(req).map(Into::into)));
            result.unwrap_or_else(panicked)
        });
    match spawned {
        Ok(join) => State::Waiting(join),
        Err(e) => {
            log::warn!("spindle-http: could not spawn a handler fiber: {e}");
            State::Failed
        }
    }
}

/// The response future of a blocking handler: the call until its first poll, then its
/// fiber's join handle. Dropped before the fiber answered, it cancels the fiber.
pub(crate) struct BlockingResponse<F> {
    state: State<F>,
}

enum State<F> {
    /// HTTP/2: the call, started at the first poll. Boxed: HTTP/1 never keeps one, and this
    /// future's size is memory that every connection holds (hyper keeps its slot).
    Start(Box<Call<F>>),
    Waiting(spindle::fiber::JoinHandle<Response<Body>>),
    /// No fiber could be spawned.
    Failed,
}

impl<F, B> Future for BlockingResponse<F>
where
    F: Fn(Request<Body>) -> Response<B> + Send + Sync + 'static,
    B: Into<Body>,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let state = &mut self.get_mut().state;
        if matches!(state, State::Start(_)) {
            let State::Start(call) = std::mem::replace(state, State::Failed) else { unreachable!() };
            let Call { handler, req, origin, busy } = *call;
            *state = start(handler, req, &origin, busy);
        }
        let State::Waiting(join) = state else { return Poll::Ready(Ok(unavailable())) };
        match Pin::new(join).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(res)) => Poll::Ready(Ok(res)),
            // The fiber catches the handler's panics: this is the runtime's shutdown
            // cancelling it (the task polling this is being cancelled too).
            Poll::Ready(Err(_)) => Poll::Ready(Ok(unavailable())),
        }
    }
}

impl<F> Drop for BlockingResponse<F> {
    fn drop(&mut self) {
        // The request's stream was reset or its connection ended before the answer: nobody
        // will read it, so the handler stops at its next park (module doc of `Blocking`).
        if let State::Waiting(join) = &self.state {
            if !join.is_finished() {
                join.cancel();
            }
        }
    }
}

fn unavailable() -> Response<Body> {
    status(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable\n")
}

/// An async handler: its future is polled by the connection's task.
pub(crate) struct Async<F>(pub(crate) F);

impl<F, Fut, B> Respond for Async<F>
where
    F: Fn(Request<Body>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Into<Body>,
{
    type Future = CatchPanic<Fut>;

    fn respond(&self, req: Request<Body>, busy: Busy, _origin: &Origin) -> Self::Future {
        match catch_unwind(AssertUnwindSafe(|| (self.0)(req))) {
            Ok(future) => CatchPanic { future: Some(future), early: None, _busy: Some(busy) },
            Err(payload) => CatchPanic { future: None, early: Some(panicked(payload)), _busy: None },
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of an async handler: a panic while polling becomes a 500.
    pub(crate) struct CatchPanic<Fut> {
        #[pin]
        future: Option<Fut>,
        early: Option<Response<Body>>,
        _busy: Option<Busy>,
    }
}

impl<Fut, B> Future for CatchPanic<Fut>
where
    Fut: Future<Output = Response<B>>,
    B: Into<Body>,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(res) = this.early.take() {
            return Poll::Ready(Ok(res));
        }
        let Some(future) = this.future.as_mut().as_pin_mut() else {
            panic!("spindle-http response future polled after completion");
        };
        let result = catch_unwind(AssertUnwindSafe(|| future.poll(cx)));
        let response = match result {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(res)) => res.map(Into::into),
            Err(payload) => panicked(payload),
        };
        this.future.set(None);
        this._busy.take();
        Poll::Ready(Ok(response))
    }
}

/// The 500 answer to a handler panic. A fiber being cancelled by its runtime's shutdown
/// unwinds with a `Cancelled` payload: that one keeps unwinding.
fn panicked(payload: Box<dyn Any + Send>) -> Response<Body> {
    if payload.is::<spindle::fiber::Cancelled>() {
        std::panic::resume_unwind(payload);
    }
    status(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error\n")
}

fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut res = Response::new(Body::from(text));
    *res.status_mut() = code;
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    res
}
