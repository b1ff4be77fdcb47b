//! One call run on the caller's worker ([`Direct`], then [`DirectBody`]): the handler's future
//! and response body are polled by whoever polls the client's `ResponseFuture` and
//! `ResponseBody` (module `response`), on the same worker, with no task, queue or lock in
//! between; or by a pump task, for a caller outside any worker (module `pipe`).
//!
//! # Invariants
//!
//! - **The handler lives in the client's future.** It lives inside the client's future (then
//!   inside its body): dropping either on the client side drops the handler. That is how
//!   client cancellation reaches a handler (module `call_state`, "cancelled means the client
//!   left").
//! - **One status per call.** A call ends with exactly one status for the client: the
//!   handler's (trailers, or a trailers-only response), or the channel's (`DEADLINE_EXCEEDED`
//!   when the deadline timer fires first, `INTERNAL` when the handler panics, the request
//!   side's failure: module `call_state`, "the request side failing ends the call"). Once the
//!   channel has decided a status, the handler is dropped and never polled again.
//! - **Deadlines on the polling worker.** The deadline timer is a spindle timer of the worker
//!   that polls the call; the call is only ever polled on a spindle worker (the caller's, or
//!   a pump task's: module `pipe`).

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as _, Frame};
use spindle::time::Sleep;
use tonic::body::Body;
use tonic::Status;

use super::call_state::End;
use crate::limit::{self, Direction, Scanner, Stop};
use crate::status::{deadline_exceeded, panicked, status_trailers};

/// What a registered service returns for one call.
pub(crate) type HandlerFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<Body>, std::convert::Infallible>> + Send>>;

/// A call driven to its response head: the handler, its deadline and its [`End`].
pub(crate) struct Direct {
    pub(crate) handler: Option<HandlerFuture>,
    pub(crate) deadline: Option<Sleep>,
    pub(crate) end: Option<End>,
    /// The channel's response limit, for the body's [`Scanner`].
    pub(crate) response_limit: usize,
}

impl Direct {
    /// Polls the handler to its response head; see "one status per call" and "the request side
    /// failing ends the call". A response without a body (`None`) ends the call with its headers.
    pub(crate) fn poll_head(&mut self, cx: &mut Context<'_>) -> Poll<http::Response<Option<DirectBody>>> {
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
                Poll::Ready(response.map(|body| Some(DirectBody::new(body, deadline, end, scanner))))
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

    fn fail(&mut self, status: Status) -> http::Response<Option<DirectBody>> {
        self.handler = None; // drop the handler first ("one status per call")
        self.deadline = None;
        if let Some(mut end) = self.end.take() {
            end.set_ended();
        }
        status.into_http()
    }
}

/// The response body of a call driven in the caller's call (or a pump's): the handler's body
/// under the deadline, the response limit and the panic guard.
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

impl DirectBody {
    fn new(body: Body, deadline: Option<Sleep>, end: Option<End>, scanner: Scanner) -> DirectBody {
        DirectBody { body: Some(body), deadline, end, scanner, then: None }
    }

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

    pub(crate) fn is_end_stream(&self) -> bool {
        self.body.is_none() && self.then.is_none()
    }
}
