//! The server's answers to requests that break its rules: before the handler runs (the
//! strict `Host` rule of RFC 9112 §3.2, a declared body length above the limit), and in place
//! of the handler's answer when the request body broke a limit while it ran (the flag of
//! module `transport::limits`). Each closes the connection (HTTP/1).

use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Request, Response, StatusCode, Version};

use crate::transport::body::Body;
use crate::transport::limits::{BodyLimits, Fault};

/// The response that replaces the handler's, if the body broke a limit.
pub(crate) fn fault_response(fault: &Fault) -> Option<Response<Body>> {
    let (status, http2) = fault.broken()?;
    let text =
        if status == StatusCode::PAYLOAD_TOO_LARGE { "Payload Too Large\n" } else { "Request Timeout\n" };
    let mut res = closing(status, text);
    if http2 {
        res.headers_mut().remove(CONNECTION);
    }
    Some(res)
}

/// A plain-text answer that closes the connection.
fn closing(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut res = Response::new(Body::from(text));
    *res.status_mut() = code;
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    res
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
/// sub-delims. A table: the Host check runs for every request, and a lookup is one load per
/// byte where a scan of the 17 others is a loop per byte.
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

    use crate::transport::limits::{FAULT_TOO_LARGE, FAULT_TOO_SLOW};

    #[test]
    fn a_fault_answer_closes_http1_connections_and_not_http2_ones() {
        let (h1, h2) = (Fault::new(false), Fault::new(true));
        assert!(fault_response(&h1).is_none() && fault_response(&h2).is_none(), "no fault yet");
        h1.set(FAULT_TOO_LARGE);
        h2.set(FAULT_TOO_LARGE);
        let (r1, r2) = (fault_response(&h1).unwrap(), fault_response(&h2).unwrap());
        assert_eq!(
            (r1.status(), r2.status()),
            (StatusCode::PAYLOAD_TOO_LARGE, StatusCode::PAYLOAD_TOO_LARGE)
        );
        assert_eq!(r1.headers().get(CONNECTION).unwrap(), "close");
        assert!(r2.headers().get(CONNECTION).is_none(), "HTTP/2 has no Connection header");
        h2.set(FAULT_TOO_SLOW);
        let r2 = fault_response(&h2).unwrap();
        assert_eq!(r2.status(), StatusCode::REQUEST_TIMEOUT, "the latest fault answers");
        assert!(r2.headers().get(CONNECTION).is_none());
        assert!(fault_response(&Fault::default()).is_none(), "a request without a body has no flag");
    }
}
