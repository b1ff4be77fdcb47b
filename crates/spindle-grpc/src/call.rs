//! One call run on the caller's worker: the handler's future and response body are polled by
//! whoever polls the client's [`ResponseFuture`] and [`ResponseBody`], on the same worker,
//! with no task, queue or lock in between.
//!
//! # Invariants
//!
//! 1. The handler lives inside the client's future (then inside its body): dropping either on
//!    the client side drops the handler. That is how client cancellation reaches a handler.
//! 2. A call ends with exactly one status for the client: the handler's (trailers, or a
//!    trailers-only response), or the channel's (`DEADLINE_EXCEEDED` when the deadline timer
//!    fires first, `INTERNAL` when the handler panics). Once the channel has decided a status,
//!    the handler is dropped and never polled again.
//! 3. [`CallState::cancelled`] is set only when the client side is dropped before the call
//!    ended; then the request body, if the handler still holds it (say in a task it
//!    spawned), fails with `CANCELLED` instead of ending like a finished upload.
//! 4. The deadline timer is a spindle timer of the worker that polls the call; the call is
//!    only ever polled on a spindle worker (the caller's, or a pump task's: module `pipe`).

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body as _, Frame};
use spindle::time::Sleep;
use tonic::body::Body;
use tonic::Status;

use crate::pipe;

/// What a registered service returns for one call.
pub(crate) type HandlerFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, std::convert::Infallible>> + Send>>;

/// Shared by the client's side of a call and the request body the handler reads.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    cancelled: AtomicBool,
    /// The waker of the request body's reader, while it waits for the client's next message.
    reader: Mutex<Option<Waker>>,
}

impl CallState {
    fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        let waker = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Counts a call in [`crate::Channel::live_calls`] while it lives.
#[derive(Debug)]
pub(crate) struct LiveCall(Arc<AtomicUsize>);

impl LiveCall {
    pub(crate) fn new(count: &Arc<AtomicUsize>) -> LiveCall {
        count.fetch_add(1, Ordering::Relaxed);
        LiveCall(count.clone())
    }
}

impl Drop for LiveCall {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Held with the handler (in the client's future, then body; or in the pump task). Dropped
/// before [`End::set_ended`], it cancels the call (invariant 3).
#[derive(Debug)]
pub(crate) struct End {
    state: Arc<CallState>,
    ended: bool,
    _live: Option<LiveCall>,
}

impl End {
    pub(crate) fn new(state: Arc<CallState>, live: Option<LiveCall>) -> End {
        End { state, ended: false, _live: live }
    }

    pub(crate) fn set_ended(&mut self) {
        self.ended = true;
    }
}

impl Drop for End {
    fn drop(&mut self) {
        if !self.ended {
            self.state.cancel();
        }
    }
}

/// The request body as the handler sees it: the client's body, failing with `CANCELLED` once
/// the client has gone (invariant 3).
pub(crate) struct RequestBody {
    pub(crate) inner: Body,
    pub(crate) state: Arc<CallState>,
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.state.cancelled.load(Ordering::Acquire) {
            return Poll::Ready(Some(Err(Status::cancelled("the client cancelled the call"))));
        }
        let poll = Pin::new(&mut self.inner).poll_frame(cx);
        if poll.is_pending() {
            *self.state.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            // Cancelled between the check and the registration: do not miss it.
            if self.state.cancelled.load(Ordering::Acquire) {
                return Poll::Ready(Some(Err(Status::cancelled("the client cancelled the call"))));
            }
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream() && !self.state.cancelled.load(Ordering::Relaxed)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Parses a `grpc-timeout` header value (`<up to 8 digits><H|M|S|m|u|n>`).
pub(crate) fn parse_timeout(value: &http::HeaderValue) -> Option<Duration> {
    let s = value.to_str().ok()?;
    if s.len() < 2 || s.len() > 9 {
        return None;
    }
    let (digits, unit) = s.split_at(s.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The deadline of a call, from its `grpc-timeout` header.
pub(crate) fn deadline_of(headers: &http::HeaderMap) -> Option<Instant> {
    let timeout = parse_timeout(headers.get("grpc-timeout")?)?;
    Instant::now().checked_add(timeout)
}

fn deadline_exceeded() -> Status {
    Status::deadline_exceeded("deadline exceeded (enforced by spindle-grpc)")
}

fn panicked(payload: &(dyn std::any::Any + Send)) -> Status {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic");
    log::error!("spindle-grpc: a handler panicked: {what}");
    Status::internal(format!("the handler panicked: {what}"))
}

/// A trailers frame carrying `status`.
pub(crate) fn status_trailers(status: &Status) -> Frame<Bytes> {
    let mut trailers = http::HeaderMap::with_capacity(2);
    // add_header fails only on a message that cannot be percent-encoded into a header value.
    if status.add_header(&mut trailers).is_err() {
        trailers.insert(Status::GRPC_STATUS, (status.code() as i32).into());
    }
    Frame::trailers(trailers)
}

/// The response future of a call: see the module doc and [`crate::Channel`].
#[must_use = "futures do nothing unless polled"]
pub struct ResponseFuture {
    pub(crate) kind: FutureKind,
}

pub(crate) enum FutureKind {
    /// Decided without a handler (unknown service, no runtime). Boxed: the common variants
    /// stay small, and futures are moved around by value.
    Ready(Option<Box<http::Response<ResponseBody>>>),
    /// The handler runs right here, on the caller's worker.
    Direct(Direct),
    /// The handler runs in a pump task on the channel's runtime (the caller is no worker).
    Remote(pipe::ClientFuture),
}

pub(crate) struct Direct {
    pub(crate) handler: Option<HandlerFuture>,
    pub(crate) deadline: Option<Sleep>,
    pub(crate) end: Option<End>,
}

impl Direct {
    /// Polls the handler to its response head; see invariant 2.
    pub(crate) fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<http::Response<ResponseBody>> {
        let Some(handler) = self.handler.as_mut() else {
            panic!("spindle-grpc ResponseFuture polled after completion");
        };
        match catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll(cx))) {
            Ok(Poll::Ready(Ok(response))) => {
                self.handler = None;
                // (A trailers-only response ends the call with its headers; the client then
                // drops the empty body unread, which marks the call cancelled: harmless, the
                // handler has finished.)
                let end = self.end.take();
                let deadline = self.deadline.take();
                Poll::Ready(response.map(|body| ResponseBody::direct(body, deadline, end)))
            }
            Ok(Poll::Ready(Err(never))) => match never {},
            Ok(Poll::Pending) => {
                if let Some(sleep) = self.deadline.as_mut() {
                    if Pin::new(sleep).poll(cx).is_ready() {
                        return Poll::Ready(self.fail(deadline_exceeded()));
                    }
                }
                Poll::Pending
            }
            Err(payload) => Poll::Ready(self.fail(panicked(&*payload))),
        }
    }

    fn fail(&mut self, status: Status) -> http::Response<ResponseBody> {
        self.handler = None; // drop the handler first (invariant 2)
        self.deadline = None;
        if let Some(mut end) = self.end.take() {
            end.set_ended();
        }
        status.into_http()
    }
}

impl Future for ResponseFuture {
    type Output = Result<http::Response<ResponseBody>, std::convert::Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.kind {
            FutureKind::Ready(response) => Poll::Ready(Ok(*response
                .take()
                .expect("spindle-grpc ResponseFuture polled after completion"))),
            FutureKind::Direct(direct) => direct.poll_head(cx).map(Ok),
            FutureKind::Remote(remote) => Pin::new(remote).poll(cx).map(Ok),
        }
    }
}

impl std::fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::ResponseFuture")
    }
}

/// The response body of a call on a [`crate::Channel`]: gRPC frames and then trailers, as
/// tonic's client expects them.
#[derive(Default)]
pub struct ResponseBody {
    pub(crate) kind: BodyKind,
}

#[derive(Default)]
pub(crate) enum BodyKind {
    /// Trailers-only response, or finished.
    #[default]
    Empty,
    Direct(DirectBody),
    Remote(pipe::ClientBody),
}

pub(crate) struct DirectBody {
    body: Option<Body>,
    deadline: Option<Sleep>,
    end: Option<End>,
}

impl ResponseBody {
    fn direct(body: Body, deadline: Option<Sleep>, end: Option<End>) -> ResponseBody {
        ResponseBody { kind: BodyKind::Direct(DirectBody { body: Some(body), deadline, end }) }
    }
}

impl DirectBody {
    fn finish(&mut self) {
        self.body = None;
        self.deadline = None;
        if let Some(mut end) = self.end.take() {
            end.set_ended();
        }
    }

    pub(crate) fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(body) = self.body.as_mut() else { return Poll::Ready(None) };
        match catch_unwind(AssertUnwindSafe(|| Pin::new(&mut *body).poll_frame(cx))) {
            Ok(Poll::Ready(Some(Ok(frame)))) => {
                if frame.is_trailers() {
                    self.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Ok(Poll::Ready(Some(Err(status)))) => {
                self.finish();
                Poll::Ready(Some(Ok(status_trailers(&status))))
            }
            Ok(Poll::Ready(None)) => {
                self.finish();
                Poll::Ready(None)
            }
            Ok(Poll::Pending) => {
                if let Some(sleep) = self.deadline.as_mut() {
                    if Pin::new(sleep).poll(cx).is_ready() {
                        self.finish();
                        return Poll::Ready(Some(Ok(status_trailers(&deadline_exceeded()))));
                    }
                }
                Poll::Pending
            }
            Err(payload) => {
                let status = panicked(&*payload);
                self.finish();
                Poll::Ready(Some(Ok(status_trailers(&status))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_none()
    }
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match &mut self.kind {
            BodyKind::Empty => Poll::Ready(None),
            BodyKind::Direct(direct) => direct.poll_frame(cx),
            BodyKind::Remote(remote) => remote.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Empty => true,
            BodyKind::Direct(direct) => direct.is_end_stream(),
            BodyKind::Remote(remote) => remote.is_end_stream(),
        }
    }
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spindle_grpc::ResponseBody")
    }
}
