//! Message size limits: the channel's own, on the gRPC frames it carries, and tonic's, whose
//! status it reports as the gRPC spec does.
//!
//! # The channel's limits
//!
//! [`crate::Channel::max_request_message_size`] and
//! [`crate::Channel::max_response_message_size`] (4 MiB each by default, tonic's and grpc-go's
//! default receive limit) are checked on the length prefix of every gRPC message that crosses
//! the channel: one byte of compressed flag, four bytes of big-endian length, then the message.
//! A [`Scanner`] follows the prefixes through the body's data chunks, wherever the chunks
//! split them: a message may span chunks, a chunk may hold several messages, and a prefix may
//! itself be split across chunks. It reads five bytes per message and skips the rest.
//!
//! # Invariants
//!
//! - **An oversized message never crosses.** the chunk carrying its prefix is cut before the
//!   prefix (the messages before it in that chunk do cross: none is lost), and the call ends
//!   with `RESOURCE_EXHAUSTED`, naming the size, the limit and the setting that raises it.
//! - **No oversized message, no clean end.** Whoever reads the other side never sees the oversized message nor a clean end: the
//!   handler reading an oversized *request* gets no more frames (its request body stays
//!   pending until the call, failed by the channel, drops it; module `channel::call_state`); the client
//!   reading an oversized *response* gets the failing status as trailers instead.
//! - **A failed scanner is finished.** A scanner that found one message too large, or a second
//!   message where one is allowed, is finished: the call fails, nothing more is scanned.
//!
//! # One request message
//!
//! A unary or server-streaming method takes exactly one request message (the gRPC spec's
//! cardinality; grpc-go ends such a call with `INTERNAL` on none or several). For those calls
//! the channel's request [`Scanner`] ([`Scanner::single`]) counts the messages whatever the
//! size limit: the prefix of a second message is reported as [`Stop::Second`] and cut off
//! like an oversized message, so the handler never sees it ("an oversized message never
//! crosses" holds for it too); a body that ends with no message at all is reported by the
//! request body (module `channel::request`, [`Scanner::saw_nothing`]). Both end the call with
//! [`cardinality`]'s `INTERNAL`.
//!
//! # tonic's limits
//!
//! tonic 0.14's codec reports its own limits (`max_decoding_message_size`,
//! `max_encoding_message_size` on a generated client or server) as `OUT_OF_RANGE`, where the
//! gRPC spec, grpc-go and grpc-java say `RESOURCE_EXHAUSTED`. A status crossing the channel
//! that carries `OUT_OF_RANGE` *and* one of tonic's two messages ([`TONIC_DECODE_PREFIX`],
//! [`TONIC_ENCODE_PREFIX`]) is reported as `RESOURCE_EXHAUSTED` with the same message
//! ([`respec`]); any other `OUT_OF_RANGE` (a handler's own) crosses unchanged. A client's own
//! decoding limit is checked by tonic in the client, after the channel: that one stays
//! `OUT_OF_RANGE` (the crate README says so).

use http::HeaderMap;
use tonic::{Code, Status};

/// The default of both channel limits: 4 MiB, tonic's and grpc-go's default receive limit.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 * 1024 * 1024;

/// How tonic 0.14 words a message above a decoding limit (`codec/decode.rs`), then
/// `{len} bytes, the limit is: {limit} bytes`.
pub(crate) const TONIC_DECODE_PREFIX: &str = "Error, decoded message length too large: found ";

/// How tonic 0.14 words a message above an encoding limit (`codec/encode.rs`).
pub(crate) const TONIC_ENCODE_PREFIX: &str = "Error, encoded message length too large: found ";

/// Which way a message crosses the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Request,
    Response,
}

/// The status of a message of `len` bytes above the channel's `limit` ("an oversized message never crosses").
pub(crate) fn too_large(direction: Direction, len: usize, limit: usize) -> Status {
    let (what, setting) = match direction {
        Direction::Request => ("request", "max_request_message_size"),
        Direction::Response => ("response", "max_response_message_size"),
    };
    Status::resource_exhausted(format!(
        "spindle-grpc: {what} message of {len} bytes is larger than the channel's limit of {limit} bytes \
         (raise it with spindle_grpc::Channel::{setting})"
    ))
}

/// Whether `status` is tonic's report of one of its codec's size limits.
pub(crate) fn is_tonic_limit(code: Code, message: &str) -> bool {
    code == Code::OutOfRange
        && (message.starts_with(TONIC_DECODE_PREFIX) || message.starts_with(TONIC_ENCODE_PREFIX))
}

/// `status` as the gRPC spec reports it: tonic's size-limit `OUT_OF_RANGE` becomes
/// `RESOURCE_EXHAUSTED` with the same message; any other status is returned unchanged.
pub(crate) fn respec(status: Status) -> Status {
    if is_tonic_limit(status.code(), status.message()) {
        Status::with_details_and_metadata(
            Code::ResourceExhausted,
            status.message(),
            status.details().to_vec().into(),
            status.metadata().clone(),
        )
    } else {
        status
    }
}

/// [`respec`] on a status carried in headers (a trailers-only response) or trailers.
pub(crate) fn respec_headers(headers: &mut HeaderMap) {
    // A call's trailers hold a header or two: comparing names is cheaper than hashing one
    // (this runs once per call).
    let code = if headers.len() <= 4 {
        headers.iter().find(|(name, _)| *name == Status::GRPC_STATUS).map(|(_, value)| value)
    } else {
        headers.get(&Status::GRPC_STATUS)
    };
    // "11": Code::OutOfRange as a grpc-status value.
    if code.is_none_or(|code| code.as_bytes() != b"11") {
        return;
    }
    let Some(status) = Status::from_header_map(headers) else { return };
    if is_tonic_limit(status.code(), status.message()) {
        // add_header replaces grpc-status and grpc-message (the message is unchanged, so it
        // always encodes).
        let _ = Status::resource_exhausted(status.message()).add_header(headers);
    }
}

/// tonic's default decoding limit (`max_decoding_message_size`, server and client): 4 MiB.
pub(crate) const TONIC_MAX_DECODING: usize = 4 * 1024 * 1024;

/// tonic's default encoding limit (`max_encoding_message_size`): none.
pub(crate) const TONIC_MAX_ENCODING: usize = usize::MAX;

/// The limits on a typed call's messages (module `typed`), each checked on a message's
/// `encoded_len()` where the encoded path checks it, in the same order and with the same
/// status: a request by the client's encoder, then the channel, then the server's decoder; a
/// response by the server's encoder, then the channel, then the client's decoder (whose
/// `OUT_OF_RANGE` the encoded path cannot rewrite either).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypedLimits {
    pub(crate) client_encoding: usize,
    pub(crate) channel_request: usize,
    pub(crate) server_decoding: usize,
    pub(crate) server_encoding: usize,
    pub(crate) channel_response: usize,
    pub(crate) client_decoding: usize,
}

impl TypedLimits {
    /// Checks a request message of `len` encoded bytes.
    #[inline]
    pub(crate) fn request(&self, len: usize) -> Result<(), Status> {
        if len > self.client_encoding {
            return Err(tonic_encoding(len, self.client_encoding));
        }
        if len > self.channel_request {
            return Err(too_large(Direction::Request, len, self.channel_request));
        }
        if len > self.server_decoding {
            return Err(respec(tonic_decoding(len, self.server_decoding)));
        }
        Ok(())
    }

    /// Checks a response message of `len` encoded bytes.
    #[inline]
    pub(crate) fn response(&self, len: usize) -> Result<(), Status> {
        if len > self.server_encoding {
            return Err(tonic_encoding(len, self.server_encoding));
        }
        if len > self.channel_response {
            return Err(too_large(Direction::Response, len, self.channel_response));
        }
        if len > self.client_decoding {
            // The client's own decoder: OUT_OF_RANGE, as on the encoded path (module doc).
            return Err(tonic_decoding(len, self.client_decoding));
        }
        Ok(())
    }
}

/// tonic's status for a message above an encoding limit, as the channel reports it.
fn tonic_encoding(len: usize, limit: usize) -> Status {
    respec(Status::out_of_range(format!("{TONIC_ENCODE_PREFIX}{len} bytes, the limit is: {limit} bytes")))
}

/// tonic's status for a message above a decoding limit (`OUT_OF_RANGE`).
fn tonic_decoding(len: usize, limit: usize) -> Status {
    Status::out_of_range(format!("{TONIC_DECODE_PREFIX}{len} bytes, the limit is: {limit} bytes"))
}

/// The status of a call to a method taking one request message that received `none` or
/// several (module doc, "one request message"); grpc-go's wording.
pub(crate) fn cardinality(none: bool) -> Status {
    Status::internal(if none {
        "cardinality violation: received no request message from non-client-streaming RPC"
    } else {
        "cardinality violation: received multiple request messages for non-client-streaming RPC"
    })
}

/// Follows the gRPC length prefixes through a body's data chunks (module doc).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scanner {
    /// The largest message allowed; `usize::MAX` when no message can exceed it (the scanner
    /// then reads nothing, unless `single`).
    limit: usize,
    /// Bytes of the current message not seen yet.
    rest: usize,
    /// The first bytes of a prefix split across chunks, and how many there are (0 to 4).
    prefix: [u8; 5],
    have: u8,
    /// At most one message is allowed (module doc, "one request message").
    single: bool,
    /// Whether a whole prefix has been seen (a first message began).
    began: bool,
}

/// Why a [`Scanner`] stopped: the chunk just scanned must be cut at `at` (the messages before
/// it cross), and the call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A message above the limit.
    TooLarge(TooLarge),
    /// A second message where one is allowed; its prefix starts at `at` (0 when it started in
    /// an earlier chunk).
    Second { at: usize },
}

/// A message above the limit: where its prefix starts in the chunk just scanned (0 when it
/// started in an earlier chunk), its length, and the limit it broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge {
    pub(crate) at: usize,
    pub(crate) len: usize,
    pub(crate) limit: usize,
}

impl Scanner {
    pub(crate) fn new(limit: usize) -> Scanner {
        // A length prefix holds at most u32::MAX: a limit at or above it can never be exceeded.
        let limit = if limit >= u32::MAX as usize { usize::MAX } else { limit };
        Scanner { limit, rest: 0, prefix: [0; 5], have: 0, single: false, began: false }
    }

    /// A scanner that also allows at most one message (module doc, "one request message").
    pub(crate) fn single(limit: usize) -> Scanner {
        Scanner { single: true, ..Scanner::new(limit) }
    }

    /// Whether nothing of a message has been seen: no whole prefix, no part of one.
    pub(crate) fn saw_nothing(&self) -> bool {
        !self.began && self.have == 0
    }

    /// Scans the next data chunk of the body. Returns the first message above the limit (or
    /// the second where one is allowed), after which the scanner is finished ("a failed
    /// scanner is finished").
    #[inline]
    pub(crate) fn scan(&mut self, chunk: &[u8]) -> Option<Stop> {
        if self.limit == usize::MAX && !self.single {
            return None;
        }
        let mut i = 0;
        loop {
            let skip = self.rest.min(chunk.len() - i);
            i += skip;
            self.rest -= skip;
            if i == chunk.len() {
                return None;
            }
            // A prefix starts (or resumes) at i.
            let (at, len) = match chunk.get(i..i + 5) {
                Some(&[_, a, b, c, d]) if self.have == 0 => {
                    i += 5;
                    (i - 5, u32::from_be_bytes([a, b, c, d]) as usize)
                }
                _ => {
                    let at = if self.have == 0 { i } else { 0 };
                    let take = (5 - self.have as usize).min(chunk.len() - i);
                    self.prefix[self.have as usize..self.have as usize + take]
                        .copy_from_slice(&chunk[i..i + take]);
                    self.have += take as u8;
                    i += take;
                    if self.have < 5 {
                        return None;
                    }
                    self.have = 0;
                    let [_, a, b, c, d] = self.prefix;
                    (at, u32::from_be_bytes([a, b, c, d]) as usize)
                }
            };
            if self.single && std::mem::replace(&mut self.began, true) {
                self.finish();
                return Some(Stop::Second { at });
            }
            if len > self.limit {
                let limit = self.limit;
                self.finish();
                return Some(Stop::TooLarge(TooLarge { at, len, limit }));
            }
            self.rest = len;
        }
    }

    /// Scans nothing more ("a failed scanner is finished").
    fn finish(&mut self) {
        self.limit = usize::MAX;
        self.single = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: u32) -> Vec<u8> {
        let mut f = vec![0u8];
        f.extend_from_slice(&len.to_be_bytes());
        f.extend(std::iter::repeat_n(7u8, len as usize));
        f
    }

    /// Scans `body` cut into chunks at `cuts`; returns the first violation with its chunk.
    fn scan_cut(limit: usize, body: &[u8], cuts: &[usize]) -> Option<(usize, TooLarge)> {
        let mut scanner = Scanner::new(limit);
        let mut start = 0;
        for (n, &end) in cuts.iter().chain(std::iter::once(&body.len())).enumerate() {
            match scanner.scan(&body[start..end]) {
                Some(Stop::TooLarge(t)) => return Some((n, t)),
                Some(Stop::Second { at }) => panic!("a second message at {at} without Scanner::single"),
                None => {}
            }
            start = end;
        }
        None
    }

    #[test]
    fn messages_within_the_limit_pass_however_cut() {
        let body: Vec<u8> = [frame(10), frame(0), frame(100), frame(3)].concat();
        for a in 0..=body.len() {
            for b in a..=body.len() {
                assert_eq!(scan_cut(100, &body, &[a, b]), None, "cut at {a}, {b}");
            }
        }
    }

    #[test]
    fn a_message_above_the_limit_is_found_however_cut() {
        let body: Vec<u8> = [frame(10), frame(0), frame(101), frame(3)].concat();
        let prefix_at = 15 + 5;
        for a in 0..=body.len() {
            for b in a..=body.len() {
                let (chunk, t) = scan_cut(100, &body, &[a, b]).expect("found");
                assert_eq!(t.len, 101);
                // The chunk holding the prefix's last byte reports it: at the prefix's offset
                // there if the prefix starts in that chunk, else at 0.
                let (starts, ends) = ([0, a, b], [a, b, body.len()]);
                let last = prefix_at + 4;
                let holder = (0..3).find(|&n| starts[n] <= last && last < ends[n]).unwrap();
                assert_eq!(chunk, holder, "cut at {a}, {b}");
                let expect_at = prefix_at.saturating_sub(starts[holder]);
                assert_eq!(t.at, expect_at, "cut at {a}, {b}");
            }
        }
    }

    #[test]
    fn one_chunk_many_messages() {
        let body: Vec<u8> = [frame(1), frame(2), frame(3), frame(200)].concat();
        assert_eq!(scan_cut(100, &body, &[]), Some((0, TooLarge { at: 6 + 7 + 8, len: 200, limit: 100 })));
    }

    /// Scans `body` cut into chunks at `cuts` with a single-message scanner; returns the
    /// first stop with its chunk, and whether the scanner then saw nothing.
    fn scan_single(limit: usize, body: &[u8], cuts: &[usize]) -> (Option<(usize, Stop)>, bool) {
        let mut scanner = Scanner::single(limit);
        let mut start = 0;
        for (n, &end) in cuts.iter().chain(std::iter::once(&body.len())).enumerate() {
            if let Some(stop) = scanner.scan(&body[start..end]) {
                return (Some((n, stop)), scanner.saw_nothing());
            }
            start = end;
        }
        (None, scanner.saw_nothing())
    }

    #[test]
    fn a_second_message_is_found_however_cut_whatever_the_limit() {
        let body: Vec<u8> = [frame(10), frame(0)].concat();
        for limit in [100, usize::MAX] {
            for a in 0..=body.len() {
                for b in a..=body.len() {
                    let (found, _) = scan_single(limit, &body, &[a, b]);
                    let (chunk, stop) = found.unwrap_or_else(|| panic!("missed at {a}, {b}"));
                    // The chunk holding the second prefix's last byte reports it.
                    let (starts, ends) = ([0, a, b], [a, b, body.len()]);
                    let last = 15 + 4;
                    let holder = (0..3).find(|&n| starts[n] <= last && last < ends[n]).unwrap();
                    assert_eq!(chunk, holder, "cut at {a}, {b}");
                    assert_eq!(
                        stop,
                        Stop::Second { at: 15usize.saturating_sub(starts[holder]) },
                        "cut at {a}, {b}"
                    );
                }
            }
        }
        // One message, empty or not, passes; an empty body saw nothing, a partial prefix did.
        assert_eq!(scan_single(usize::MAX, &frame(0), &[]), (None, false));
        assert_eq!(scan_single(usize::MAX, &frame(7), &[3]), (None, false));
        assert_eq!(scan_single(usize::MAX, &[], &[]), (None, true));
        assert_eq!(scan_single(usize::MAX, &[0, 0], &[]), (None, false));
        // A first message above the limit is that, not a second message.
        let (found, _) = scan_single(5, &[frame(6), frame(1)].concat(), &[]);
        assert_eq!(found, Some((0, Stop::TooLarge(TooLarge { at: 0, len: 6, limit: 5 }))));
    }

    #[test]
    fn disabled_scanner_reads_nothing() {
        let mut scanner = Scanner::new(usize::MAX);
        assert_eq!(scanner.scan(&frame(1000)), None);
        let mut scanner = Scanner::new(u32::MAX as usize);
        assert_eq!(scanner.scan(&[0, 0xff, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn limit_boundary() {
        assert_eq!(scan_cut(100, &frame(100), &[]), None);
        assert_eq!(scan_cut(0, &frame(0), &[]), None);
        assert_eq!(scan_cut(0, &frame(1), &[]), Some((0, TooLarge { at: 0, len: 1, limit: 0 })));
    }

    #[test]
    fn typed_limits_in_the_encoded_order() {
        let limits = TypedLimits {
            client_encoding: 10,
            channel_request: 20,
            server_decoding: 30,
            server_encoding: 10,
            channel_response: 20,
            client_decoding: 30,
        };
        assert!(limits.request(10).is_ok() && limits.response(10).is_ok());
        let e = limits.request(11).unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted);
        assert_eq!(e.message(), format!("{TONIC_ENCODE_PREFIX}11 bytes, the limit is: 10 bytes"));
        let limits = TypedLimits { client_encoding: usize::MAX, server_encoding: usize::MAX, ..limits };
        assert!(limits.request(21).unwrap_err().message().contains("max_request_message_size"));
        assert!(limits.response(21).unwrap_err().message().contains("max_response_message_size"));
        let limits = TypedLimits { channel_request: usize::MAX, channel_response: usize::MAX, ..limits };
        let e = limits.request(31).unwrap_err();
        assert_eq!((e.code(), e.message().starts_with(TONIC_DECODE_PREFIX)), (Code::ResourceExhausted, true));
        let e = limits.response(31).unwrap_err();
        assert_eq!((e.code(), e.message().starts_with(TONIC_DECODE_PREFIX)), (Code::OutOfRange, true));
    }

    #[test]
    fn respec_maps_tonic_limits_only() {
        let tonic = Status::out_of_range(format!("{TONIC_DECODE_PREFIX}9 bytes, the limit is: 4 bytes"));
        assert_eq!(respec(tonic).code(), Code::ResourceExhausted);
        let tonic = Status::out_of_range(format!("{TONIC_ENCODE_PREFIX}9 bytes, the limit is: 4 bytes"));
        let mapped = respec(tonic);
        assert_eq!(mapped.code(), Code::ResourceExhausted);
        assert!(mapped.message().starts_with(TONIC_ENCODE_PREFIX));
        let own = Status::out_of_range("index 9 is out of range");
        assert_eq!(respec(own).code(), Code::OutOfRange);
        let other = Status::internal(format!("{TONIC_DECODE_PREFIX}9 bytes"));
        assert_eq!(respec(other).code(), Code::Internal);

        let mut headers = HeaderMap::new();
        Status::out_of_range(format!("{TONIC_DECODE_PREFIX}9 bytes, the limit is: 4 bytes"))
            .add_header(&mut headers)
            .unwrap();
        respec_headers(&mut headers);
        let status = Status::from_header_map(&headers).unwrap();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(status.message(), format!("{TONIC_DECODE_PREFIX}9 bytes, the limit is: 4 bytes"));
        let mut headers = HeaderMap::new();
        Status::out_of_range("mine").add_header(&mut headers).unwrap();
        respec_headers(&mut headers);
        assert_eq!(Status::from_header_map(&headers).unwrap().code(), Code::OutOfRange);
    }
}
