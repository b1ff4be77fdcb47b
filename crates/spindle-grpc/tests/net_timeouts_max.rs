//! `Duration::MAX` as a timeout, keepalive interval or grace means "no limit": the server and
//! the client take it without an overflow panic (`Instant::now() + Duration::MAX` does not fit
//! in an `Instant`), and so does the largest `grpc-timeout` a client may send.

mod net;

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use net::{grpc_frame, grpc_request, raw_client, start, wait_until};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;

/// Runs `f` on the runtime; panics if it takes 30 s (a hang guard: with every timeout at
/// `Duration::MAX`, a broken connection could otherwise stall the test for good).
fn guarded<F>(net: &net::Net, what: &str, f: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let result = net.run(spindle::time::timeout(Duration::from_secs(30), f));
    result.unwrap_or_else(|_| panic!("{what} did not finish within 30 s"))
}

fn connect(net: &net::Net, endpoint: spindle_grpc::Endpoint) -> spindle_grpc::RemoteChannel {
    guarded(net, "connect", async move { endpoint.connect().await }).expect("connected")
}

/// A unary call that asks for 3 bytes; returns how many came back.
fn unary(net: &net::Net, client: spindle_grpc::RemoteChannel) -> usize {
    let response = guarded(net, "the call", async move {
        let request = SimpleRequest { response_size: 3, ..Default::default() };
        TestServiceClient::new(client).unary_call(request).await
    });
    response.expect("the call succeeds").into_inner().payload.unwrap().body.len()
}

#[test]
fn every_timeout_at_duration_max_on_both_sides_completes_calls() {
    let mut net = start(|s| s.keepalive(Duration::MAX, Duration::MAX).idle_timeout(Duration::MAX));
    let endpoint = net
        .endpoint()
        .connect_timeout(Duration::MAX)
        .timeout(Duration::MAX)
        .backoff(Duration::MAX, Duration::MAX)
        .keepalive(Duration::MAX, Duration::MAX);
    let client = connect(&net, endpoint);
    // The endpoint's timeout goes out as `grpc-timeout: 99999999H`, the largest the spec
    // allows, and is enforced locally too.
    assert_eq!(unary(&net, client.clone()), 3);
    assert_eq!(unary(&net, client.clone()), 3);
    assert_eq!(net.serving().stats().connections_total, 1, "the connection was replaced");
    drop(client);
    // A shutdown whose grace never ends waits for the connections to drain; on a thread of
    // its own, so that a hang fails the test instead of stalling it.
    let serving = net.serving.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(serving.shutdown(Duration::MAX)).unwrap());
    let report = rx.recv_timeout(Duration::from_secs(30)).expect("Serving::shutdown returned");
    assert_eq!(report.dropped_connections, 0);
}

/// Pings every 20 ms whose answer may take forever: the pinged connection stays up.
#[test]
fn keepalive_timeouts_of_duration_max_keep_a_pinged_connection() {
    let net = start(|s| s.keepalive(Duration::from_millis(20), Duration::MAX));
    let endpoint = net.endpoint().keepalive(Duration::from_millis(20), Duration::MAX);
    let client = connect(&net, endpoint);
    // Several intervals without a call, so that both sides ping.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(unary(&net, client.clone()), 3);
    assert_eq!(net.serving().stats().connections_total, 1, "the connection was replaced");
    net.settle(1);
    drop(client);
}

/// A shutdown token with a grace of `Duration::MAX`: the server stops accepting and its idle
/// connection ends (GOAWAY), as with any grace.
#[test]
fn a_shutdown_token_with_a_grace_of_duration_max_drains_the_server() {
    let token = std::sync::Arc::new(std::sync::Mutex::new(None));
    let slot = token.clone();
    let mut net = start(move |s| {
        let t = spindle::shutdown::token();
        *slot.lock().unwrap() = Some(t.clone());
        s.shutdown_on(t, Duration::MAX)
    });
    let token = token.lock().unwrap().take().expect("the server was configured on a worker");
    // The client stays alive: its connection ends because the server sends GOAWAY.
    let client = net.client();
    let endpoint = net.endpoint().connect_timeout(Duration::from_secs(1));
    assert_eq!(unary(&net, client.clone()), 3);
    token.trigger();
    assert!(
        wait_until(Duration::from_secs(10), || net.serving().stats().connections == 0),
        "the connection did not drain: {:?}",
        net.serving().stats()
    );
    let connect = net.run(async move { endpoint.connect().await.map(drop) });
    assert!(connect.is_err(), "connected to a server whose token was triggered");
    drop(client);
    drop(net.serving.take());
}

/// A hostile client's `grpc-timeout: 99999999H` (8 digits of hours, the largest the spec
/// allows: about 11,400 years) is just a far deadline: the call is served.
#[test]
fn the_largest_grpc_timeout_is_a_far_deadline() {
    let net = start(|s| s);
    let addr = net.addr;
    let (status, len) = net.run(async move {
        let mut send = raw_client(addr).await;
        let message = SimpleRequest { response_size: 3, ..Default::default() };
        let mut request = grpc_request(addr, "/spindle.interop.TestService/UnaryCall", grpc_frame(&message));
        request.headers_mut().insert("grpc-timeout", http::HeaderValue::from_static("99999999H"));
        let response = send.send_request(request).await.unwrap();
        let body = response.into_body().collect().await.unwrap();
        let status =
            body.trailers().and_then(|t| t.get("grpc-status")).map(|v| v.to_str().unwrap().to_owned());
        let data: Bytes = body.to_bytes();
        (status, data.len())
    });
    assert_eq!(status.as_deref(), Some("0"));
    assert!(len > 5, "no response message: {len} bytes");
    // The same header through the in-process channel (its own deadline code path).
    let channel = net.channel.clone();
    let response = net.run(async move {
        let mut request = tonic::Request::new(SimpleRequest { response_size: 3, ..Default::default() });
        request.metadata_mut().insert("grpc-timeout", "99999999H".parse().unwrap());
        TestServiceClient::new(channel).unary_call(request).await
    });
    assert_eq!(response.expect("the call succeeds").into_inner().payload.unwrap().body.len(), 3);
    net.settle(0);
}
