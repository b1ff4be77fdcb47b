//! spindle-grpc's network server against bad input: garbage instead of the HTTP/2 preface, a
//! silent connection, an oversized header block, a reset storm, a client that vanishes
//! mid-stream, a call its client resets (RST_STREAM CANCEL). Each ends in a clear status or a
//! closed connection, the server keeps serving, and the counters of connections, calls and
//! handlers go back to zero.

mod net;

use std::io::{Read, Write};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use net::{grpc_frame, grpc_request, raw_client, start, wait_until, Net};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;

/// Reads until the server closes the connection (EOF or reset); false if it stays open 10 s.
fn closed_by_server(mut stream: std::net::TcpStream) -> bool {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // the server's SETTINGS / GOAWAY
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// A good client's call still works.
fn still_serves(net: &Net) {
    let client = net.client();
    let response = net
        .run(async move {
            let request = SimpleRequest { response_size: 3, ..Default::default() };
            TestServiceClient::new(client).unary_call(request).await
        })
        .unwrap();
    assert_eq!(response.into_inner().payload.unwrap().body.len(), 3);
}

#[test]
fn garbage_instead_of_the_preface_closes_the_connection() {
    let net = start(|s| s);
    let mut stream = std::net::TcpStream::connect(net.addr).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(closed_by_server(stream), "the server kept a connection that sent HTTP/1.1");
    let mut stream = std::net::TcpStream::connect(net.addr).unwrap();
    stream.write_all(&[0xff; 4096]).unwrap();
    assert!(closed_by_server(stream), "the server kept a connection that sent garbage");
    still_serves(&net);
    net.settle(0);
}

#[test]
fn a_silent_connection_is_closed_by_the_idle_timeout() {
    let net = start(|s| s.idle_timeout(Duration::from_millis(50)));
    let stream = std::net::TcpStream::connect(net.addr).unwrap();
    assert!(closed_by_server(stream), "a connection that never sent the preface stayed open");
    net.settle(0);
}

#[test]
fn an_oversized_header_block_is_refused() {
    let net = start(|s| s.max_header_list_size(8 << 10));
    let client = net.client();
    let err = net
        .run(async move {
            let mut request = tonic::Request::new(Empty {});
            let big = "x".repeat(16 << 10);
            request.metadata_mut().insert("x-big", big.parse().unwrap());
            TestServiceClient::new(client).empty_call(request).await
        })
        .unwrap_err();
    // h2 answers 431; the gRPC spec maps an HTTP status without grpc-status to UNKNOWN.
    assert_eq!(err.code(), tonic::Code::Unknown, "{err:?}");
    assert!(err.message().contains("431"), "{err:?}");
    assert_eq!(net.counters.started.load(SeqCst), 0, "a handler saw the oversized request");
    still_serves(&net);
    net.settle(0);
}

/// Hundreds of calls started and dropped at once (each a RST_STREAM): the server drops their
/// handlers, and goes on serving (a client whose resets trip hyper's limit on pending reset
/// streams gets GOAWAY and reconnects).
#[test]
fn a_reset_storm_leaves_nothing_behind() {
    let net = start(|s| s);
    let client = net.client();
    net.run(async move {
        for round in 0..10 {
            let mut calls = Vec::new();
            for _ in 0..30 {
                let mut c = TestServiceClient::new(client.clone());
                let request = SimpleRequest { sleep_ms: 10_000, ..Default::default() };
                calls.push(Box::pin(async move { c.unary_call(request).await }));
            }
            // Start each (poll once), then drop them all.
            for call in calls.iter_mut() {
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                let _ = std::future::Future::poll(call.as_mut(), &mut cx);
            }
            spindle::time::sleep_future(Duration::from_millis(if round % 2 == 0 { 0 } else { 5 })).await;
            drop(calls);
        }
    });
    still_serves(&net);
    net.settle(0);
    assert!(net.counters.started.load(SeqCst) >= 1);
}

/// A client whose connection disappears in the middle of a response stream: the server
/// drops the handler and the connection.
#[test]
fn a_client_vanishing_mid_stream_drops_its_handler() {
    let net = start(|s| s);
    let addr = net.addr;
    let std_stream = std::net::TcpStream::connect(addr).unwrap();
    let kill = std_stream.try_clone().unwrap();
    net.run(async move {
        let io = spindle::net::TcpStream::from_std(std_stream).unwrap();
        let (mut send, conn) = hyper::client::conn::http2::Builder::new(spindle::hyper_rt::Executor)
            .timer(spindle::hyper_rt::Timer)
            .handshake(io)
            .await
            .unwrap();
        drop(spindle::task::spawn_async(conn));
        let request = StreamingOutputCallRequest {
            response_parameters: (0..100)
                .map(|_| ResponseParameters { size: 100, interval_us: 50_000, ..Default::default() })
                .collect(),
            ..Default::default()
        };
        let request =
            http::Request::post(format!("http://{addr}/spindle.interop.TestService/StreamingOutputCall"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(http_body_util::Full::new(net::grpc_frame(&request)))
                .unwrap();
        let response = send.send_request(request).await.unwrap();
        let mut body = response.into_body();
        // The first message arrives, then the client vanishes.
        let frame =
            std::future::poll_fn(|cx| hyper::body::Body::poll_frame(std::pin::Pin::new(&mut body), cx)).await;
        assert!(frame.unwrap().unwrap().is_data());
        kill.shutdown(std::net::Shutdown::Both).unwrap();
        std::mem::forget(body); // no RST_STREAM: the connection just goes
    });
    assert!(wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 0));
    assert_eq!(net.counters.dropped_early.load(SeqCst), 1);
    still_serves(&net);
    net.settle(0);
}

/// Waits in a fiber (up to 10 s) until `counters` shows a handler started.
async fn handler_started(counters: &spindle_grpc_interop::Counters) {
    for _ in 0..10_000 {
        if counters.started.load(SeqCst) == 1 {
            return;
        }
        spindle::time::sleep_future(Duration::from_millis(1)).await;
    }
    panic!("the handler did not start");
}

/// A unary call whose client resets its stream (RST_STREAM CANCEL: hyper's client, the
/// response dropped before it came) while the handler sleeps: the handler is dropped, not left
/// to sleep on.
#[test]
fn a_unary_call_reset_by_its_client_drops_its_handler() {
    let net = start(|s| s);
    let (addr, counters) = (net.addr, net.counters.clone());
    let send = net.run(async move {
        let mut send = raw_client(addr).await;
        let message = SimpleRequest { response_size: 3, sleep_ms: 600_000, ..Default::default() };
        let response = send.send_request(grpc_request(
            addr,
            "/spindle.interop.TestService/UnaryCall",
            grpc_frame(&message),
        ));
        handler_started(&counters).await;
        drop(response); // RST_STREAM CANCEL
        send
    });
    assert!(
        wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 0),
        "the handler kept running after its client reset the stream"
    );
    assert_eq!(net.counters.dropped_early.load(SeqCst), 1, "the handler finished instead of being dropped");
    // The client's connection was open throughout: only the stream was reset.
    assert_eq!(net.serving().stats().connections, 1);
    drop(send);
    still_serves(&net);
    net.settle(0);
}

/// A server-streaming call whose client reads one message and then resets the stream
/// (RST_STREAM CANCEL: the response body dropped) while the handler has 99 messages to go.
#[test]
fn a_server_stream_reset_by_its_client_drops_its_handler() {
    let net = start(|s| s);
    let addr = net.addr;
    let send = net.run(async move {
        let mut send = raw_client(addr).await;
        let message = StreamingOutputCallRequest {
            response_parameters: (0..100)
                .map(|_| ResponseParameters { size: 10, interval_us: 100_000, ..Default::default() })
                .collect(),
            ..Default::default()
        };
        let request =
            grpc_request(addr, "/spindle.interop.TestService/StreamingOutputCall", grpc_frame(&message));
        let response = send.send_request(request).await.unwrap();
        let mut body = response.into_body();
        let frame =
            std::future::poll_fn(|cx| hyper::body::Body::poll_frame(std::pin::Pin::new(&mut body), cx)).await;
        assert!(frame.unwrap().unwrap().is_data());
        drop(body); // RST_STREAM CANCEL
        send
    });
    assert!(
        wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 0),
        "the handler kept streaming after its client reset the stream"
    );
    assert_eq!(net.counters.dropped_early.load(SeqCst), 1, "the handler finished instead of being dropped");
    // The client's connection was open throughout: only the stream was reset.
    assert_eq!(net.serving().stats().connections, 1);
    drop(send);
    still_serves(&net);
    net.settle(0);
}
