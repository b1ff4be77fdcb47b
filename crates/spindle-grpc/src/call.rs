//! One call run on the caller's worker: the handler's future and response body are polled by
//! whoever polls the client's [`ResponseFuture`] and [`ResponseBody`], on the same worker,
//! with no task, queue or lock in between.
//!
//! # Invariants
//!
//! - **The handler lives in the client's future.** It lives inside the client's future (then inside its body): dropping either on
//!   the client side drops the handler. That is how client cancellation reaches a handler.
//! - **One status per call.** A call ends with exactly one status for the client: the handler's (trailers, or a
//!   trailers-only response), or the channel's (`DEADLINE_EXCEEDED` when the deadline timer
//!   fires first, `INTERNAL` when the handler panics). Once the channel has decided a status,
//!   the handler is dropped and never polled again.
//! - **Cancelled means the client left.** [`CallState::cancelled`] is set only when the client side is dropped before the call
//!   ended; then the request body, if the handler still holds it (say in a task it
//!   spawned), fails with `CANCELLED` instead of ending like a finished upload.
//! - **Deadlines on the polling worker.** The deadline timer is a spindle timer of the worker that polls the call; the call is
//!   only ever polled on a spindle worker (the caller's, or a pump task's: module `pipe`).
//! - **The request side failing ends the call.** A request message above the channel's limit
//!   (module `limit`), a second request message or none on a method that takes exactly one
//!   (module `limit`, "one request message"), or the client's request body failing (tonic's
//!   client reports its encoding errors, its `max_encoding_message_size` among them, that
//!   way), is recorded once in [`CallState`] by the request body (module `request`), which
//!   from then on gives the handler nothing:
//!   its poll is `Pending` (the handler never sees the oversized message, a truncated stream
//!   or a clean end). Whoever drives the call (polls the handler: the client's future and
//!   body, or a pump) checks for the failure after every poll of the handler and before every
//!   poll of its body, and ends the call with it ("one status per call"). The driver's waker is
//!   registered in [`CallState`] whenever the handler is pending, so a request body read
//!   elsewhere (a task the handler spawned) wakes the driver when it fails; that reader is
//!   woken too, and its next poll fails with the same status.

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

use crate::limit::{self, Direction, Scanner, Stop};
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
    /// Set (under the `failure` lock) once `failure` holds a status ("the request side failing ends the call").
    failed: AtomicBool,
    failure: Mutex<Failure>,
}

/// The request side's failure and the waker of the call's driver ("the request side failing ends the call").
#[derive(Debug, Default)]
struct Failure {
    status: Option<Status>,
    driver: Option<Waker>,
}

impl CallState {
    /// Whether the client side was dropped before the call ended ("cancelled means the client left").
    #[inline]
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Registers the waker of the request's reader, woken when the call is cancelled.
    pub(crate) fn set_reader(&self, waker: &Waker) {
        *self.reader.lock().unwrap_or_else(|e| e.into_inner()) = Some(waker.clone());
    }

    fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        let waker = self.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn lock_failure(&self) -> std::sync::MutexGuard<'_, Failure> {
        self.failure.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the request side's failure (the first one counts) and wakes the driver.
    pub(crate) fn fail(&self, status: Status) {
        let driver = {
            let mut failure = self.lock_failure();
            if failure.status.is_none() {
                failure.status = Some(status);
                self.failed.store(true, Ordering::Release);
            }
            failure.driver.take()
        };
        if let Some(w) = driver {
            w.wake();
        }
    }

    /// The request side's failure, if any: one atomic load while there is none.
    #[inline]
    fn failure(&self) -> Option<Status> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.lock_failure().status.clone()
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

/// Held with the handler (in the client's future, then body; or in the pump task) by whoever
/// drives the call. Dropped before [`End::set_ended`], it cancels the call ("cancelled means the client left").
#[derive(Debug)]
pub(crate) struct End {
    /// `None` for a typed call without a request stream: nothing reads the request, so there
    /// is nothing to cancel or to fail (module `typed`).
    state: Option<Arc<CallState>>,
    ended: bool,
    /// The driver's waker as last registered in `state` (so that an unchanged waker is not
    /// registered again: no lock while the driver stays the same).
    driver: Option<Waker>,
    _live: Option<LiveCall>,
}

impl End {
    pub(crate) fn new(state: Arc<CallState>, live: Option<LiveCall>) -> End {
        End::with_state(Some(state), live)
    }

    pub(crate) fn with_state(state: Option<Arc<CallState>>, live: Option<LiveCall>) -> End {
        End { state, ended: false, driver: None, _live: live }
    }

    pub(crate) fn set_ended(&mut self) {
        self.ended = true;
    }

    /// The request side's failure, if any ("the request side failing ends the call").
    #[inline]
    pub(crate) fn failure(&self) -> Option<Status> {
        self.state.as_ref()?.failure()
    }

    /// Before the driver returns `Pending`: registers its waker for a failure of the request
    /// side, and returns the failure if one came meanwhile ("the request side failing ends the call").
    pub(crate) fn pending(&mut self, cx: &Context<'_>) -> Option<Status> {
        let state = self.state.as_ref()?;
        if let Some(status) = state.failure() {
            return Some(status);
        }
        if self.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            // Still registered: only CallState::fail takes it, and it sets `failed` first.
            return None;
        }
        let waker = cx.waker().clone();
        let mut failure = state.lock_failure();
        failure.driver = Some(waker.clone());
        self.driver = Some(waker);
        failure.status.clone()
    }
}

impl Drop for End {
    fn drop(&mut self) {
        if let (false, Some(state)) = (self.ended, &self.state) {
            state.cancel();
        }
    }
}

/// Parses a `grpc-timeout` header value: 1 to 8 ASCII digits, then one unit of `H M S m u n`
/// (the gRPC spec's `TimeoutValue TimeoutUnit`); `None` for anything else (a sign, a space,
/// a ninth digit). The network server refuses a request whose value is malformed (module
/// `admit`).
pub(crate) fn parse_timeout(value: &http::HeaderValue) -> Option<Duration> {
    let (&unit, digits) = value.as_bytes().split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // At most 99,999,999: no overflow below, in hours either.
    let n = digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `grpc-timeout`, named once: a lookup by `&str` parses the name on every call (~165
/// instructions of a unary call in process, callgrind).
pub(crate) static GRPC_TIMEOUT: http::HeaderName = http::HeaderName::from_static("grpc-timeout");

/// The `grpc-timeout` header's value, if any. A request carries a few headers (tonic's
/// client sends `te` and `content-type`): comparing names is cheaper than hashing one.
fn timeout_value(headers: &http::HeaderMap) -> Option<&http::HeaderValue> {
    if headers.len() <= 4 {
        headers.iter().find(|(name, _)| **name == GRPC_TIMEOUT).map(|(_, value)| value)
    } else {
        headers.get(&GRPC_TIMEOUT)
    }
}

/// The timeout in a `grpc-timeout` header, if any and valid.
pub(crate) fn parse_timeout_header(headers: &http::HeaderMap) -> Option<Duration> {
    parse_timeout(timeout_value(headers)?)
}

/// The deadline of a call, from its `grpc-timeout` header.
pub(crate) fn deadline_of(headers: &http::HeaderMap) -> Option<Instant> {
    let timeout = parse_timeout(timeout_value(headers)?)?;
    Instant::now().checked_add(timeout)
}

pub(crate) fn deadline_exceeded() -> Status {
    Status::deadline_exceeded("deadline exceeded (enforced by spindle-grpc)")
}

pub(crate) fn panicked(payload: &(dyn std::any::Any + Send)) -> Status {
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
    /// The channel's response limit, for the body's [`Scanner`].
    pub(crate) response_limit: usize,
}

impl Direct {
    /// Polls the handler to its response head; see "one status per call" and "the request side failing ends the call".
    pub(crate) fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<http::Response<ResponseBody>> {
        let Some(handler) = self.handler.as_mut() else {
            panic!("spindle-grpc ResponseFuture polled after completion");
        };
        match catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll(cx))) {
            Ok(Poll::Ready(Ok(mut response))) => {
                if let Some(status) = self.end.as_ref().and_then(End::failure) {
                    return Poll::Ready(self.fail(status));
                }
                self.handler = None;
                // A trailers-only response (an empty body) carries its status in the headers.
                if response.body().is_end_stream() {
                    limit::respec_headers(response.headers_mut());
                }
                // (A trailers-only response ends the call with its headers; the client then
                // drops the empty body unread, which marks the call cancelled: harmless, the
                // handler has finished.)
                let end = self.end.take();
                let deadline = self.deadline.take();
                let scanner = Scanner::new(self.response_limit);
                Poll::Ready(response.map(|body| ResponseBody::direct(body, deadline, end, scanner)))
            }
            Ok(Poll::Ready(Err(never))) => match never {},
            Ok(Poll::Pending) => {
                if let Some(status) = self.end.as_mut().and_then(|end| end.pending(cx)) {
                    return Poll::Ready(self.fail(status));
                }
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
        self.handler = None; // drop the handler first ("one status per call")
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
    /// The channel's response limit on the messages of `body`.
    scanner: Scanner,
    /// The status that ends the call after the frame just returned (a response message above
    /// the limit, cut off with the messages before it returned: module `limit`).
    then: Option<Box<Status>>,
}

impl ResponseBody {
    fn direct(body: Body, deadline: Option<Sleep>, end: Option<End>, scanner: Scanner) -> ResponseBody {
        ResponseBody {
            kind: BodyKind::Direct(DirectBody { body: Some(body), deadline, end, scanner, then: None }),
        }
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

    /// Ends the call with `status` ("one status per call").
    fn fail(&mut self, status: &Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.finish();
        Poll::Ready(Some(Ok(status_trailers(status))))
    }

    pub(crate) fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(status) = self.then.take() {
            return Poll::Ready(Some(Ok(status_trailers(&status))));
        }
        let Some(body) = self.body.as_mut() else { return Poll::Ready(None) };
        // The request side failed in the handler's last poll ("the request side failing ends the call").
        if let Some(status) = self.end.as_ref().and_then(End::failure) {
            return self.fail(&status);
        }
        match catch_unwind(AssertUnwindSafe(|| Pin::new(&mut *body).poll_frame(cx))) {
            Ok(Poll::Ready(Some(Ok(mut frame)))) => {
                if let Some(data) = frame.data_mut() {
                    // (A response scanner counts no messages: it stops only on a size.)
                    if let Some(Stop::TooLarge(large)) = self.scanner.scan(data) {
                        let status = limit::too_large(Direction::Response, large.len, large.limit);
                        if large.at == 0 {
                            return self.fail(&status);
                        }
                        // Deliver the messages before it, then the status.
                        data.truncate(large.at);
                        self.finish();
                        self.then = Some(Box::new(status));
                    }
                } else if let Some(trailers) = frame.trailers_mut() {
                    limit::respec_headers(trailers);
                    self.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Ok(Poll::Ready(Some(Err(status)))) => self.fail(&limit::respec(status)),
            Ok(Poll::Ready(None)) => {
                self.finish();
                Poll::Ready(None)
            }
            Ok(Poll::Pending) => {
                if let Some(status) = self.end.as_mut().and_then(|end| end.pending(cx)) {
                    return self.fail(&status);
                }
                if let Some(sleep) = self.deadline.as_mut() {
                    if Pin::new(sleep).poll(cx).is_ready() {
                        return self.fail(&deadline_exceeded());
                    }
                }
                Poll::Pending
            }
            Err(payload) => {
                let status = panicked(&*payload);
                self.fail(&status)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_none() && self.then.is_none()
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
