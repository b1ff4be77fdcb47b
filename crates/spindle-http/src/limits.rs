//! Limits on what a client may send, beyond hyper's header limits: the request body's size
//! and its minimum data rate, and the strict `Host` rule of RFC 9112 §3.2.
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
//! - **Answer**: either fault is recorded in a flag shared with the response future; if it is
//!   set when the handler returns, its response is replaced by `413` or `408`, with
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
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Request, Response, StatusCode, Version};

use crate::{Body, BoxError};

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

/// Why a request body stopped early: the error its stream yields (inside a [`BoxError`];
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
const FAULT_TOO_LARGE: u8 = 1;
const FAULT_TOO_SLOW: u8 = 2;
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

    fn set(&self, fault: u8) {
        if let Some(flag) = &self.0 {
            // The latest fault replaces an earlier one; the HTTP/2 bit stays.
            let _ =
                flag.fetch_update(Ordering::Release, Ordering::Relaxed, |v| Some(v & !FAULT_KIND | fault));
        }
    }

    /// The response that replaces the handler's, if the body broke a limit.
    pub(crate) fn response(&self) -> Option<Response<Body>> {
        let flag = self.0.as_ref()?.load(Ordering::Acquire);
        let mut res = match flag & FAULT_KIND {
            FAULT_NONE => return None,
            FAULT_TOO_LARGE => closing(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large\n"),
            _ => closing(StatusCode::REQUEST_TIMEOUT, "Request Timeout\n"),
        };
        if flag & FAULT_HTTP2 != 0 {
            res.headers_mut().remove(CONNECTION);
        }
        Some(res)
    }
}

/// A plain-text answer that closes the connection.
pub(crate) fn closing(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut res = Response::new(Body::from(text));
    *res.status_mut() = code;
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    res
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

/// The answer to a request that breaks a rule before its handler runs: a bad `Host`
/// (RFC 9112 §3.2: an HTTP/1.1 request without one, any request with two, or an invalid
/// one), or a declared body length above the limit.
pub(crate) fn precheck<B: http_body::Body>(req: &Request<B>, limits: &BodyLimits) -> Option<Response<Body>> {
    if !host_ok(req) {
        return Some(closing(StatusCode::BAD_REQUEST, "Bad Request: missing, repeated or invalid Host\n"));
    }
    let declared = req.body().size_hint().exact();
    if let (Some(limit), Some(len)) = (limits.max_size, declared) {
        if len > limit {
            return Some(closing(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large\n"));
        }
    }
    None
}

fn host_ok<B>(req: &Request<B>) -> bool {
    let mut hosts = req.headers().get_all(HOST).iter();
    let first = hosts.next();
    if hosts.next().is_some() {
        return false;
    }
    match first {
        None => req.version() != Version::HTTP_11,
        // Empty is allowed (a target without an authority); otherwise uri-host [":" port].
        Some(v) => v.is_empty() || valid_host(v.as_bytes()),
    }
}

/// The bytes of a reg-name or IPv4 address (RFC 3986): unreserved, `%` of pct-encoded, and
/// sub-delims. A table: the Host check runs for every request (a scan of the 17 others per
/// byte cost ~370 instructions a request, callgrind).
static REG_NAME: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let others = b"-._~%!$&'()*+,;=";
    let mut i = 0;
    while i < others.len() {
        table[others[i] as usize] = true;
        i += 1;
    }
    table
};

/// `uri-host [":" port]` (RFC 3986: a reg-name or IPv4 of unreserved, pct-encoded and
/// sub-delim characters, or a bracketed IP literal), checked without allocating.
pub(crate) fn valid_host(v: &[u8]) -> bool {
    let (host, port) = match v.first() {
        Some(b'[') => match v.iter().position(|&b| b == b']') {
            Some(end) => {
                let literal = &v[1..end];
                if literal.is_empty() || !literal.iter().all(|b| b.is_ascii_hexdigit() || b":.".contains(b)) {
                    return false;
                }
                (&v[..=end], &v[end + 1..])
            }
            None => return false,
        },
        // The reg-name's bytes, up to the first that is not one (a ':' before the port, or
        // a bad byte): one pass, not a search for the ':' and then a check of the bytes
        // before it.
        _ => v.split_at(v.iter().position(|&b| !REG_NAME[usize::from(b)]).unwrap_or(v.len())),
    };
    // A bracketed literal was checked above; a reg-name's bytes are all REG_NAME ones.
    let reg_name_ok = !host.is_empty();
    let port_ok = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    reg_name_ok && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass check answers as the two-pass one it replaced (a search for the ':',
    /// then a check of the bytes before it).
    #[test]
    fn the_host_check_answers_as_the_two_pass_one() {
        fn two_pass(v: &[u8]) -> bool {
            if v.first() == Some(&b'[') {
                return valid_host(v);
            }
            let (host, port) = match v.iter().position(|&b| b == b':') {
                Some(colon) => (&v[..colon], &v[colon..]),
                None => (v, &v[v.len()..]),
            };
            let port_ok = match port.split_first() {
                None => true,
                Some((b':', digits)) => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
                Some(_) => false,
            };
            !host.is_empty() && host.iter().all(|&b| REG_NAME[usize::from(b)]) && port_ok
        }
        let cases = [
            "a",
            "a:",
            "a:1",
            "a:65535",
            "a:123456",
            ":80",
            "a b",
            "a:b",
            "user@a",
            "a/b",
            "a:8:8",
            "ex%41mple.com:80",
            "127.0.0.1:8080",
            "a:8 ",
            "\u{e9}",
            "a\u{e9}:80",
            "-._~!$&'()*+,;=",
        ];
        for case in cases {
            assert_eq!(valid_host(case.as_bytes()), two_pass(case.as_bytes()), "{case:?}");
        }
        for b in 0..=255u8 {
            for v in [vec![b], vec![b'a', b], vec![b, b':', b'1'], vec![b'a', b':', b]] {
                assert_eq!(valid_host(&v), two_pass(&v), "{v:?}");
            }
        }
    }

    #[test]
    fn a_fault_answer_closes_http1_connections_and_not_http2_ones() {
        let (h1, h2) = (Fault::new(false), Fault::new(true));
        assert!(h1.response().is_none() && h2.response().is_none(), "no fault yet");
        h1.set(FAULT_TOO_LARGE);
        h2.set(FAULT_TOO_LARGE);
        let (r1, r2) = (h1.response().unwrap(), h2.response().unwrap());
        assert_eq!(
            (r1.status(), r2.status()),
            (StatusCode::PAYLOAD_TOO_LARGE, StatusCode::PAYLOAD_TOO_LARGE)
        );
        assert_eq!(r1.headers().get(CONNECTION).unwrap(), "close");
        assert!(r2.headers().get(CONNECTION).is_none(), "HTTP/2 has no Connection header");
        h2.set(FAULT_TOO_SLOW);
        let r2 = h2.response().unwrap();
        assert_eq!(r2.status(), StatusCode::REQUEST_TIMEOUT, "the latest fault answers");
        assert!(r2.headers().get(CONNECTION).is_none());
        assert!(Fault::default().response().is_none(), "a request without a body has no flag");
    }
}
