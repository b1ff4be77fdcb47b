//! The request body as the handler sees it ([`RequestBody`]): the client's body, checked on
//! the way by the channel's request [`Scanner`] (module `limit`) and watched for the client's
//! departure (module `call_state`'s [`CallState`]).
//!
//! # Invariants
//!
//! - **Cancelled means the client left** (module `call_state`): once [`CallState::is_cancelled`],
//!   every poll fails with `CANCELLED`, never a clean end.
//! - **A failure is reported once, then given forever.** A request message above the
//!   channel's limit, a second message on a call that takes one, no message at all on such a
//!   call, or the client's body failing is recorded once in [`CallState`] (module `call_state`'s
//!   "the request side failing ends the call"); the poll that finds it is `Pending` (the
//!   reader never sees the offending message, a truncated stream or a clean end), and every
//!   later poll fails with the same status. The messages before the offending one, in the
//!   chunk that carries its prefix, are handed over first, and the failure comes on the next
//!   poll.
//! - **One request message where the method says so.** A body made with `single` (a unary or
//!   server-streaming method, as the service's method table says: module `limit`, "one
//!   request message") never hands over a second message, nor ends cleanly with none: either
//!   fails the call with `INTERNAL` (`limit::cardinality`), as grpc-go does. A body that ends
//!   in the middle of its first message is left to tonic's decoder to report.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use tonic::body::Body;
use tonic::Status;

use super::call_state::CallState;
use crate::limit::{self, Direction, Scanner, Stop};

/// The request body as the handler sees it (module docs).
pub(crate) struct RequestBody {
    inner: Body,
    state: Arc<CallState>,
    /// The channel's request limit (and, for a method taking one message, the count) on the
    /// messages of `inner`.
    scanner: Scanner,
    /// The method takes exactly one request message.
    single: bool,
    /// The request side's failure, once found; `reported` once it is in `state`.
    failure: Option<(Status, bool)>,
}

impl RequestBody {
    /// The request body of a call: `limit` is the channel's request limit; `single` says the
    /// method takes exactly one request message.
    pub(crate) fn new(inner: Body, state: Arc<CallState>, limit: usize, single: bool) -> RequestBody {
        let scanner = if single { Scanner::single(limit) } else { Scanner::new(limit) };
        RequestBody { inner, state, scanner, single, failure: None }
    }

    /// Records `status` as the request side's failure ("a failure is reported once"): wakes
    /// the driver, and this body's reader, whose next poll fails with it.
    fn report(&mut self, status: Status, cx: &Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.state.fail(status.clone());
        self.failure = Some((status, true));
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn cancelled() -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Poll::Ready(Some(Err(Status::cancelled("the client cancelled the call"))))
    }
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        if this.state.is_cancelled() {
            return RequestBody::cancelled();
        }
        match &this.failure {
            None => {}
            // The messages before the offending one went out with the last frame: now fail.
            Some((status, false)) => {
                let status = status.clone();
                return this.report(status, cx);
            }
            // A reader polling again after the failure (the driver has dropped the handler,
            // or is about to): an error, never a clean end.
            Some((status, true)) => return Poll::Ready(Some(Err(status.clone()))),
        }
        let poll = Pin::new(&mut this.inner).poll_frame(cx);
        match poll {
            Poll::Ready(Some(Ok(mut frame))) => {
                if let Some(data) = frame.data_mut() {
                    if let Some(stop) = this.scanner.scan(data) {
                        let (status, at) = match stop {
                            Stop::TooLarge(large) => {
                                (limit::too_large(Direction::Request, large.len, large.limit), large.at)
                            }
                            Stop::Second { at } => (limit::cardinality(false), at),
                        };
                        if at == 0 {
                            return this.report(status, cx);
                        }
                        // Hand over the messages before it, and fail on the next poll.
                        data.truncate(at);
                        this.failure = Some((status, false));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            // tonic's client reports its encoding errors (its encoding limit among them) as an
            // error of its request body.
            Poll::Ready(Some(Err(status))) => this.report(limit::respec(status), cx),
            Poll::Pending => {
                this.state.set_reader(cx.waker());
                // Cancelled between the check and the registration: do not miss it.
                if this.state.is_cancelled() {
                    return RequestBody::cancelled();
                }
                Poll::Pending
            }
            Poll::Ready(None) if this.single && this.scanner.saw_nothing() => {
                this.report(limit::cardinality(true), cx)
            }
            Poll::Ready(None) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        // A call that takes one message and has none is not over: its next poll fails.
        self.inner.is_end_stream()
            && !self.state.is_cancelled()
            && self.failure.is_none()
            && !(self.single && self.scanner.saw_nothing())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self.failure {
            None => self.inner.size_hint(),
            Some(_) => http_body::SizeHint::default(),
        }
    }
}
