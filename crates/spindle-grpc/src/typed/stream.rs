//! The client's response stream of a typed call: [`Streaming`], tonic's `Streaming` API
//! (`message`, `trailers`, `Stream`) over the handler's stream pulled in the caller's call,
//! over a pump's pipe, or over tonic's own `Streaming` on the encoded path.
//!
//! The stream driven in the caller's call, and its invariants (pulled one message at a time,
//! each message checked, an error is the last item), are module `response`'s; a pump's
//! stream (module `pump`) keeps the same.

use std::pin::Pin;
use std::task::{Context, Poll};

use prost::Message;
use tonic::codegen::tokio_stream::Stream;
use tonic::metadata::MetadataMap;
use tonic::Status;

use super::driver::Driver;
use super::pump::StreamClient;
use super::response::DirectStream;
use crate::limit::TypedLimits;

/// The response stream of a call made through a generated typed client: the handler's
/// messages moved across on the typed path, tonic's decoded stream on the encoded path. The
/// same API as tonic's `Streaming`.
pub struct Streaming<R> {
    inner: Inner<R>,
}

enum Inner<R> {
    Direct(DirectStream<R>),
    Pumped(StreamClient<R>),
    Encoded(tonic::Streaming<R>),
}

impl<R: Message + 'static> Streaming<R> {
    pub(crate) fn direct(driver: Driver, limits: TypedLimits) -> Streaming<R> {
        Streaming { inner: Inner::Direct(DirectStream::new(driver, limits)) }
    }

    pub(crate) fn pumped(client: StreamClient<R>) -> Streaming<R> {
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
