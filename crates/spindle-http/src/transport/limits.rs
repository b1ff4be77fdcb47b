//! Limits on the request body a client may send, beyond hyper's header limits: its size and
//! its minimum data rate ([`Guarded`], the body a handler reads). The answers to requests
//! that break the server's rules are the server's (module `server::precheck`).
//!
//! Invariants:
//!
//! - **Size**: a request body never yields more than `max_body_size` bytes to the handler.
//!   A declared `Content-Length` above it is answered `413` before the handler runs; a body of
//!   unknown length (chunked) that passes it yields [`LimitError::BodyTooLarge`] instead of
//!   the next frame.
//! - **Rate**: while the handler waits for body data, the time it has waited may not exceed
//!   `grace + received / bytes_per_second`; past that the body yields
//!   [`LimitError::BodyTooSlow`]. Only waiting counts: a handler that reads slowly is not
//!   blamed on the client. The timer is armed only while the body is pending.
//! - **Answer**: either fault is recorded in a flag shared with the response future ([`Fault`]);
//!   if it is set when the handler returns, its response is replaced by `413` or `408`, with
//!   `Connection: close` (the rest of the body is never read). A fault after the response head
//!   went out (a handler streaming the request body back) ends the connection.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::StatusCode;

/// The error type of body streams (the same type as [`crate::BoxError`]).
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The slowest a client may send a request body: after `grace`, at least `bytes_per_second`
/// on average over the time the server spent waiting for it (Kestrel's rule; its default is
/// 240 B/s after 5 s, which is spindle-http's too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinRate {
    pub bytes_per_second: u64,
    pub grace: Duration,
}

impl MinRate {
    pub fn new(bytes_per_second: u64, grace: Duration) -> MinRate {
        MinRate { bytes_per_second: bytes_per_second.max(1), grace }
    }

    /// How long the server may have waited for a body of which `received` bytes arrived.
    fn allowed_wait(&self, received: u64) -> Duration {
        self.grace.saturating_add(Duration::from_secs_f64(received as f64 / self.bytes_per_second as f64))
    }
}

impl Default for MinRate {
    fn default() -> MinRate {
        MinRate::new(240, Duration::from_secs(5))
    }
}

/// Why a request body stopped early: the error its stream yields (inside a [`BoxError`](crate::BoxError);
/// downcast to tell it apart from a connection error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitError {
    /// The body is longer than [`Builder::max_body_size`](crate::Builder::max_body_size).
    BodyTooLarge { limit: u64 },
    /// The client sent the body slower than [`Builder::min_body_rate`](crate::Builder::min_body_rate).
    BodyTooSlow { min_rate: MinRate },
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitError::BodyTooLarge { limit } => {
                write!(f, "request body larger than the limit of {limit} bytes")
            }
            LimitError::BodyTooSlow { min_rate } => write!(
                f,
                "request body sent slower than {} bytes/s (after a grace of {:?})",
                min_rate.bytes_per_second, min_rate.grace
            ),
        }
    }
}

impl std::error::Error for LimitError {}

/// The body limits of one server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    pub(crate) max_size: Option<u64>,
    pub(crate) min_rate: Option<MinRate>,
}

const FAULT_NONE: u8 = 0;
pub(crate) const FAULT_TOO_LARGE: u8 = 1;
pub(crate) const FAULT_TOO_SLOW: u8 = 2;
/// Which fault, in the flag (the other bits say how to answer).
const FAULT_KIND: u8 = 3;
/// Set at creation for an HTTP/2 request: its answer has no `Connection` header (a refused
/// stream is reset; the connection lives).
const FAULT_HTTP2: u8 = 4;

/// The fault flag shared by a request body and its response future (allocated only for a
/// request that has a body: one without cannot break a body limit).
#[derive(Clone, Default)]
pub(crate) struct Fault(Option<Arc<AtomicU8>>);

impl Fault {
    /// The flag of a request with a body, over HTTP/2 if `http2`.
    pub(crate) fn new(http2: bool) -> Fault {
        Fault(Some(Arc::new(AtomicU8::new(if http2 { FAULT_HTTP2 } else { FAULT_NONE }))))
    }

    pub(crate) fn set(&self, fault: u8) {
        if let Some(flag) = &self.0 {
            // The latest fault replaces an earlier one; the HTTP/2 bit stays.
            let _ =
                flag.fetch_update(Ordering::Release, Ordering::Relaxed, |v| Some(v & !FAULT_KIND | fault));
        }
    }

    /// The limit the body broke, if any: `413 Payload Too Large` or `408 Request Timeout`,
    /// and whether the request came over HTTP/2 (its answer then has no `Connection` header).
    pub(crate) fn broken(&self) -> Option<(StatusCode, bool)> {
        let flag = self.0.as_ref()?.load(Ordering::Acquire);
        let status = match flag & FAULT_KIND {
            FAULT_NONE => return None,
            FAULT_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::REQUEST_TIMEOUT,
        };
        Some((status, flag & FAULT_HTTP2 != 0))
    }
}

/// A request body from the connection, under the server's [`BodyLimits`].
pub(crate) struct Guarded {
    inner: Incoming,
    limits: BodyLimits,
    fault: Fault,
    received: u64,
    /// Time spent waiting for data before the current wait.
    waited: Duration,
    /// The current wait's start and its deadline timer (only while pending).
    wait: Option<(Instant, spindle::time::Sleep)>,
}

impl Guarded {
    pub(crate) fn new(inner: Incoming, limits: BodyLimits, fault: Fault) -> Guarded {
        Guarded { inner, limits, fault, received: 0, waited: Duration::ZERO, wait: None }
    }

    fn fail(&mut self, fault: u8, error: LimitError) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.fault.set(fault);
        self.wait = None;
        Poll::Ready(Some(Err(Box::new(error))))
    }

    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if polled.is_pending() {
            let Some(rate) = self.limits.min_rate else { return Poll::Pending };
            if self.wait.is_none() {
                let now = Instant::now();
                let left = rate.allowed_wait(self.received).saturating_sub(self.waited);
                let deadline = spindle::time::deadline_from(now, left);
                self.wait = Some((now, spindle::time::sleep_until_future(deadline)));
            }
            let (_, sleep) = self.wait.as_mut().expect("armed above");
            if Pin::new(sleep).poll(cx).is_ready() {
                return self.fail(FAULT_TOO_SLOW, LimitError::BodyTooSlow { min_rate: rate });
            }
            return Poll::Pending;
        }
        if let Some((start, _)) = self.wait.take() {
            self.waited += start.elapsed();
        }
        let Poll::Ready(Some(Ok(frame))) = polled else {
            return polled.map_err(Into::into);
        };
        if let Some(data) = frame.data_ref() {
            self.received += data.len() as u64;
            if let Some(limit) = self.limits.max_size.filter(|&limit| self.received > limit) {
                return self.fail(FAULT_TOO_LARGE, LimitError::BodyTooLarge { limit });
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    pub(crate) fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
