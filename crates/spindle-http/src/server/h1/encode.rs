//! The head of a response on spindle-http's own HTTP/1.1 path, written into the
//! connection's output buffer, and how its body is framed.
//!
//! Invariant: **one framing, stated once.** Every response says how its body ends, and says
//! it once: a body held in memory gets the `Content-Length` of its bytes (the handler's own
//! `Content-Length` and `Transfer-Encoding` are dropped); a streamed body keeps the
//! handler's `Content-Length` (and must match it) or gets one from an exact size, and is
//! otherwise sent chunked. Responses that have no body (1xx, 204, 304, and every answer to
//! `HEAD`) get no body bytes; the answer to `HEAD` and a 304 keep the handler's
//! `Content-Length`, as hyper does. A `Date` is added unless the handler set one, and
//! `Connection: close` when the connection closes after this response.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::header::{HeaderMap, CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use hyper::StatusCode;

/// How a response's body is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body bytes at all.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding (RFC 9112 §7.1).
    Chunked,
}

/// What the body is, as the head needs to know it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BodyShape {
    /// Held in memory: its length.
    Full(u64),
    /// A stream, with its exact length if the stream knows it.
    Stream(Option<u64>),
}

/// Whether a response with this status, to a request with this method, has a body.
fn has_body(status: StatusCode, head_request: bool) -> bool {
    !(head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED)
}

/// Writes the status line and the fields of a response into `out`; returns how its body is
/// framed, and whether the connection closes after it: `close`, or the handler's
/// `Connection: close`. One pass over the handler's fields, not a `HeaderMap` lookup per
/// field of interest (each lookup hashes the name).
pub(crate) fn head(
    status: StatusCode,
    headers: &HeaderMap,
    shape: BodyShape,
    head_request: bool,
    mut close: bool,
    out: &mut Vec<u8>,
) -> (Framing, bool) {
    if status == StatusCode::OK {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // The handler's `Content-Length` if it set exactly one that parses (`Some(None)`: one
    // or more that do not).
    let mut declared: Option<Option<u64>> = None;
    let mut has_date = false;
    let mut has_close = false;
    // `Connection: keep-alive` and the like, written only if the connection stays open.
    let mut kept_connection = None;
    for (name, value) in headers {
        if name == CONTENT_LENGTH {
            let parsed = value.to_str().ok().and_then(|v| v.parse().ok());
            declared = Some(if declared.is_some() { None } else { parsed });
            continue; // stated below, once
        }
        if name == TRANSFER_ENCODING {
            continue; // framed below
        }
        if name == DATE {
            has_date = true;
        } else if name == CONNECTION {
            if value.as_bytes().eq_ignore_ascii_case(b"close") {
                close = true;
                has_close = true;
            } else {
                kept_connection = Some(value);
                continue;
            }
        }
        push_field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    if let (Some(value), false) = (kept_connection, close) {
        push_field(out, b"connection", value.as_bytes());
    }
    let declared = declared.flatten();
    let body = has_body(status, head_request);
    // Which length the head states (`None`: none), and how the body goes.
    let (stated, framing) = match shape {
        _ if status.is_informational() || status == StatusCode::NO_CONTENT => (None, Framing::None),
        BodyShape::Full(len) if body => (Some(len), Framing::Length(len)),
        BodyShape::Stream(_) if body && declared.is_some() => {
            (declared, Framing::Length(declared.unwrap_or(0)))
        }
        BodyShape::Stream(Some(len)) if body => (Some(len), Framing::Length(len)),
        BodyShape::Stream(None) if body => (None, Framing::Chunked),
        // No body: the handler's length if it gave one (the length of what a GET would get),
        // else the body's own, except for a 304 (whose length would be the cached one's).
        BodyShape::Full(len) => {
            (declared.or((status != StatusCode::NOT_MODIFIED).then_some(len)), Framing::None)
        }
        BodyShape::Stream(len) => {
            (declared.or(len.filter(|_| status != StatusCode::NOT_MODIFIED)), Framing::None)
        }
    };
    if let Some(len) = stated {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if framing == Framing::Chunked {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    if close && !has_close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    if !has_date {
        out.extend_from_slice(b"date: ");
        push_date(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (framing, close)
}

fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// The line that opens a chunk of `len` bytes.
pub(crate) fn chunk_start(len: usize, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut n = len;
    loop {
        at -= 1;
        digits[at] = HEX[n & 15];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

thread_local! {
    /// This thread's `Date` value and the second it was made for.
    static DATE_CACHE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Appends the current time as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), formatted
/// once a second per thread.
fn push_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 != secs {
            let text = httpdate::fmt_http_date(now);
            if let Ok(fixed) = <[u8; 29]>::try_from(text.as_bytes()) {
                *cache = (secs, fixed);
            } else {
                out.extend_from_slice(text.as_bytes()); // not 29 bytes (a year past 9999)
                return;
            }
        }
        out.extend_from_slice(&cache.1);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{HeaderValue, CONTENT_TYPE};

    fn written(
        status: u16,
        headers: &[(&str, &str)],
        shape: BodyShape,
        head_req: bool,
        close: bool,
    ) -> (String, Framing) {
        let mut map = HeaderMap::new();
        for (n, v) in headers {
            map.append(
                hyper::header::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        let mut out = Vec::new();
        let (framing, _) =
            head(StatusCode::from_u16(status).unwrap(), &map, shape, head_req, close, &mut out);
        (String::from_utf8(out).unwrap(), framing)
    }

    fn without_date(text: &str) -> String {
        text.lines().filter(|l| !l.starts_with("date: ")).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn a_full_body_states_its_own_length_once() {
        let (text, framing) = written(
            200,
            &[("content-type", "text/plain"), ("content-length", "99")],
            BodyShape::Full(13),
            false,
            false,
        );
        assert_eq!(framing, Framing::Length(13));
        assert_eq!(without_date(&text), "HTTP/1.1 200 OK\ncontent-type: text/plain\ncontent-length: 13\n");
        assert!(text.contains("\r\ndate: ") && text.ends_with(" GMT\r\n\r\n"), "{text}");
        let (text, _) = written(404, &[("transfer-encoding", "chunked")], BodyShape::Full(0), false, true);
        assert_eq!(without_date(&text), "HTTP/1.1 404 Not Found\ncontent-length: 0\nconnection: close\n");
    }

    #[test]
    fn a_stream_is_chunked_unless_its_length_is_known() {
        let (text, framing) = written(200, &[], BodyShape::Stream(None), false, false);
        assert_eq!(framing, Framing::Chunked);
        assert!(text.contains("transfer-encoding: chunked\r\n") && !text.contains("content-length"));
        let (text, framing) = written(200, &[("content-length", "7")], BodyShape::Stream(None), false, false);
        assert_eq!(framing, Framing::Length(7));
        assert!(text.contains("content-length: 7\r\n") && !text.contains("transfer-encoding"));
        let (_, framing) = written(200, &[], BodyShape::Stream(Some(5)), false, false);
        assert_eq!(framing, Framing::Length(5));
    }

    #[test]
    fn bodiless_answers_carry_no_body() {
        let (text, framing) = written(204, &[("content-length", "3")], BodyShape::Full(3), false, false);
        assert_eq!(framing, Framing::None);
        assert!(!text.contains("content-length"), "{text}");
        // HEAD: the handler's length, else the body's.
        let (text, framing) = written(200, &[("content-length", "1234")], BodyShape::Full(0), true, false);
        assert_eq!(framing, Framing::None);
        assert!(text.contains("content-length: 1234\r\n"), "{text}");
        let (text, _) = written(200, &[], BodyShape::Full(13), true, false);
        assert!(text.contains("content-length: 13\r\n"), "{text}");
        let (text, _) = written(
            200,
            &[("content-length", "1"), ("content-length", "2")],
            BodyShape::Stream(None),
            false,
            false,
        );
        assert!(
            text.contains("transfer-encoding: chunked\r\n") && !text.contains("content-length"),
            "two lengths: {text}"
        );
        let (text, framing) = written(304, &[], BodyShape::Full(0), false, false);
        assert_eq!(framing, Framing::None);
        assert!(!text.contains("content-length"), "{text}");
    }

    #[test]
    fn the_handlers_date_and_connection_are_kept_unless_closing() {
        let (text, _) = written(
            200,
            &[("date", "yesterday"), ("connection", "keep-alive")],
            BodyShape::Full(0),
            false,
            false,
        );
        assert!(text.contains("date: yesterday\r\n") && text.matches("date:").count() == 1);
        assert!(text.contains("connection: keep-alive\r\n"));
        let (text, _) = written(200, &[("connection", "keep-alive")], BodyShape::Full(0), false, true);
        assert!(!text.contains("keep-alive") && text.contains("connection: close\r\n"), "{text}");
        let (text, _) = written(200, &[("connection", "close")], BodyShape::Full(0), false, true);
        assert_eq!(text.matches("connection:").count(), 1);
        let mut map = HeaderMap::new();
        map.insert(CONTENT_TYPE, HeaderValue::from_static("x"));
        map.insert(CONNECTION, HeaderValue::from_static("Close"));
        let mut out = Vec::new();
        let (_, close) = head(StatusCode::OK, &map, BodyShape::Full(0), false, false, &mut out);
        assert!(close, "the handler asked to close");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.to_ascii_lowercase().matches("connection: close").count(), 1, "{text}");
        let (_, close) =
            head(StatusCode::OK, &HeaderMap::new(), BodyShape::Full(0), false, false, &mut Vec::new());
        assert!(!close);
    }

    #[test]
    fn chunk_sizes_are_hex() {
        for (len, text) in [
            (0, "0\r\n"),
            (1, "1\r\n"),
            (255, "ff\r\n"),
            (4096, "1000\r\n"),
            (usize::MAX, "ffffffffffffffff\r\n"),
        ] {
            let mut out = Vec::new();
            chunk_start(len, &mut out);
            assert_eq!(out, text.as_bytes());
        }
    }

    #[test]
    fn the_date_is_an_imf_fixdate() {
        let mut out = Vec::new();
        push_date(&mut out);
        let text = String::from_utf8(out).unwrap();
        let parsed = httpdate::parse_http_date(&text).expect("an HTTP date");
        let age = SystemTime::now().duration_since(parsed).unwrap_or_default();
        assert!(age.as_secs() < 60, "{text} is now");
    }
}
