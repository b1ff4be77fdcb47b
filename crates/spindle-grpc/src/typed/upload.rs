//! A client's request stream handed to a typed handler as tonic's `Streaming<M>`, the only
//! request-stream type tonic's service traits accept.
//!
//! tonic's `Streaming` reads an `http_body::Body` and decodes each gRPC message with a
//! `Decoder`. Here the body ([`UploadBody`]) pulls the client's next message when the handler
//! asks for one, puts it in a slot shared with the decoder ([`UploadDecoder`]) and yields a
//! 5-byte frame header of an empty message (a static, never allocated); tonic's `Streaming`
//! reads the header and calls the decoder, which takes the message out of the slot. The
//! message itself is moved, never encoded.
//!
//! # Invariants
//!
//! - **One message per header.** The body puts a message (or an error) in the slot only
//!   when it yields a header, and tonic's `Streaming` calls the decoder once per header
//!   before it polls the body again; so the slot holds at most one item and never loses one.
//! - **Pulled.** The client's stream is polled only when the handler reads: a slow handler
//!   bounds the client's writer (backpressure), nothing is buffered.
//! - **A message above a limit never reaches the handler** (module `call`'s "the request side failing ends the call"): it
//!   is recorded as the call's failure, which wakes the call's driver, and the body stays
//!   pending; a reader polling again gets the status as an error, never a clean end.
//! - **A cancelled upload fails.** Once the client side is dropped before the call ended
//!   (`CallState::is_cancelled`), a reader still holding the stream (a task the handler
//!   spawned) gets `CANCELLED`. tonic's `Streaming` turns a `CANCELLED` *body* error of a
//!   request into a clean end of stream, so the status travels through the decoder instead.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Frame;
use prost::Message;
use tonic::codec::{BufferSettings, DecodeBuf, Decoder};
use tonic::codegen::tokio_stream::Stream;
use tonic::Status;

use crate::call::CallState;
use crate::limit::TypedLimits;

/// A client's request stream as it crosses to the server's side.
pub(crate) struct RequestStream<M> {
    pub(crate) stream: Pin<Box<dyn Stream<Item = M> + Send>>,
}

/// The gRPC frame header of an empty, uncompressed message.
static EMPTY_MESSAGE_HEADER: [u8; 5] = [0; 5];

fn header() -> Frame<Bytes> {
    Frame::data(Bytes::from_static(&EMPTY_MESSAGE_HEADER))
}

/// What the body hands the decoder: a message, or the error the reader must see (boxed: the
/// slot, moved in and out once per message, stays the size of a message).
type Slot<M> = Arc<Mutex<Option<Result<M, Box<Status>>>>>;

fn lock<M>(slot: &Slot<M>) -> MutexGuard<'_, Option<Result<M, Box<Status>>>> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

/// tonic's `Streaming<M>` over the client's request stream (module doc).
pub(crate) fn streaming<M: Message + 'static>(
    request: RequestStream<M>,
    state: Arc<CallState>,
    limits: TypedLimits,
) -> tonic::Streaming<M> {
    let slot: Slot<M> = Arc::default();
    let body = UploadBody {
        stream: request.stream,
        slot: slot.clone(),
        state,
        limits,
        failure: None,
        cancel_sent: false,
        reader: None,
    };
    tonic::Streaming::new_request(UploadDecoder { slot }, body, None, None)
}

struct UploadBody<M> {
    stream: Pin<Box<dyn Stream<Item = M> + Send>>,
    slot: Slot<M>,
    state: Arc<CallState>,
    limits: TypedLimits,
    /// The request side's failure, once recorded in `state`.
    failure: Option<Status>,
    /// The `CANCELLED` status went to the decoder.
    cancel_sent: bool,
    /// The waker last registered in `state` (not registered again while unchanged).
    reader: Option<Waker>,
}

impl<M> UploadBody<M> {
    fn cancelled(&mut self) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.cancel_sent {
            return Poll::Ready(None);
        }
        self.cancel_sent = true;
        *lock(&self.slot) = Some(Err(Box::new(Status::cancelled("the client cancelled the call"))));
        Poll::Ready(Some(Ok(header())))
    }
}

impl<M: Message + 'static> http_body::Body for UploadBody<M> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        if let Some(status) = &this.failure {
            // A reader polling again after the failure: an error, never a clean end.
            return Poll::Ready(Some(Err(status.clone())));
        }
        if this.state.is_cancelled() {
            return this.cancelled();
        }
        match this.stream.as_mut().poll_next(cx) {
            Poll::Ready(Some(message)) => {
                if let Err(status) = this.limits.request(message.encoded_len()) {
                    this.state.fail(status.clone());
                    this.failure = Some(status);
                    // This reader's next poll fails with it (the driver, woken by `fail`,
                    // drops the handler first if the handler is the reader).
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                *lock(&this.slot) = Some(Ok(message));
                Poll::Ready(Some(Ok(header())))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                if !this.reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    this.state.set_reader(cx.waker());
                    this.reader = Some(cx.waker().clone());
                }
                // Cancelled between the check and the registration: do not miss it.
                if this.state.is_cancelled() {
                    return this.cancelled();
                }
                Poll::Pending
            }
        }
    }
}

struct UploadDecoder<M> {
    slot: Slot<M>,
}

impl<M> Decoder for UploadDecoder<M> {
    type Item = M;
    type Error = Status;

    fn decode(&mut self, _empty: &mut DecodeBuf<'_>) -> Result<Option<M>, Status> {
        match lock(&self.slot).take() {
            Some(Ok(message)) => Ok(Some(message)),
            Some(Err(status)) => Err(*status),
            None => Ok(None),
        }
    }

    fn buffer_settings(&self) -> BufferSettings {
        // tonic's buffer only ever holds one 5-byte header.
        BufferSettings::new(16, 32 * 1024)
    }
}
