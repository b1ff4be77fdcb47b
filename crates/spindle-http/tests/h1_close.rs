//! HTTP/1.1 connection close: a request that closes the connection (`Connection: close`,
//! HTTP/1.0, `Content-Length` with `Transfer-Encoding`) gets its response even when more
//! bytes follow it in the same read (such responses were once lost).

mod common;

use common::raw_exchange;
use spindle_http::{Body, Request, Response, Server};

fn hello(_req: Request<Body>) -> Response<&'static str> {
    Response::new("Hello, World!")
}

/// The status lines in `out` (responses follow each other without a separator).
fn statuses(out: &str) -> Vec<&str> {
    out.match_indices("HTTP/1.").map(|(i, _)| out[i..].split("\r\n").next().unwrap()).collect()
}

fn exchange(raw: &str) -> String {
    let server = Server::builder().serve("127.0.0.1:0", hello).unwrap();
    let out = raw_exchange(server.local_addr(), raw.as_bytes());
    server.shutdown();
    out
}

#[test]
fn connection_close_with_trailing_bytes_is_answered() {
    let out = exchange("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n\r\n");
    assert_eq!(statuses(&out), ["HTTP/1.1 200 OK"], "{out:?}");
    assert!(out.ends_with("Hello, World!"), "{out:?}");
}

#[test]
fn http10_request_with_trailing_bytes_is_answered() {
    let out = exchange("GET / HTTP/1.0\r\n\r\n\r\n");
    assert_eq!(statuses(&out), ["HTTP/1.0 200 OK"], "{out:?}");
    assert!(out.ends_with("Hello, World!"), "{out:?}");
}

#[test]
fn content_length_with_transfer_encoding_is_answered_then_closed() {
    // RFC 9112 §6.3: chunked wins, and the connection closes after the response.
    let out = exchange(
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n\
         0\r\n\r\n\r\n",
    );
    assert_eq!(statuses(&out), ["HTTP/1.1 200 OK"], "{out:?}");
}

#[test]
fn request_after_connection_close_in_the_same_write_is_not_served() {
    let out =
        exchange("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(statuses(&out), ["HTTP/1.1 200 OK"], "{out:?}");
}

#[test]
fn pipelined_requests_ending_with_close_all_get_answers() {
    let mut raw = String::new();
    for _ in 0..20 {
        raw.push_str("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    raw.push_str("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n\r\n");
    let out = exchange(&raw);
    assert_eq!(statuses(&out).len(), 21, "{out:?}");
}
