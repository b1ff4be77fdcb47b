//! Limits a server on the internet needs: the request body's size (413)
//! and minimum rate (408), the strict `Host` rule (400, RFC 9112 §3.2), and one header-size
//! limit whatever the client's write pattern (431).

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{connect, raw_exchange, read_response, status_line};
use spindle_http::{Body, LimitError, MinRate, Request, Response, Server};

fn local() -> &'static str {
    "127.0.0.1:0"
}

/// A handler that reads the whole body (blocking) and answers its length, or the error.
fn body_len(req: Request<Body>) -> Response<String> {
    match req.into_body().bytes() {
        Ok(b) => Response::new(b.len().to_string()),
        Err(e) => Response::new(format!("error: {e}")),
    }
}

#[test]
fn declared_body_over_the_limit_gets_413_without_calling_the_handler() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let server = Server::builder()
        .serve(local(), move |req: Request<Body>| {
            seen.fetch_add(1, Ordering::SeqCst);
            body_len(req)
        })
        .unwrap();
    // Default limit 2 MiB: a declared 3 MiB body is refused from its header.
    let out = raw_exchange(
        server.local_addr(),
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3145728\r\n\r\nonly a little",
    );
    assert!(status_line(&out).starts_with("HTTP/1.1 413"), "{out:?}");
    assert!(out.to_ascii_lowercase().contains("connection: close"), "{out:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    server.shutdown();
}

/// A client that sends its whole oversized body before it reads: the body sits unread in
/// the server's socket when the server closes after its 413, and a plain close resets the
/// connection, so that the client's read ends in "connection reset" (RFC 9112 §9.6). The
/// server half-closes and reads the rest instead: the client reads the 413, then the end.
#[test]
fn a_client_still_sending_its_body_reads_the_413_and_a_clean_end() {
    let server = Server::builder().max_body_size(1024).serve(local(), body_len).unwrap();
    let mut s = common::connect(server.local_addr());
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n").unwrap();
    s.write_all(&[b'a'; 65536]).unwrap();
    let mut out = Vec::new();
    let read = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(read.is_ok(), "{read:?} after {text:?}");
    assert!(status_line(&text).starts_with("HTTP/1.1 413"), "{text:?}");
    drop(s);
    server.shutdown();
}

#[test]
fn chunked_body_over_the_limit_gets_413_whatever_the_handler_answers() {
    let server = Server::builder().max_body_size(1024).serve(local(), body_len).unwrap();
    let chunk = "a".repeat(600);
    let raw = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
         258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n"
    );
    let out = raw_exchange(server.local_addr(), raw.as_bytes());
    assert!(status_line(&out).starts_with("HTTP/1.1 413"), "{out:?}");
    // Within the limit: served.
    let raw = format!(
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n{chunk}\r\n0\r\n\r\n"
    );
    let mut s = connect(server.local_addr());
    s.write_all(raw.as_bytes()).unwrap();
    let resp = read_response(&mut s, &mut Vec::new()).unwrap();
    assert_eq!((resp.status, resp.text().as_str()), (200, "600"));
    server.shutdown();
}

#[test]
fn async_handler_sees_the_limit_error() {
    use http_body_util::BodyExt;
    let server = Server::builder()
        .max_body_size(100)
        .serve_async(local(), |req: Request<Body>| async move {
            let err = req.into_body().collect().await.expect_err("over the limit");
            let limit = err.downcast_ref::<LimitError>().copied();
            assert_eq!(limit, Some(LimitError::BodyTooLarge { limit: 100 }));
            Response::new("handler saw the limit")
        })
        .unwrap();
    let body = "b".repeat(200);
    let raw =
        format!("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nc8\r\n{body}\r\n0\r\n\r\n");
    let out = raw_exchange(server.local_addr(), raw.as_bytes());
    assert!(status_line(&out).starts_with("HTTP/1.1 413"), "{out:?}");
    server.shutdown();
}

#[test]
fn body_within_the_default_limit_is_served() {
    let server = Server::builder().serve(local(), body_len).unwrap();
    let mut s = connect(server.local_addr());
    let body = vec![b'z'; 1 << 20];
    write!(s, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", body.len()).unwrap();
    s.write_all(&body).unwrap();
    let resp = read_response(&mut s, &mut Vec::new()).unwrap();
    assert_eq!((resp.status, resp.text()), (200, (1 << 20).to_string()));
    server.shutdown();
}

#[test]
fn clients_trickling_a_body_are_disconnected() {
    // 100 B/s after 300 ms; each client sends one byte every 200 ms (5 B/s).
    let server = Server::builder()
        .min_body_rate(MinRate::new(100, Duration::from_millis(300)))
        .serve(local(), body_len)
        .unwrap();
    let addr = server.local_addr();
    let clients: Vec<_> = (0..20)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = connect(addr);
                s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
                s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n").unwrap();
                let mut out = Vec::new();
                // Bounded: 75 of the 100 body bytes, one per 200 ms read timeout; the client
                // gives up after the last one unless the server has closed the connection.
                let mut closed_by_server = false;
                for _ in 0..75 {
                    if s.write_all(b"x").is_err() {
                        closed_by_server = true;
                        break;
                    }
                    let mut chunk = [0u8; 1024];
                    match s.read(&mut chunk) {
                        Ok(0) => {
                            closed_by_server = true;
                            break;
                        }
                        Ok(n) => out.extend_from_slice(&chunk[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => {
                            closed_by_server = true;
                            break;
                        }
                    }
                }
                (String::from_utf8_lossy(&out).into_owned(), closed_by_server)
            })
        })
        .collect();
    for c in clients {
        let (out, closed_by_server) = c.join().unwrap();
        assert!(status_line(&out).starts_with("HTTP/1.1 408"), "{out:?}");
        assert!(closed_by_server, "the server answered 408 but kept the connection until the client gave up");
    }
    // A client sending at full speed is unaffected.
    let mut s = connect(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello").unwrap();
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().text(), "5");
    server.shutdown();
}

#[test]
fn host_is_required_once_in_http11() {
    let server = Server::builder().serve(local(), |_req: Request<Body>| Response::new("ok")).unwrap();
    let addr = server.local_addr();
    for bad in [
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a:b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
        "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
    ] {
        let out = raw_exchange(addr, bad.as_bytes());
        assert!(status_line(&out).contains(" 400 "), "{bad:?} -> {out:?}");
    }
    for good in [
        "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1]:80\r\nConnection: close\r\n\r\n",
        "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\n",
    ] {
        let out = raw_exchange(addr, good.as_bytes());
        assert!(status_line(&out).contains(" 200 "), "{good:?} -> {out:?}");
    }
    server.shutdown();
}

/// Sends `head` in pieces of `piece` bytes, pausing between them so that the server reads
/// them one at a time; returns the status line of the answer.
fn send_head_in_pieces(addr: std::net::SocketAddr, head: &[u8], piece: usize) -> String {
    let mut s = connect(addr);
    for part in head.chunks(piece) {
        if s.write_all(part).is_err() {
            break; // the server answered and closed early
        }
        if piece < head.len() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    status_line(&String::from_utf8_lossy(&out)).to_owned()
}

fn head_of(size: usize) -> Vec<u8> {
    let mut head = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".to_vec();
    let mut i = 0;
    while head.len() + 104 < size {
        head.extend_from_slice(format!("X-Fill-{i:04}: {}\r\n", "v".repeat(88)).as_bytes());
        i += 1;
    }
    head.extend_from_slice(b"\r\n");
    head
}

#[test]
fn one_header_size_limit_whatever_the_write_pattern() {
    // Default limit 64 KiB; 200 fields allowed so that only the size counts.
    let server = Server::builder()
        .max_headers(1000)
        .serve(local(), |_req: Request<Body>| Response::new("ok"))
        .unwrap();
    let addr = server.local_addr();
    let big = head_of(100 * 1000);
    assert!(send_head_in_pieces(addr, &big, big.len()).contains(" 431 "), "100 KB in one write");
    let over = head_of(66 * 1000);
    assert!(send_head_in_pieces(addr, &over, 1000).contains(" 431 "), "66 KB in 1 KB pieces");
    assert!(send_head_in_pieces(addr, &over, over.len()).contains(" 431 "), "66 KB in one write");
    let under = head_of(60 * 1000);
    assert!(send_head_in_pieces(addr, &under, 1000).contains(" 200 "), "60 KB in 1 KB pieces");
    assert!(send_head_in_pieces(addr, &under, under.len()).contains(" 200 "), "60 KB in one write");
    server.shutdown();
}
