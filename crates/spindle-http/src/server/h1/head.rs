//! A request head read by spindle-http's own HTTP/1.1 path: parsed with `httparse` and made
//! into the `Request` a handler receives without copying (the URI and each header value are
//! slices of the bytes read, as hyper makes them), or handed to hyper when it is not a
//! request this path serves.
//!
//! Invariant: **plain requests only.** A head becomes a request here only if it is HTTP/1.1,
//! well formed (httparse's strict parse, then the `http` crate's checks of the method, target,
//! names and values), not `CONNECT`, and asks for nothing beyond one answer to a request
//! held whole in memory: no `Transfer-Encoding`; at most one `Content-Length` (digits only),
//! whose body is within the server's body limit, within [`Limits::max_request`] with the
//! head, and already read with the head (it is given to the handler as a body in memory; a
//! body still on its way goes to hyper, which applies the minimum body rate); no `Expect`,
//! no `Upgrade`, no `TE` (trailers), and a `Connection` of `close` or `keep-alive` at most
//! once. And it passes the server's checks before a handler (`limits::precheck`: RFC
//! 9112's single valid `Host`, and the declared body size), checked here while the fields
//! are read rather than by looking them up again. Everything else, malformed heads
//! included, is [`Parsed::Handoff`]: hyper serves the connection from that request on and
//! gives the answers (and the request smuggling defences) it gives today.

use std::mem::MaybeUninit;

use bytes::Bytes;
use hyper::header::{
    HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, EXPECT, HOST, TE, TRANSFER_ENCODING, UPGRADE,
};
use hyper::{HeaderMap, Method, Request, Uri, Version};

use crate::transport::body::Body;

/// The most header fields this path parses in place (an array on the stack, left
/// uninitialised); a head with more goes to hyper, which applies the server's limit.
pub(crate) const MAX_HEADERS: usize = 100;

/// What this path takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Header fields (capped at [`MAX_HEADERS`]); hyper answers a head with more.
    pub(crate) max_headers: usize,
    /// The longest head hyper takes (it answers `431` beyond).
    pub(crate) max_head: usize,
    /// The longest whole request (head and body) served here.
    pub(crate) max_request: usize,
    /// The server's body limit (hyper's path answers `413` beyond).
    pub(crate) max_body: Option<u64>,
}

/// What the bytes at the start of a buffer hold.
#[allow(clippy::large_enum_variant)] // returned once per request and taken apart at once
pub(crate) enum Parsed {
    /// A plain request that took `len` bytes (head and body); `close` if it asked for
    /// `Connection: close`.
    Request { req: Request<Body>, len: usize, close: bool },
    /// The start of a head: more bytes are needed.
    Partial,
    /// Not a request this path serves (see the module doc).
    Handoff,
}

/// Parses the request at `data[from..]`.
pub(crate) fn parse(data: &Bytes, from: usize, limits: &Limits) -> Parsed {
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let slots = &mut slots[..limits.max_headers.min(MAX_HEADERS)];
    let mut head = httparse::Request::new(&mut []);
    let len = match head.parse_with_uninit_headers(&data[from..], slots) {
        Ok(httparse::Status::Complete(len)) if len <= limits.max_head => len,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        // Malformed, or longer than hyper takes: hyper's answer.
        _ => return Parsed::Handoff,
    };
    if head.version != Some(1) {
        return Parsed::Handoff; // HTTP/1.0: its keep-alive rules are hyper's
    }
    let (Some(method), Some(path)) = (head.method, head.path) else { return Parsed::Handoff };
    let method = match method {
        "GET" => Method::GET,
        "CONNECT" => return Parsed::Handoff,
        other => match Method::from_bytes(other.as_bytes()) {
            Ok(m) => m,
            Err(_) => return Parsed::Handoff,
        },
    };
    let Ok(uri) = Uri::from_maybe_shared(data.slice_ref(path.as_bytes())) else { return Parsed::Handoff };
    let mut headers = spare_map(head.headers.len());
    let mut close = false;
    let mut seen_connection = false;
    let mut length = None;
    let mut hosts = 0;
    for field in head.headers.iter() {
        let Ok(name) = HeaderName::from_bytes(field.name.as_bytes()) else { return Parsed::Handoff };
        if name == HOST {
            // Empty is allowed (a target without an authority).
            hosts += 1;
            if !field.value.is_empty() && !crate::server::precheck::valid_host(field.value) {
                return Parsed::Handoff;
            }
        } else if name == CONTENT_LENGTH {
            length = match (length, content_length(field.value)) {
                (None, Some(n)) if limits.max_body.is_none_or(|max| n <= max) => Some(n),
                // Repeated, not digits, or over the body limit: hyper's answer.
                _ => return Parsed::Handoff,
            };
        } else if name == CONNECTION {
            if seen_connection {
                return Parsed::Handoff;
            }
            seen_connection = true;
            if field.value.eq_ignore_ascii_case(b"close") {
                close = true;
            } else if !field.value.eq_ignore_ascii_case(b"keep-alive") {
                return Parsed::Handoff;
            }
        } else if name == TRANSFER_ENCODING || name == EXPECT || name == UPGRADE || name == TE {
            // `TE` (`trailers`): hyper sends a streamed answer's trailers then; this path
            // never does.
            return Parsed::Handoff;
        }
        let Ok(value) = HeaderValue::from_maybe_shared(data.slice_ref(field.value)) else {
            return Parsed::Handoff;
        };
        headers.append(name, value);
    }
    if hosts != 1 {
        return Parsed::Handoff; // hyper's path answers 400
    }
    // The body, in memory: all of it must have come with its head. One still on its way
    // goes to hyper, whose request body applies the server's minimum body rate while the
    // handler waits for it.
    let length = length.unwrap_or(0);
    let whole = match usize::try_from(length).ok().and_then(|n| n.checked_add(len)) {
        Some(whole) if whole <= limits.max_request && whole <= data.len() - from => whole,
        _ => return Parsed::Handoff,
    };
    let body = if length == 0 { Body::empty() } else { Body::from(data.slice(from + len..from + whole)) };
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    Parsed::Request { req, len: whole, close }
}

thread_local! {
    /// A header map given back empty (a response's, once written): the next request's
    /// fields go into it, with no allocation (a map is two: its index and its entries, each
    /// allocated and freed for every request otherwise).
    static SPARE_MAP: std::cell::Cell<Option<HeaderMap>> = const { std::cell::Cell::new(None) };
}

/// The most fields a map kept for reuse has room for: a map grown by a large answer is
/// freed rather than kept.
const SPARE_MAP_ROOM: usize = 64;

/// An empty header map with room for `n` fields: this thread's spare one if there is one.
fn spare_map(n: usize) -> HeaderMap {
    match SPARE_MAP.with(|spare| spare.take()) {
        Some(mut map) => {
            map.reserve(n);
            map
        }
        None => HeaderMap::with_capacity(n),
    }
}

/// Gives a header map back for the next request (emptied; dropped if it grew large).
pub(crate) fn give_back_map(mut map: HeaderMap) {
    if map.capacity() <= SPARE_MAP_ROOM {
        map.clear();
        SPARE_MAP.with(|spare| spare.set(Some(map)));
    }
}

/// A `Content-Length` value: 1 to 19 digits, nothing else (no sign, no list, no spaces).
fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits =
        Limits { max_headers: MAX_HEADERS, max_head: 64 << 10, max_request: 8 << 10, max_body: Some(1000) };

    fn with_headers(max_headers: usize) -> Limits {
        Limits { max_headers, ..LIMITS }
    }

    fn parsed(text: &str) -> Parsed {
        parse(&Bytes::copy_from_slice(text.as_bytes()), 0, &LIMITS)
    }

    fn request(text: &str) -> (Request<Body>, usize, bool) {
        match parsed(text) {
            Parsed::Request { req, len, close } => (req, len, close),
            Parsed::Partial => panic!("partial: {text:?}"),
            Parsed::Handoff => panic!("handed off: {text:?}"),
        }
    }

    fn handed_off(text: &str) -> bool {
        matches!(parsed(text), Parsed::Handoff)
    }

    #[test]
    fn a_plain_request_becomes_the_handlers_request() {
        let text = "GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nX-Thing: one\r\nx-thing: two\r\n\r\nNEXT";
        let (req, len, close) = request(text);
        assert_eq!(len, text.len() - 4, "the head's length, not the next request's bytes");
        assert!(!close);
        assert_eq!(req.method(), Method::GET);
        assert_eq!(req.uri().path(), "/a/b");
        assert_eq!(req.uri().query(), Some("c=d"));
        assert_eq!(req.version(), Version::HTTP_11);
        assert_eq!(req.headers()["host"], "example.com");
        let things: Vec<_> = req.headers().get_all("x-thing").iter().collect();
        assert_eq!(things, ["one", "two"], "repeated fields kept in order");
        let (req, _, close) = request("DELETE /x HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n");
        assert_eq!(req.method(), Method::DELETE);
        assert!(close);
        let (_, _, close) =
            request("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
        assert!(!close);
        let (req, _, _) = request("GET / HTTP/1.1\r\nHost:\r\n\r\n");
        assert_eq!(req.headers()["host"], "", "an empty Host is allowed");
        let (req, _, _) = request("PURGE http://h/x HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(req.method().as_str(), "PURGE");
        assert_eq!(req.uri().host(), Some("h"), "absolute form");
    }

    #[test]
    fn a_partial_head_asks_for_more() {
        let full = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        for cut in 0..full.len() {
            assert!(matches!(parsed(&full[..cut]), Parsed::Partial), "cut at {cut}");
        }
        // A second request after the first, parsed from its offset.
        let two = Bytes::from(format!("{full}{}", &full[..10]));
        assert!(matches!(parse(&two, 0, &LIMITS), Parsed::Request { .. }));
        assert!(matches!(parse(&two, full.len(), &LIMITS), Parsed::Partial));
    }

    #[test]
    fn anything_but_a_plain_request_goes_to_hyper() {
        for text in [
            "GET / HTTP/1.0\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\nhello",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\nhello",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x5\r\n\r\nhello",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1001\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello",
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n",
            "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nTE: trailers\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, close\r\n\r\n",
            "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
            "GET / HTTP/2.0\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : h\r\n\r\n",
            "GET / HTTP/1.1\r\nBad\x01Name: h\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\x7fb\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
            "G\x01T / HTTP/1.1\r\nHost: h\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a:b:c\r\n\r\n",
            "GET /\x01 HTTP/1.1\r\nHost: h\r\n\r\n",
        ] {
            assert!(handed_off(text), "{text:?} was served here");
        }
    }

    #[test]
    fn a_body_in_memory_comes_whole_with_its_request() {
        let text = "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET";
        let data = Bytes::copy_from_slice(text.as_bytes());
        let Parsed::Request { req, len, .. } = parse(&data, 0, &LIMITS) else { panic!("not served") };
        assert_eq!(len, text.len() - 3, "the head and the body");
        let body = req.into_body().bytes().unwrap();
        assert_eq!(body, "hello");
        assert!(data.as_ptr_range().contains(&body.as_ptr()), "a slice of the bytes read");
        for cut in text.len() - 8..text.len() - 3 {
            assert!(
                matches!(parsed(&text[..cut]), Parsed::Handoff),
                "body cut at {cut}: hyper's, for its rate"
            );
        }
        let (req, _, _) = request("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n1234567");
        assert_eq!(req.into_body().bytes().unwrap(), "1234567", "leading zeros are digits");
        // Longer than the request limit (8 KiB here) though within the body limit: hyper's.
        let big = Limits { max_body: None, ..LIMITS };
        let text = format!("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9000\r\n\r\n{}", "x".repeat(9000));
        assert!(matches!(parse(&Bytes::from(text), 0, &big), Parsed::Handoff));
    }

    #[test]
    fn a_map_given_back_is_the_next_requests_and_holds_only_its_fields() {
        let mut res = HeaderMap::new();
        res.insert("x-from-the-answer", HeaderValue::from_static("1"));
        res.append("x-from-the-answer", HeaderValue::from_static("2"));
        give_back_map(res);
        let (req, _, _) = request("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(req.headers().len(), 1, "{:?}", req.headers());
        assert_eq!(req.headers()["host"], "h");
        // A large map is not kept.
        let mut big = HeaderMap::with_capacity(SPARE_MAP_ROOM * 2);
        big.insert("x", HeaderValue::from_static("1"));
        give_back_map(big);
        assert!(SPARE_MAP.with(|spare| spare.take()).is_none());
    }

    #[test]
    fn a_head_longer_than_hyper_takes_goes_to_hyper() {
        let text = "GET / HTTP/1.1\r\nHost: h\r\nX-Long: 0123456789\r\n\r\n";
        let data = Bytes::from_static(text.as_bytes());
        assert!(matches!(
            parse(&data, 0, &Limits { max_head: text.len(), ..LIMITS }),
            Parsed::Request { .. }
        ));
        assert!(matches!(parse(&data, 0, &Limits { max_head: text.len() - 1, ..LIMITS }), Parsed::Handoff));
    }

    #[test]
    fn more_fields_than_allowed_go_to_hyper() {
        let mut text = String::from("GET / HTTP/1.1\r\nHost: h\r\n");
        for i in 0..4 {
            text.push_str(&format!("x-{i}: v\r\n"));
        }
        text.push_str("\r\n");
        let data = Bytes::from(text);
        assert!(matches!(parse(&data, 0, &with_headers(5)), Parsed::Request { .. }));
        assert!(matches!(parse(&data, 0, &with_headers(4)), Parsed::Handoff));
        let mut many = String::from("GET / HTTP/1.1\r\nHost: h\r\n");
        for i in 0..=MAX_HEADERS {
            many.push_str(&format!("x-{i}: v\r\n"));
        }
        many.push_str("\r\n");
        assert!(
            matches!(parse(&Bytes::from(many), 0, &with_headers(1000)), Parsed::Handoff),
            "capped at MAX_HEADERS"
        );
    }

    #[test]
    fn header_values_are_slices_of_the_bytes_read() {
        let data = Bytes::from_static(b"GET /p HTTP/1.1\r\nHost: h\r\nx-long: 0123456789abcdef\r\n\r\n");
        let (req, _, _) = match parse(&data, 0, &LIMITS) {
            Parsed::Request { req, len, close } => (req, len, close),
            _ => panic!("not a request"),
        };
        let value = req.headers()["x-long"].as_bytes();
        let range = data.as_ptr_range();
        assert!(range.contains(&value.as_ptr()), "the value points into the read buffer");
    }
}
