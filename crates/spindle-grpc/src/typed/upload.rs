//! A client's request stream handed to a typed handler as tonic's `Streaming<M>`, the only
//! request-stream type tonic's service traits accept.
//!
//! tonic's `Streaming` reads an `http_body::Body` and decodes each gRPC message with a
//! `Decoder`: for every message it finds a 5-byte frame header in its buffer, then calls the
//! decoder, which may answer "not yet" (then tonic polls the body and calls the decoder again
//! with the same header). Here the body ([`UploadBody`]) yields frame headers of empty
//! messages, [`HEADERS`] at a time (a static, never allocated), and the decoder
//! ([`UploadDecoder`]) produces the client's next message for each: it polls the client's
//! stream itself, and when that stream is not ready it answers "not yet", so that tonic polls
//! the body, which polls the client's stream with the reader's waker. The message itself is
//! moved, never encoded; when it is ready, a message costs tonic's header parse and one call
//! of the decoder, never a trip through the body's layers.
//!
//! Body and decoder share one [`Upload`] behind a mutex. Both belong to the same tonic
//! `Streaming` and are called only from its `&mut self` methods, so the lock is never
//! contended: it is taken once per message on the fast path.
//!
//! # Invariants
//!
//! - **Headers in step with tonic.** `Upload::headers` counts the headers handed to tonic
//!   and not yet consumed by a message (a header is consumed when the decoder returns one):
//!   while it is positive, tonic holds a header and calls the decoder before it polls the
//!   body; the body hands out more headers only when it is zero, when tonic's buffer is
//!   empty. So tonic's buffer holds at most [`HEADERS`] headers and never a partial one.
//! - **A ready client is polled with a no-op waker, never left waiting on one.** The decoder
//!   has no `Context`: it polls the client's stream with `Waker::noop()`, and if the stream is
//!   not ready it returns "not yet", so tonic polls the body at once, which polls the stream
//!   again with the reader's waker before anything returns `Pending`.
//! - **Pulled.** The client's stream is polled only when the handler reads (tonic's
//!   `Streaming` calls the decoder, or polls the body, only from its reader's `poll_next`), for
//!   at most one message per read: a slow handler bounds the client's writer (backpressure),
//!   nothing is buffered but that one message (`Upload::ready`, pulled by the body and taken
//!   by the decoder in the same read).
//! - **A message above a limit never reaches the handler** (module `channel::call_state`'s "the
//!   request side failing ends the call"): it is recorded as the call's failure, which wakes the call's
//!   driver, and the body stays pending once; a reader polling again gets the status as an
//!   error, never a clean end.
//! - **A cancelled upload fails.** Once the client side is dropped before the call ended
//!   (`CallState::is_cancelled`), a reader still holding the stream (a task the handler
//!   spawned) gets `CANCELLED`. tonic's `Streaming` turns a `CANCELLED` *body* error of a
//!   request into a clean end of stream, so the status travels through the decoder instead.
//! - **A clean end is a `CANCELLED` body error.** tonic fails a body that ends while its
//!   buffer holds bytes (unconsumed headers here); the body ends the stream instead with the
//!   `CANCELLED` error that tonic turns into a clean end for a request (tonic 0.14,
//!   `codec/decode.rs`), with no trailers, as a body that simply ended.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Frame;
use prost::Message;
use tonic::codec::{BufferSettings, DecodeBuf, Decoder};
use tonic::codegen::tokio_stream::Stream;
use tonic::Status;

use crate::channel::call_state::CallState;
use crate::limit::TypedLimits;

/// A client's request stream as it crosses to the server's side.
pub(crate) struct RequestStream<M> {
    pub(crate) stream: Pin<Box<dyn Stream<Item = M> + Send>>,
}

/// Frame headers handed to tonic at a time ("headers in step with tonic").
const HEADERS: usize = 64;

/// [`HEADERS`] gRPC frame headers of empty, uncompressed messages.
static EMPTY_MESSAGE_HEADERS: [u8; 5 * HEADERS] = [0; 5 * HEADERS];

/// What body and decoder share (module doc).
struct Upload<M> {
    stream: Pin<Box<dyn Stream<Item = M> + Send>>,
    state: Arc<CallState>,
    limits: TypedLimits,
    /// Headers handed to tonic and not yet consumed by a message.
    headers: usize,
    /// A message the body pulled, for the decoder to return in the same read.
    ready: Option<M>,
    /// The request side's failure, once recorded in `state`.
    failure: Option<Status>,
    /// The body has stayed pending once for `failure`.
    failure_seen: bool,
    /// The client's stream ended.
    ended: bool,
    /// The `CANCELLED` status went to the reader.
    cancel_sent: bool,
    /// The waker last registered in `state` (not registered again while unchanged).
    reader: Option<Waker>,
}

type Shared<M> = Arc<Mutex<Upload<M>>>;

fn lock<M>(shared: &Shared<M>) -> MutexGuard<'_, Upload<M>> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// tonic's `Streaming<M>` over the client's request stream (module doc).
pub(crate) fn streaming<M: Message + 'static>(
    request: RequestStream<M>,
    state: Arc<CallState>,
    limits: TypedLimits,
) -> tonic::Streaming<M> {
    let shared = Arc::new(Mutex::new(Upload {
        stream: request.stream,
        state,
        limits,
        headers: 0,
        ready: None,
        failure: None,
        failure_seen: false,
        ended: false,
        cancel_sent: false,
        reader: None,
    }));
    let body = UploadBody { shared: shared.clone() };
    tonic::Streaming::new_request(UploadDecoder { shared }, body, None, None)
}

impl<M: Message> Upload<M> {
    /// A message the client sent: `Some` if it is within the limits, else the failure is
    /// recorded ("a message above a limit never reaches the handler").
    fn admit(&mut self, message: M) -> Option<M> {
        match self.limits.request(message.encoded_len()) {
            Ok(()) => Some(message),
            Err(status) => {
                self.state.fail(status.clone());
                self.failure = Some(status);
                None
            }
        }
    }

    /// The frame that sends tonic to the decoder: more headers if tonic has none left, else
    /// an empty data frame (tonic still holds a header and calls the decoder for it).
    fn frame(&mut self) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let data = if self.headers == 0 {
            self.headers = HEADERS;
            Bytes::from_static(&EMPTY_MESSAGE_HEADERS)
        } else {
            Bytes::new()
        };
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    /// The clean end of the stream ("a clean end is a `CANCELLED` body error").
    fn end() -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Poll::Ready(Some(Err(Status::cancelled("spindle-grpc: end of the request stream"))))
    }
}

struct UploadBody<M> {
    shared: Shared<M>,
}

impl<M: Message + 'static> http_body::Body for UploadBody<M> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let mut guard = lock(&self.shared);
        let this = &mut *guard;
        if let Some(status) = &this.failure {
            if this.failure_seen {
                // A reader polling again after the failure: an error, never a clean end.
                return Poll::Ready(Some(Err(status.clone())));
            }
            this.failure_seen = true;
            // This reader's next poll fails with it (the driver, woken by `fail`, drops the
            // handler first if the handler is the reader).
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if this.ended {
            return Upload::<M>::end();
        }
        if this.state.is_cancelled() {
            // The decoder sends CANCELLED once; after that the stream ends.
            return if this.cancel_sent { Upload::<M>::end() } else { this.frame() };
        }
        if this.ready.is_none() {
            match this.stream.as_mut().poll_next(cx) {
                Poll::Ready(Some(message)) => match this.admit(message) {
                    Some(message) => this.ready = Some(message),
                    None => {
                        this.failure_seen = true;
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                },
                Poll::Ready(None) => {
                    this.ended = true;
                    return Upload::<M>::end();
                }
                Poll::Pending => {
                    if !this.reader.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        this.state.set_reader(cx.waker());
                        this.reader = Some(cx.waker().clone());
                    }
                    // Cancelled between the check and the registration: do not miss it.
                    if this.state.is_cancelled() {
                        return this.frame();
                    }
                    return Poll::Pending;
                }
            }
        }
        this.frame()
    }
}

struct UploadDecoder<M> {
    shared: Shared<M>,
}

impl<M: Message + 'static> Decoder for UploadDecoder<M> {
    type Item = M;
    type Error = Status;

    fn decode(&mut self, _empty: &mut DecodeBuf<'_>) -> Result<Option<M>, Status> {
        let mut guard = lock(&self.shared);
        let this = &mut *guard;
        let message = match this.ready.take() {
            Some(message) => message,
            // The body reports these.
            None if this.failure.is_some() || this.ended => return Ok(None),
            None if this.state.is_cancelled() => {
                if this.cancel_sent {
                    return Ok(None);
                }
                this.cancel_sent = true;
                return Err(Status::cancelled("the client cancelled the call"));
            }
            // The fast path: the client's next message, if it is ready ("a ready client is
            // polled with a no-op waker, never left waiting on one").
            None => match this.stream.as_mut().poll_next(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(Some(message)) => match this.admit(message) {
                    Some(message) => message,
                    None => return Ok(None),
                },
                Poll::Ready(None) => {
                    this.ended = true;
                    return Ok(None);
                }
                Poll::Pending => return Ok(None),
            },
        };
        this.headers -= 1;
        Ok(Some(message))
    }

    fn buffer_settings(&self) -> BufferSettings {
        // tonic's buffer only ever holds up to HEADERS 5-byte headers.
        BufferSettings::new(5 * HEADERS, 32 * 1024)
    }
}
