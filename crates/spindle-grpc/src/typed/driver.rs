//! A typed call's handler run in the caller's call: the [`Driver`] owns the handler, the
//! deadline timer and the call's end guard, and polls the handler under the channel's rules.
//!
//! # Invariants
//!
//! - **One status, then nothing** (module `channel::direct`'s "one status per call"): a status decided by the
//!   channel (the deadline fired, the handler panicked, the request side failed) or the
//!   handler's own error ends the call: the handler is dropped first, then the end guard is
//!   marked ended, so a finished call is never reported as cancelled.
//! - **The driver is the only one to poll the handler**, always on a spindle worker (the
//!   caller's, or a pump task's: module `pump`); the deadline is a spindle timer of that
//!   worker, polled whenever the handler is pending.
//! - **The request side's failure is seen after every poll of the handler** and, while the
//!   handler is pending, the driver's waker is registered for it (module
//!   `channel::call_state`'s "the request side failing ends the call").
//! - **Panics stay in the call**: every call into the handler (its head, its stream, its
//!   trailers hook) runs under `catch_unwind`; a panic ends the call with `INTERNAL`.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use spindle::time::Sleep;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::handler::{BoxHandler, Head};
use crate::channel::call_state::End;
use crate::limit;
use crate::status::{deadline_exceeded, panicked};

/// A typed call's handler with what the channel enforces around it (module doc).
pub(crate) struct Driver {
    handler: Option<BoxHandler>,
    deadline: Option<Sleep>,
    end: Option<End>,
}

impl Driver {
    pub(crate) fn new(handler: BoxHandler, deadline: Option<Sleep>, end: End) -> Driver {
        Driver { handler: Some(handler), deadline, end: Some(end) }
    }

    /// Polls the handler to its response head (a unary response's message into `message`).
    pub(crate) fn poll_head(
        &mut self,
        cx: &mut Context<'_>,
        message: &mut dyn Any,
    ) -> Poll<Result<Head, Status>> {
        let Some(handler) = self.handler.as_mut() else {
            panic!("spindle-grpc typed call polled after completion");
        };
        match catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll_head(cx, message))) {
            Ok(Poll::Ready(Ok(head))) => match self.failure() {
                Some(status) => Poll::Ready(Err(self.fail(status))),
                None => Poll::Ready(Ok(head)),
            },
            Ok(Poll::Ready(Err(status))) => Poll::Ready(Err(self.end_with(status))),
            Ok(Poll::Pending) => match self.check(cx) {
                Some(status) => Poll::Ready(Err(self.fail(status))),
                None => Poll::Pending,
            },
            Err(payload) => Poll::Ready(Err(self.fail(panicked(&*payload)))),
        }
    }

    /// Polls a streaming response for its next message, into `message`. `None` at the end of
    /// the stream (then [`Driver::trailers`] and [`Driver::finish`]) or after the call ended.
    #[inline]
    pub(crate) fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        message: &mut dyn Any,
    ) -> Poll<Option<Result<(), Status>>> {
        // The request side failed during the handler's last poll.
        if let Some(status) = self.failure() {
            return Poll::Ready(Some(Err(self.fail(status))));
        }
        let Some(handler) = self.handler.as_mut() else { return Poll::Ready(None) };
        match catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll_next(cx, message))) {
            Ok(Poll::Ready(Some(Ok(())))) => Poll::Ready(Some(Ok(()))),
            Ok(Poll::Ready(Some(Err(status)))) => Poll::Ready(Some(Err(self.end_with(status)))),
            Ok(Poll::Ready(None)) => Poll::Ready(None),
            Ok(Poll::Pending) => match self.check(cx) {
                Some(status) => Poll::Ready(Some(Err(self.fail(status)))),
                None => Poll::Pending,
            },
            Err(payload) => Poll::Ready(Some(Err(self.fail(panicked(&*payload))))),
        }
    }

    /// Lets the handler add its trailing metadata ([`super::Handler::trailers`]).
    pub(crate) fn trailers(&mut self, trailers: &mut MetadataMap) {
        if let Some(handler) = self.handler.as_mut() {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| handler.as_mut().trailers(trailers))) {
                // The call is over; only the log can say so.
                drop(panicked(&*payload));
            }
        }
    }

    /// Ends the call: the handler is dropped, then the end guard marked ended.
    pub(crate) fn finish(&mut self) {
        self.handler = None;
        self.deadline = None;
        if let Some(mut end) = self.end.take() {
            end.set_ended();
        }
    }

    /// Whether the call has ended.
    #[inline]
    pub(crate) fn is_finished(&self) -> bool {
        self.handler.is_none()
    }

    /// The channel ends the call with `status`.
    fn fail(&mut self, status: Status) -> Status {
        self.finish();
        status
    }

    /// The handler ended the call with `status`: its trailers hook sees the status's metadata.
    fn end_with(&mut self, mut status: Status) -> Status {
        self.trailers(status.metadata_mut());
        self.finish();
        limit::respec(status)
    }

    #[inline]
    fn failure(&self) -> Option<Status> {
        self.end.as_ref().and_then(End::failure)
    }

    /// While the handler is pending: the request side's failure, or the deadline.
    fn check(&mut self, cx: &mut Context<'_>) -> Option<Status> {
        if let Some(status) = self.end.as_mut().and_then(|end| end.pending(cx)) {
            return Some(status);
        }
        let sleep = self.deadline.as_mut()?;
        Pin::new(sleep).poll(cx).is_ready().then(deadline_exceeded)
    }
}
