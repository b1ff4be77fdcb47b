//! `Duration::MAX` as a timeout means "no limit": every timeout of the server and the client
//! takes it without an overflow panic (`Instant::now() + Duration::MAX` does not fit in an
//! `Instant`), and requests are served as with any other long timeout.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{connect, get, read_response};
use spindle_http::{Body, Client, MinRate, Request, Response, Server};

/// A handler that reads the whole body (blocking) and answers its length, or the error.
fn body_len(req: Request<Body>) -> Response<String> {
    match req.into_body().bytes() {
        Ok(b) => Response::new(b.len().to_string()),
        Err(e) => Response::new(format!("error: {e}")),
    }
}

/// A POST whose body the client sends only after the server's `100 Continue`, which hyper
/// writes when the handler first asks for the body: that first read is certain to wait, so
/// the body-rate deadline is armed. The body comes in two chunks, so it is usually armed again
/// after some bytes arrived.
fn post_after_continue(addr: SocketAddr) -> (u16, String) {
    let mut s = connect(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let interim = read_response(&mut s, &mut buf).expect("100 Continue");
    assert_eq!(interim.status, 100);
    s.write_all(b"5\r\nhello\r\n").unwrap();
    s.flush().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    s.write_all(b"6\r\n world\r\n0\r\n\r\n").unwrap();
    let resp = read_response(&mut s, &mut buf).expect("a response");
    (resp.status, resp.text())
}

#[test]
fn a_server_with_every_timeout_at_duration_max_serves_and_shuts_down() {
    let server = Server::builder()
        .header_read_timeout(Duration::MAX)
        .idle_timeout(Duration::MAX)
        .shutdown_timeout(Duration::MAX)
        .min_body_rate(MinRate::new(1, Duration::MAX))
        .serve("127.0.0.1:0", body_len)
        .unwrap();
    let addr = server.local_addr();
    let resp = get(addr, "/");
    assert_eq!((resp.status, resp.text().as_str()), (200, "0"));
    assert_eq!(post_after_continue(addr), (200, "11".to_owned()));
    // HTTP/2 by prior knowledge too (the sniff's deadline is the header and idle timeouts').
    let rt = spindle::Runtime::new().unwrap();
    let client = Client::builder().http2_prior_knowledge(true).build();
    let text =
        rt.block_on(move || client.get(&format!("http://{addr}/")).unwrap().into_body().text().unwrap());
    assert_eq!(text, "0");
    drop(rt);
    assert_eq!(server.shutdown().cancelled_connections, 0);
}

#[test]
fn a_body_rate_grace_of_duration_max_never_times_out_the_body() {
    let server = Server::builder()
        .min_body_rate(MinRate::new(1, Duration::MAX))
        .serve("127.0.0.1:0", body_len)
        .unwrap();
    assert_eq!(post_after_continue(server.local_addr()), (200, "11".to_owned()));
    server.shutdown();
}

#[test]
fn shutdown_timeouts_of_duration_max_wait_for_the_drain() {
    let server = Server::builder().serve("127.0.0.1:0", body_len).unwrap();
    assert_eq!(get(server.local_addr(), "/").status, 200);
    assert_eq!(server.shutdown_timeout(Duration::MAX).cancelled_connections, 0);

    // `wait` after a trigger, with the builder's shutdown timeout; on a thread of its own, so
    // that a hang fails the test instead of stalling it.
    let server = Server::builder().shutdown_timeout(Duration::MAX).serve("127.0.0.1:0", body_len).unwrap();
    assert_eq!(get(server.local_addr(), "/").status, 200);
    server.shutdown_handle().trigger();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(server.wait()).unwrap());
    let report = rx.recv_timeout(Duration::from_secs(30)).expect("Server::wait returned");
    assert_eq!(report.cancelled_connections, 0);
}

/// A TCP proxy to `upstream` on a loopback port that counts the connections it accepts
/// (threads copy the bytes both ways until either side closes).
fn counting_proxy(upstream: SocketAddr) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let server = TcpStream::connect(upstream).unwrap();
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                    let _ = from.shutdown(std::net::Shutdown::Both);
                });
            };
            pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
            pipe(server, client);
        }
    });
    (addr, accepted)
}

#[test]
fn a_client_with_every_timeout_at_duration_max_gets_on_one_pooled_connection() {
    let server = Server::builder().serve("127.0.0.1:0", body_len).unwrap();
    let rt = spindle::Runtime::new().unwrap();
    for h2 in [false, true] {
        let (addr, accepted) = counting_proxy(server.local_addr());
        let client = Client::builder()
            .connect_timeout(Duration::MAX)
            .request_timeout(Duration::MAX)
            .idle_timeout(Duration::MAX)
            .http2_prior_knowledge(h2)
            .build();
        // The pause lets the idle connection's driver run and arm its idle timer before the
        // second request takes the connection back from the pool.
        let texts = rt.block_on(move || {
            let first = client.get(&format!("http://{addr}/")).unwrap().into_body().text().unwrap();
            spindle::time::sleep(Duration::from_millis(20));
            let second = client.get(&format!("http://{addr}/")).unwrap().into_body().text().unwrap();
            [first, second]
        });
        assert_eq!(texts, ["0", "0"], "h2: {h2}");
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "h2: {h2}: the pooled connection was not reused");
    }
    drop(rt);
    server.shutdown();
}
