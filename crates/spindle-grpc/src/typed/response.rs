//! A typed call's response driven from its [`Driver`] in the caller's call (or a pump's): the
//! unary response ([`poll_unary`]) or the stream of messages ([`DirectStream`]), each message
//! checked against the response limits before it is handed over.
//!
//! # Invariants
//!
//! - **Pulled one message at a time**: each `poll_next` polls the handler's stream for at
//!   most one message (module `driver`), which then crosses by move.
//! - **Each message is checked** against the response limits before it is handed over; one
//!   above a limit ends the call with the limit's status and drops the handler.
//! - **An error is the last item**: after an error, or the end, the stream yields `None`.

use std::task::{ready, Context, Poll};

use prost::Message;
use tonic::metadata::MetadataMap;
use tonic::{Response, Status};

use super::driver::Driver;
use super::handler::mismatch;
use crate::limit::TypedLimits;

/// Drives a unary response (unary and client-streaming methods) to its end: the message is
/// checked against the response limits, the handler's trailers hook adds to the metadata
/// (tonic merges a unary call's trailers into its response metadata).
pub(super) fn poll_unary<R: Message + 'static>(
    driver: &mut Driver,
    limits: &TypedLimits,
    cx: &mut Context<'_>,
) -> Poll<Result<Response<R>, Status>> {
    let mut slot: Option<R> = None;
    let mut head = ready!(driver.poll_head(cx, &mut slot))?;
    let Some(message) = slot else {
        driver.finish();
        return Poll::Ready(Err(mismatch()));
    };
    if let Err(status) = limits.response(message.encoded_len()) {
        driver.finish();
        return Poll::Ready(Err(status));
    }
    driver.trailers(&mut head.metadata);
    driver.finish();
    Poll::Ready(Ok(Response::from_parts(head.metadata, message, head.extensions)))
}

/// A typed call's response stream, driven in the caller's call (or a pump's).
pub(super) struct DirectStream<R> {
    driver: Driver,
    limits: TypedLimits,
    /// The trailing metadata, once the stream has ended without error.
    trailers: Option<MetadataMap>,
    _response: std::marker::PhantomData<fn() -> R>,
}

impl<R: Message + 'static> DirectStream<R> {
    pub(super) fn new(driver: Driver, limits: TypedLimits) -> DirectStream<R> {
        DirectStream { driver, limits, trailers: None, _response: std::marker::PhantomData }
    }

    pub(super) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<R, Status>>> {
        if self.driver.is_finished() {
            return Poll::Ready(None);
        }
        let mut slot: Option<R> = None;
        let item = match ready!(self.driver.poll_next(cx, &mut slot)) {
            Some(Ok(())) => match slot {
                Some(message) => match self.limits.response(message.encoded_len()) {
                    Ok(()) => return Poll::Ready(Some(Ok(message))),
                    Err(status) => status,
                },
                None => mismatch(),
            },
            // The driver has ended the call.
            Some(Err(status)) => return Poll::Ready(Some(Err(status))),
            None => {
                let mut trailers = MetadataMap::new();
                self.driver.trailers(&mut trailers);
                self.driver.finish();
                self.trailers = Some(trailers);
                return Poll::Ready(None);
            }
        };
        self.driver.finish();
        Poll::Ready(Some(Err(item)))
    }

    pub(super) fn take_trailers(&mut self) -> Option<MetadataMap> {
        self.trailers.take()
    }
}
