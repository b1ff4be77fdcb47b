//! The `grpc-timeout` header: parsed into a call's deadline (the in-process channel, the
//! typed path, the network server's admission check) and written from a client's timeout
//! (the network client). A leaf shared by every side of the crate.

use std::time::{Duration, Instant};

/// Parses a `grpc-timeout` header value: 1 to 8 ASCII digits, then one unit of `H M S m u n`
/// (the gRPC spec's `TimeoutValue TimeoutUnit`); `None` for anything else (a sign, a space,
/// a ninth digit). The network server refuses a request whose value is malformed (module
/// `server::admit`).
pub(crate) fn parse_timeout(value: &http::HeaderValue) -> Option<Duration> {
    let (&unit, digits) = value.as_bytes().split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // At most 99,999,999: no overflow below, in hours either.
    let n = digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `grpc-timeout`, named once: a lookup by `&str` parses the name on every call, a cost of
/// every unary call (`docs/perf/grpc.md`, "Header lookups and routing").
pub(crate) static GRPC_TIMEOUT: http::HeaderName = http::HeaderName::from_static("grpc-timeout");

/// The `grpc-timeout` header's value, if any. A request carries a few headers (tonic's
/// client sends `te` and `content-type`): comparing names is cheaper than hashing one.
fn timeout_value(headers: &http::HeaderMap) -> Option<&http::HeaderValue> {
    if headers.len() <= 4 {
        headers.iter().find(|(name, _)| **name == GRPC_TIMEOUT).map(|(_, value)| value)
    } else {
        headers.get(&GRPC_TIMEOUT)
    }
}

/// The timeout in a `grpc-timeout` header, if any and valid.
pub(crate) fn parse_timeout_header(headers: &http::HeaderMap) -> Option<Duration> {
    parse_timeout(timeout_value(headers)?)
}

/// The deadline of a call, from its `grpc-timeout` header.
pub(crate) fn deadline_of(headers: &http::HeaderMap) -> Option<Instant> {
    let timeout = parse_timeout(timeout_value(headers)?)?;
    Instant::now().checked_add(timeout)
}

/// A `grpc-timeout` value for `t`: at most 8 digits, in the finest unit that fits.
pub(crate) fn encode_timeout(t: Duration) -> http::HeaderValue {
    const MAX: u128 = 99_999_999;
    let nanos = t.as_nanos();
    let (n, unit) = if nanos <= MAX {
        (nanos, "n")
    } else if nanos / 1_000 <= MAX {
        (nanos.div_ceil(1_000), "u")
    } else if nanos / 1_000_000 <= MAX {
        (nanos.div_ceil(1_000_000), "m")
    } else if t.as_secs() as u128 <= MAX {
        (t.as_secs() as u128, "S")
    } else {
        ((t.as_secs() / 3600).min(MAX as u64) as u128, "H")
    };
    http::HeaderValue::from_str(&format!("{n}{unit}")).expect("digits and a unit letter")
}

#[cfg(test)]
mod tests {
    /// The `grpc-timeout` lookup scans a few headers and hashes beyond that: both find it.
    #[test]
    fn the_timeout_header_is_found_among_few_or_many_headers() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(super::parse_timeout_header(&headers), None);
        headers.insert("te", http::HeaderValue::from_static("trailers"));
        headers.insert("grpc-timeout", http::HeaderValue::from_static("250m"));
        assert_eq!(super::parse_timeout_header(&headers), Some(std::time::Duration::from_millis(250)));
        for i in 0..6 {
            headers.insert(
                http::HeaderName::try_from(format!("x-extra-{i}")).unwrap(),
                http::HeaderValue::from_static("v"),
            );
        }
        assert!(headers.len() > 4);
        assert_eq!(super::parse_timeout_header(&headers), Some(std::time::Duration::from_millis(250)));
        headers.remove("grpc-timeout");
        assert_eq!(super::parse_timeout_header(&headers), None);
        assert!(super::deadline_of(&headers).is_none());
    }
}
