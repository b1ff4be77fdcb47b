//! The handler's side of the typed path, type-erased: [`Handler`] (the service's future, then
//! its response stream, as the adapters of module `dispatch` make it) and [`Head`], with the
//! `&mut dyn Any` slots through which messages cross (module `typed`, "types are checked
//! once, at the route"). A leaf: the dispatch, the driver and the client's side all use it.

use std::any::Any;
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::metadata::MetadataMap;
use tonic::{Extensions, Status};

/// A started call's handler, type-erased: the service's future, then its response stream.
/// Messages cross through `&mut dyn Any` slots of type `&mut Option<R>`, `R` the response
/// message type (module `typed`, "types are checked once, at the route").
pub trait Handler: Send {
    /// Polls the handler to its response head. For a unary response (unary and client
    /// streaming methods) the response message is written into `message`.
    fn poll_head(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        message: &mut dyn Any,
    ) -> Poll<Result<Head, Status>>;

    /// Polls a streaming response for its next message, written into `message`; `None` at the
    /// end of the stream. Unary responses have none.
    fn poll_next(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _message: &mut dyn Any,
    ) -> Poll<Option<Result<(), Status>>> {
        Poll::Ready(None)
    }

    /// Called once when the handler ends the call itself (not when the channel ends it: a
    /// deadline, a panic, a limit, the client's drop), with the trailing metadata: empty for a
    /// stream that ended, the status's metadata for an error (before or after the head), the
    /// response's metadata for a unary response (tonic merges a unary call's trailers into
    /// it). Wrappers add theirs here; the generated handlers have none.
    fn trailers(self: Pin<&mut Self>, _trailers: &mut MetadataMap) {}
}

/// A boxed [`Handler`].
pub type BoxHandler = Pin<Box<dyn Handler>>;

/// A response's head: what tonic's `Response` carries besides the message.
#[derive(Debug, Default)]
pub struct Head {
    /// Response metadata (headers).
    pub metadata: MetadataMap,
    /// Response extensions (they cross in process, as on the encoded channel).
    pub extensions: Extensions,
}

/// The status of a slot that does not hold the type the route promised (never, by the
/// invariant on types of module `typed`; a status rather than a panic all the same).
pub(crate) fn mismatch() -> Status {
    Status::internal("spindle-grpc: typed call with mismatched message types")
}

/// Moves `message` into `slot`, an `&mut Option<R>`.
pub(crate) fn put<R: 'static>(slot: &mut dyn Any, message: R) -> Result<(), Status> {
    match slot.downcast_mut::<Option<R>>() {
        Some(slot) => {
            *slot = Some(message);
            Ok(())
        }
        None => Err(mismatch()),
    }
}
