//! hyper's HTTP/2 bodies as gRPC bodies: a body received from the network ([`hyper::body::Incoming`])
//! whose errors are gRPC statuses: on the server, any error of an upload (the client reset the
//! stream, or the connection was lost) is `CANCELLED` for the handler reading it; on the
//! client, HTTP/2 errors map as the gRPC spec's table says (a lost connection, and a request
//! the connection never sent, is `UNAVAILABLE`).
//!
//! # Invariants
//!
//! - **One status per error.** Every error of the wrapped body becomes exactly one [`Status`]
//!   (by [`status_of`]); the body ends after it (a caller polling again gets `None`).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use hyper::body::Incoming;
use tonic::{Code, Status};

/// The status for an HTTP/2 or I/O error of a call, following the gRPC spec's table of
/// RST_STREAM error codes (`doc/PROTOCOL-HTTP2.md`, "Errors").
pub(crate) fn status_of(err: &hyper::Error) -> Status {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            return status_of_h2(h2);
        }
        if let Some(status) = e.downcast_ref::<Status>() {
            return status.clone();
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Status::unavailable(format!("the connection failed: {io}"));
        }
        source = e.source();
    }
    if err.is_canceled() {
        // hyper's client gives up a request that its connection never sent ("connection was
        // not ready", "connection closed"): the server never had it, the spec's UNAVAILABLE.
        // (This side's own cancellations end no call with a status: the caller is gone.)
        let why = std::error::Error::source(err).map(|e| format!(": {e}")).unwrap_or_default();
        return Status::unavailable(format!("the connection closed before the call was sent{why}"));
    }
    if err.is_closed() || err.is_incomplete_message() {
        return Status::unavailable(format!("the connection closed: {err}"));
    }
    if err.is_timeout() {
        return Status::deadline_exceeded(format!("timed out: {err}"));
    }
    Status::unknown(format!("HTTP/2: {err}"))
}

/// Whether a failed send means the server never processed the request: hyper gave it up
/// unsent (`is_canceled`), or the server refused the stream before processing it
/// (`REFUSED_STREAM`, which is also how the streams a GOAWAY leaves unprocessed end). Such a
/// call may be retried transparently (gRPC's retry design).
pub(crate) fn never_processed(err: &hyper::Error) -> bool {
    if err.is_canceled() {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            return h2.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        source = e.source();
    }
    false
}

fn status_of_h2(err: &h2::Error) -> Status {
    if err.is_io() {
        return Status::unavailable(format!("the connection failed: {err}"));
    }
    let Some(reason) = err.reason() else {
        return Status::internal(format!("HTTP/2: {err}"));
    };
    let code = match reason {
        h2::Reason::CANCEL => Code::Cancelled,
        h2::Reason::REFUSED_STREAM => Code::Unavailable,
        h2::Reason::ENHANCE_YOUR_CALM => Code::ResourceExhausted,
        h2::Reason::INADEQUATE_SECURITY => Code::PermissionDenied,
        // A GOAWAY with NO_ERROR (the peer shut down) ends the connection's calls as unavailable.
        h2::Reason::NO_ERROR if err.is_go_away() => Code::Unavailable,
        _ => Code::Internal,
    };
    Status::new(code, format!("HTTP/2: {err}"))
}

/// A body received over HTTP/2 ([`Incoming`]) with its errors as statuses (module docs).
pub(crate) struct WireBody {
    inner: Option<Incoming>,
    /// A request body on the server: any error of it (a reset stream, whatever its reason,
    /// or a lost connection) means the client abandoned the call: `CANCELLED`, as grpc-go's
    /// servers see it too.
    request: bool,
}

impl WireBody {
    /// A response body on the client.
    pub(crate) fn new(inner: Incoming) -> WireBody {
        WireBody { inner: Some(inner), request: false }
    }

    /// A request body on the server.
    pub(crate) fn request(inner: Incoming) -> WireBody {
        WireBody { inner: Some(inner), request: true }
    }

    fn status(&self, err: &hyper::Error) -> Status {
        if self.request {
            return Status::cancelled(format!("the client abandoned the call: {err}"));
        }
        status_of(err)
    }
}

impl http_body::Body for WireBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => {
                let status = self.status(&e);
                self.inner = None;
                Poll::Ready(Some(Err(status)))
            }
            Poll::Ready(None) => {
                self.inner = None;
                Poll::Ready(None)
            }
            other => other.map_err(|e| self.status(&e)),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.as_ref().map(|b| b.size_hint()).unwrap_or_default()
    }
}
