//! spindle-grpc's network server: trailers-only responses on the wire, Unix sockets, graceful
//! shutdown (drain, then cut at the deadline), the idle timeout, the stream limit, counters.

mod net;

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use net::{grpc_frame, grpc_request, raw_client, start, wait_until};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;
use tonic::Code;

/// An error decided before any message goes out as a trailers-only response: one HEADERS
/// frame with END_STREAM (grpc-go rejects HEADERS followed by an empty DATA frame). The
/// service is wrapped (EchoMetadata), whose body does not say it is empty.
#[test]
fn error_status_is_trailers_only_on_the_wire() {
    let net = start(|s| s);
    let addr = net.addr;
    let (headers, end_stream) = net.run(async move {
        let mut send = raw_client(addr).await;
        let request = SimpleRequest {
            response_status: Some(EchoStatus { code: 2, message: "boom".into() }),
            ..Default::default()
        };
        let request = grpc_request(addr, "/spindle.interop.TestService/UnaryCall", grpc_frame(&request));
        let response = send.send_request(request).await.unwrap();
        let end = http_body::Body::is_end_stream(response.body());
        (response.headers().clone(), end)
    });
    assert_eq!(headers.get("grpc-status").map(|v| v.to_str().unwrap()), Some("2"));
    assert!(end_stream, "the HEADERS frame did not end the stream: {headers:?}");
    net.settle(0);
}

#[test]
fn serves_a_unix_socket() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grpc.sock");
    let server = spindle_grpc_interop::Server::new(net::spindle_sleep);
    let channel = spindle_grpc::Channel::new()
        .with_handle(rt.handle())
        .add_service(test_service_server::TestServiceServer::new(server));
    let listen = path.clone();
    let serving = rt.block_on(move || {
        let listener = spindle::net::UnixListener::bind(&listen).unwrap();
        spindle_grpc::Server::new(channel).serve_unix(listener).unwrap()
    });
    assert_eq!(serving.unix_path(), Some(path.as_path()));
    let endpoint =
        spindle_grpc::Endpoint::new(format!("unix:{}", path.display())).unwrap().handle(rt.handle());
    let size = rt.block_on(move || {
        spindle::task::block_on(async move {
            let channel = endpoint.connect().await.unwrap();
            let request = SimpleRequest { response_size: 77, ..Default::default() };
            let response = TestServiceClient::new(channel).unary_call(request).await.unwrap();
            response.into_inner().payload.unwrap().body.len()
        })
    });
    assert_eq!(size, 77);
    let report = serving.shutdown(Duration::from_secs(5));
    assert_eq!(report.dropped_connections, 0);
}

/// After shutdown begins, a call in flight finishes, the server accepts nothing new, and
/// every connection ends.
#[test]
fn shutdown_drains_calls_in_flight() {
    let mut net = start(|s| s);
    let client = net.client();
    let endpoint = net.endpoint().connect_timeout(Duration::from_secs(1));
    let call = net.rt.spawn_async(async move {
        let request = SimpleRequest { response_size: 5, sleep_ms: 200, ..Default::default() };
        TestServiceClient::new(client).unary_call(request).await.map(|r| r.into_inner())
    });
    assert!(wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 1));
    let serving = net.serving.take().unwrap();
    let report = serving.shutdown(Duration::from_secs(10));
    assert_eq!(report.dropped_connections, 0);
    let response = call.join().unwrap().expect("the call in flight finished");
    assert_eq!(response.payload.unwrap().body.len(), 5);
    assert_eq!(net.counters.dropped_early.load(SeqCst), 0);
    // Nothing listens any more.
    let connect = net.run(async move { endpoint.connect().await.map(drop) });
    assert!(connect.is_err(), "connected to a server that shut down");
}

/// A runtime's shutdown token (e.g. triggered by SIGTERM) begins the graceful shutdown of a
/// server built with `shutdown_on`: the call in flight finishes, then nothing listens.
#[test]
fn a_shutdown_token_drains_the_server() {
    let token = std::sync::Arc::new(std::sync::Mutex::new(None));
    let slot = token.clone();
    let mut net = start(move |s| {
        let t = spindle::shutdown::token();
        *slot.lock().unwrap() = Some(t.clone());
        s.shutdown_on(t, Duration::from_secs(10))
    });
    let token = token.lock().unwrap().take().expect("the server was configured on a worker");
    let client = net.client();
    let endpoint = net.endpoint().connect_timeout(Duration::from_secs(1));
    let call = net.rt.spawn_async(async move {
        let request = SimpleRequest { response_size: 3, sleep_ms: 200, ..Default::default() };
        TestServiceClient::new(client).unary_call(request).await.map(|r| r.into_inner())
    });
    assert!(wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 1));
    token.trigger();
    let response = call.join().unwrap().expect("the call in flight finished");
    assert_eq!(response.payload.unwrap().body.len(), 3);
    assert!(wait_until(Duration::from_secs(10), || net.serving().stats().connections == 0));
    let connect = net.run(async move { endpoint.connect().await.map(drop) });
    assert!(connect.is_err(), "connected to a server whose token was triggered");
    drop(net.serving.take());
}

/// At the drain deadline, the calls still running are dropped with their connection.
#[test]
fn shutdown_deadline_drops_calls() {
    let mut net = start(|s| s);
    let client = net.client();
    let call = net.rt.spawn_async(async move {
        let request = SimpleRequest { sleep_ms: 30_000, ..Default::default() };
        TestServiceClient::new(client).unary_call(request).await.map(|r| r.into_inner())
    });
    assert!(wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 1));
    let serving = net.serving.take().unwrap();
    let report = serving.shutdown(Duration::from_millis(100));
    assert_eq!(report.dropped_connections, 1);
    let err = call.join().unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 0));
    assert_eq!(net.counters.dropped_early.load(SeqCst), 1);
}

/// A connection without calls for the idle timeout is closed; the client reconnects at its
/// next call.
#[test]
fn idle_connections_close_and_clients_reconnect() {
    let net = start(|s| s.idle_timeout(Duration::from_millis(50)));
    let client = net.client();
    let call = |client: spindle_grpc::RemoteChannel| {
        net.run(async move { TestServiceClient::new(client).empty_call(Empty {}).await.map(drop) })
    };
    call(client.clone()).unwrap();
    assert_eq!(net.serving().stats().connections_total, 1);
    assert!(wait_until(Duration::from_secs(10), || net.serving().stats().connections == 0), "still open");
    assert!(wait_until(Duration::from_secs(10), || !client.is_connected()));
    call(client.clone()).unwrap();
    assert_eq!(net.serving().stats().connections_total, 2);
    assert_eq!(net.serving().stats().calls_total, 2);
}

/// The server's stream limit reaches the client's `poll_ready`: at the limit it is pending,
/// and a call's end makes it ready again.
#[test]
fn stream_limit_is_client_backpressure() {
    use tower_service::Service as _;
    let net = start(|s| s.max_concurrent_streams(2));
    let client = net.client();
    let mut calls = Vec::new();
    for _ in 0..2 {
        let client = client.clone();
        calls.push(net.rt.spawn_async(async move {
            let request = SimpleRequest { sleep_ms: 300, ..Default::default() };
            TestServiceClient::new(client).unary_call(request).await.map(drop)
        }));
    }
    assert!(wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 2));
    let mut third = client.clone();
    let ready_now = net.run(async move {
        let now = {
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            third.poll_ready(&mut cx).is_ready()
        };
        // It becomes ready once a call ends.
        std::future::poll_fn(|cx| third.poll_ready(cx)).await.unwrap();
        now
    });
    assert!(!ready_now, "poll_ready was ready at the server's stream limit");
    for call in calls {
        call.join().unwrap().unwrap();
    }
    net.settle(1);
    assert_eq!(client.in_flight(), 0);
}

/// Many concurrent calls over a limit of 4 streams: all succeed, never more than 4 handlers
/// at once.
#[test]
fn more_calls_than_streams_all_succeed() {
    let net = start(|s| s.max_concurrent_streams(4));
    let client = net.client();
    let counters = net.counters.clone();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let watch = peak.clone();
    let watcher = std::thread::spawn(move || {
        for _ in 0..5_000 {
            watch.fetch_max(counters.live_handlers.load(SeqCst), SeqCst);
            if counters.started.load(SeqCst) >= 40 && counters.live_handlers.load(SeqCst) == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let handles: Vec<_> = (0..40)
        .map(|_| {
            let client = client.clone();
            net.rt.spawn_async(async move {
                let request = SimpleRequest { response_size: 10, sleep_ms: 5, ..Default::default() };
                TestServiceClient::new(client).unary_call(request).await.map(drop)
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    watcher.join().unwrap();
    assert!(peak.load(SeqCst) <= 4, "{} handlers at once", peak.load(SeqCst));
    assert_eq!(net.serving().stats().calls_total, 40);
    net.settle(1);
}

/// With keepalive pings on both sides, an idle connection stays up and usable.
#[test]
fn keepalive_pings_keep_a_connection() {
    let net = start(|s| s.keepalive(Duration::from_millis(20), Duration::from_secs(5)));
    let endpoint = net.endpoint().keepalive(Duration::from_millis(20), Duration::from_secs(5));
    let client = net.run(async move { endpoint.connect().await.unwrap() });
    std::thread::sleep(Duration::from_millis(200));
    let c = client.clone();
    net.run(async move { TestServiceClient::new(c).empty_call(Empty {}).await.map(drop) }).unwrap();
    assert_eq!(net.serving().stats().connections_total, 1, "the connection was replaced");
    net.settle(1);
}

/// HTTP/2 flow control: a client that stops reading a long response stream stops the handler
/// within the windows and the server's send buffer (a few hundred KiB here), not at the end of
/// the stream's 10 MiB.
#[test]
fn a_client_that_stops_reading_bounds_the_server() {
    let net = start(|s| s.max_send_buf_size(64 << 10));
    let endpoint = net.endpoint().flow_control_windows(64 << 10, 128 << 10);
    let counters = net.counters.clone();
    let (read, produced) = net.run(async move {
        let client = endpoint.connect().await.unwrap();
        let request = StreamingOutputCallRequest {
            response_parameters: (0..10_000)
                .map(|_| ResponseParameters { size: 1024, ..Default::default() })
                .collect(),
            ..Default::default()
        };
        let mut stream =
            TestServiceClient::new(client).streaming_output_call(request).await.unwrap().into_inner();
        for _ in 0..3 {
            stream.message().await.unwrap().unwrap();
        }
        // The handler could run far ahead now, if nothing bounded it.
        spindle::time::sleep_future(Duration::from_millis(100)).await;
        (3u64, counters.produced.load(SeqCst))
    });
    // 64 KiB stream window + 64 KiB send buffer + tonic's 32 KiB batch, in 1 KiB messages,
    // with room for framing: well under 10,000.
    eprintln!("flow control: {produced} produced, {read} read");
    assert!(produced <= read + 400, "{produced} messages produced while {read} were read");
    net.settle(0);
}
