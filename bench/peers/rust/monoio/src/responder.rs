//! The minimal HTTP/1.1 responder of the `monoio` http competitor: request heads parsed with
//! `httparse` (at most 32 headers, 8 KiB per head, else `431`), `Content-Length` bodies (at most 1 MiB, else `413`; `Transfer-Encoding` →
//! `501`; a malformed head → `400`), keep-alive per HTTP/1.1, `HEAD` without a body; every
//! request gets `200 OK`, `content-type: text/plain`, `content-length: 13`, `date` (formatted
//! once per second per thread, with `httpdate`) and `Hello, World!`.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

const BODY: &[u8] = b"Hello, World!";
const MAX_HEADERS: usize = 32;
const MAX_HEAD: usize = 8 * 1024;
const MAX_BODY: usize = 1024 * 1024;

thread_local! {
    /// The `date` header value and the second it was formatted for.
    static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

pub fn push_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            *d = (secs, httpdate::fmt_http_date(now));
        }
        out.extend_from_slice(d.1.as_bytes());
    });
}

pub fn push_hello(out: &mut Vec<u8>, head_only: bool, close: bool) {
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 13\r\n");
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"date: ");
    push_date(out);
    out.extend_from_slice(b"\r\n\r\n");
    if !head_only {
        out.extend_from_slice(BODY);
    }
}

pub fn push_error(out: &mut Vec<u8>, status: &str) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\r\ncontent-length: 0\r\nconnection: close\r\ndate: ");
    push_date(out);
    out.extend_from_slice(b"\r\n\r\n");
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn has_token(value: &[u8], token: &str) -> bool {
    value.split(|b| *b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// What parsing the buffered bytes gave.
pub enum Parsed {
    /// A whole request (head and body) of this many bytes; answer it, then close if asked.
    Request { len: usize, head_only: bool, close: bool },
    /// More bytes are needed.
    Incomplete,
    /// Answer with this status and close.
    Reject(&'static str),
}

pub fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Parsed::Reject("431 Request Header Fields Too Large")
        }
        Ok(httparse::Status::Partial) => return Parsed::Incomplete,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Reject("431 Request Header Fields Too Large"),
        Err(_) => return Parsed::Reject("400 Bad Request"),
    };
    if head > MAX_HEAD {
        return Parsed::Reject("431 Request Header Fields Too Large");
    }
    let mut close = req.version != Some(1);
    let mut body = 0usize;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            match std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<usize>().ok()) {
                Some(n) if n <= MAX_BODY => body = n,
                Some(_) => return Parsed::Reject("413 Payload Too Large"),
                None => return Parsed::Reject("400 Bad Request"),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Reject("501 Not Implemented");
        } else if h.name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                close = true;
            } else if has_token(h.value, "keep-alive") {
                close = false;
            }
        }
    }
    if buf.len() < head + body {
        return Parsed::Incomplete;
    }
    Parsed::Request { len: head + body, head_only: req.method == Some("HEAD"), close }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(raw: &[u8]) -> (usize, bool, bool) {
        match parse(raw) {
            Parsed::Request { len, head_only, close } => (len, head_only, close),
            Parsed::Incomplete => panic!("incomplete"),
            Parsed::Reject(s) => panic!("rejected: {s}"),
        }
    }

    #[test]
    fn keep_alive_by_version_and_connection_header() {
        let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(request(get), (get.len(), false, false));
        assert!(request(b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").2);
        assert!(request(b"GET / HTTP/1.0\r\n\r\n").2);
        assert!(!request(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").2);
        assert!(request(b"HEAD / HTTP/1.1\r\n\r\n").1);
    }

    #[test]
    fn bodies_are_waited_for_and_bounded() {
        let post = b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab";
        assert!(matches!(parse(post), Parsed::Incomplete));
        let whole = b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET";
        assert_eq!(request(whole).0, whole.len() - 3);
        let big = format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert!(matches!(parse(big.as_bytes()), Parsed::Reject(s) if s.starts_with("413")));
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(parse(chunked), Parsed::Reject(s) if s.starts_with("501")));
    }

    #[test]
    fn bad_and_oversized_heads_are_rejected() {
        assert!(matches!(parse(b"\x01\x02 nonsense\r\n\r\n"), Parsed::Reject(s) if s.starts_with("400")));
        let long = vec![b'a'; MAX_HEAD + 1];
        let mut head = b"GET / HTTP/1.1\r\nX: ".to_vec();
        head.extend_from_slice(&long);
        assert!(matches!(parse(&head), Parsed::Reject(s) if s.starts_with("431")));
    }
}
