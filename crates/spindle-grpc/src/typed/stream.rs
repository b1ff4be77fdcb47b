//! The client's response stream of a typed call: [`Streaming`], tonic's `Streaming` API
//! (`message`, `trailers`, `Stream`) over the handler's stream pulled in the caller's call,
//! over a pump's pipe, or over tonic's own `Streaming` on the encoded path.
//!
//! # Invariants
//!
//! - **Pulled one message at a time**: each `poll_next` polls the handler's stream for at
//!   most one message (module `driver`), which then crosses by move.
//! - **Each message is checked** against the response limits before it is handed over; one
//!   above a limit ends the stream with the limit's status and drops the handler.
//! - **An error is the last item**: after an error, or the end, the stream yields `None`.

use std::pin::Pin;
use std::task::{Context, Poll};

use prost::Message;
use tonic::codegen::tokio_stream::Stream;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::driver::Driver;
use super::{mismatch, pump};
use crate::limit::TypedLimits;

/// A typed call's response stream, driven in the caller's call.
pub(crate) struct Direct<R> {
    driver: Driver,
    limits: TypedLimits,
    /// The trailing metadata, once the stream has ended without error.
    trailers: Option<MetadataMap>,
    _response: std::marker::PhantomData<fn() -> R>,
}

impl<R: Message + 'static> Direct<R> {
    pub(crate) fn new(driver: Driver, limits: TypedLimits) -> Direct<R> {
        Direct { driver, limits, trailers: None, _response: std::marker::PhantomData }
    }

    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<R, Status>>> {
        if self.driver.is_finished() {
            return Poll::Ready(None);
        }
        let mut slot: Option<R> = None;
        let item = match std::task::ready!(self.driver.poll_next(cx, &mut slot)) {
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

    pub(crate) fn take_trailers(&mut self) -> Option<MetadataMap> {
        self.trailers.take()
    }
}

/// The response stream of a call made through a generated typed client: the handler's
/// messages moved across on the typed path, tonic's decoded stream on the encoded path. The
/// same API as tonic's `Streaming`.
pub struct Streaming<R> {
    inner: Inner<R>,
}

enum Inner<R> {
    Direct(Direct<R>),
    Pumped(pump::StreamClient<R>),
    Encoded(tonic::Streaming<R>),
}

impl<R: Message + 'static> Streaming<R> {
    pub(crate) fn direct(driver: Driver, limits: TypedLimits) -> Streaming<R> {
        Streaming { inner: Inner::Direct(Direct::new(driver, limits)) }
    }

    pub(crate) fn pumped(client: pump::StreamClient<R>) -> Streaming<R> {
        Streaming { inner: Inner::Pumped(client) }
    }

    /// The next message: `Ok(None)` at the end of the stream, `Err` for the call's status.
    pub async fn message(&mut self) -> Result<Option<R>, Status> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await.transpose()
    }

    /// The trailing metadata, once the stream has ended (the remaining messages are read and
    /// dropped). `Ok(None)` after the stream failed: the status carried its metadata.
    pub async fn trailers(&mut self) -> Result<Option<MetadataMap>, Status> {
        if let Inner::Encoded(stream) = &mut self.inner {
            return stream.trailers().await;
        }
        if let Some(trailers) = self.take_trailers() {
            return Ok(Some(trailers));
        }
        while self.message().await?.is_some() {}
        Ok(self.take_trailers())
    }

    /// Whether the messages are moved across (the typed path), not decoded.
    pub fn is_typed(&self) -> bool {
        !matches!(self.inner, Inner::Encoded(_))
    }

    fn take_trailers(&mut self) -> Option<MetadataMap> {
        match &mut self.inner {
            Inner::Direct(direct) => direct.take_trailers(),
            Inner::Pumped(pumped) => pumped.take_trailers(),
            Inner::Encoded(_) => None,
        }
    }
}

impl<R> From<tonic::Streaming<R>> for Streaming<R> {
    /// The encoded path's stream, as the generated client's fallback returns it.
    fn from(stream: tonic::Streaming<R>) -> Streaming<R> {
        Streaming { inner: Inner::Encoded(stream) }
    }
}

impl<R: Message + 'static> Stream for Streaming<R> {
    type Item = Result<R, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match &mut self.inner {
            Inner::Direct(direct) => direct.poll_next(cx),
            Inner::Pumped(pumped) => pumped.poll_next(cx),
            Inner::Encoded(stream) => Pin::new(stream).poll_next(cx),
        }
    }
}

impl<R> std::fmt::Debug for Streaming<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if matches!(self.inner, Inner::Encoded(_)) { "encoded" } else { "typed" };
        f.debug_struct("Streaming").field("path", &path).finish()
    }
}
