//! spindle-grpc's network client: UNAVAILABLE while the server is down (never a hang),
//! reconnection with backoff, deadlines enforced locally (in a fiber and on a plain thread),
//! calls multiplexed on one connection.

mod net;

use std::time::Duration;

use net::start;
use spindle_grpc::Endpoint;
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;
use tonic::Code;

/// A loopback port with nothing listening on it (bound, then released).
fn closed_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

#[test]
fn connect_fails_when_nothing_listens() {
    let rt = spindle::Runtime::new().unwrap();
    let addr = closed_port();
    let result = rt.block_on(move || {
        let endpoint = Endpoint::new(format!("http://{addr}")).unwrap();
        spindle::task::block_on(endpoint.connect()).map(drop)
    });
    let err = result.unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
}

/// A lazy channel to a server that is not there: calls fail at once with UNAVAILABLE; once
/// the server is up, the channel connects (after its backoff) and calls succeed.
#[test]
fn unavailable_while_down_then_reconnects() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let addr = closed_port();
    let endpoint = Endpoint::new(format!("http://{addr}"))
        .unwrap()
        .handle(rt.handle())
        .backoff(Duration::from_millis(10), Duration::from_millis(40));
    let channel = endpoint.connect_lazy().unwrap();
    let call = |channel: spindle_grpc::RemoteChannel| {
        rt.block_on(move || {
            spindle::task::block_on(async move {
                TestServiceClient::new(channel).empty_call(Empty {}).await.map(drop)
            })
        })
    };
    // Answered from the channel's state, not by waiting for a connection: a call that waited
    // would never return (nothing listens yet), so the calls run in a fiber whose join is a
    // hang guard (60 s), not a speed claim.
    let down = channel.clone();
    let answers = rt
        .spawn(move || {
            (0..3)
                .map(|_| {
                    spindle::task::block_on(TestServiceClient::new(down.clone()).empty_call(Empty {}))
                        .map(drop)
                })
                .collect::<Vec<_>>()
        })
        .join_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("hung: calls on a channel to a closed port did not return within 60 s"))
        .unwrap();
    for answer in answers {
        let err = answer.unwrap_err();
        assert_eq!(err.code(), Code::Unavailable, "{err:?}");
        assert!(err.message().contains("not connected"), "{err:?}");
    }
    // Now a server on that port.
    let server = spindle_grpc_interop::Server::new(net::spindle_sleep);
    let service = test_service_server::TestServiceServer::new(server);
    let serving = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind(addr).unwrap();
        spindle_grpc::Server::new(spindle_grpc::Channel::new().add_service(service))
            .serve_tcp(listener)
            .unwrap()
    });
    let mut ok = false;
    for _ in 0..1_000 {
        if call(channel.clone()).is_ok() {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(ok, "the channel never reconnected");
    assert!(channel.is_connected());
    // The server goes away: calls fail (UNAVAILABLE), they do not hang.
    serving.shutdown(Duration::from_secs(1));
    assert!(net::wait_until(Duration::from_secs(10), || !channel.is_connected()));
    let err = call(channel.clone()).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(channel.in_flight(), 0);
}

/// A peer that speaks just enough HTTP/2 (its SETTINGS) and never answers a call.
fn mute_server(connections: usize) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for _ in 0..connections {
            let (mut stream, _) = listener.accept().unwrap();
            // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
            std::io::Write::write_all(&mut stream, &[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap();
            held.push(stream);
        }
        std::thread::sleep(Duration::from_secs(10));
    });
    addr
}

/// A server that never answers: the call's deadline ends it here, as DEADLINE_EXCEEDED, from
/// a fiber and from a plain thread.
#[test]
fn deadline_is_enforced_by_the_client() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let addr = mute_server(2);
    let endpoint = Endpoint::new(format!("http://{addr}")).unwrap().handle(rt.handle());
    let channel = rt.block_on(move || spindle::task::block_on(endpoint.connect())).unwrap();
    let call = |channel: spindle_grpc::RemoteChannel| async move {
        let mut request = tonic::Request::new(Empty {});
        request.set_timeout(Duration::from_millis(30));
        TestServiceClient::new(channel).empty_call(request).await
    };
    let c = channel.clone();
    let in_fiber = rt.block_on(move || spindle::task::block_on(call(c)));
    assert_eq!(in_fiber.unwrap_err().code(), Code::DeadlineExceeded);
    let on_thread = spindle::task::block_on(call(channel.clone()));
    assert_eq!(on_thread.unwrap_err().code(), Code::DeadlineExceeded);
    // The endpoint's default timeout applies to calls that set none.
    let endpoint = Endpoint::new(format!("http://{addr}"))
        .unwrap()
        .handle(rt.handle())
        .timeout(Duration::from_millis(30));
    let channel2 = rt.block_on(move || spindle::task::block_on(endpoint.connect())).unwrap();
    let err =
        spindle::task::block_on(TestServiceClient::new(channel2.clone()).empty_call(Empty {})).unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert!(net::wait_until(Duration::from_secs(5), || channel.in_flight() == 0 && channel2.in_flight() == 0));
}

/// A peer that accepts and sends nothing is no HTTP/2 server: connecting fails after the
/// connect timeout (it does not hang).
#[test]
fn a_silent_peer_fails_the_connect() {
    let rt = spindle::Runtime::new().unwrap();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let endpoint = Endpoint::new(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_millis(50))
        .handle(rt.handle());
    let result = rt.block_on(move || spindle::task::block_on(endpoint.connect()).map(drop));
    let err = result.unwrap_err();
    assert!(err.to_string().contains("SETTINGS"), "{err}");
    drop(silent);
}

/// Calls from many tasks share one connection.
#[test]
fn calls_are_multiplexed_on_one_connection() {
    let net = start(|s| s);
    let client = net.client();
    let handles: Vec<_> = (0..20)
        .map(|i| {
            let client = client.clone();
            net.rt.spawn_async(async move {
                let request = SimpleRequest { response_size: i, sleep_ms: 10, ..Default::default() };
                let response = TestServiceClient::new(client).unary_call(request).await.unwrap();
                assert_eq!(response.into_inner().payload.unwrap().body.len(), i as usize);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = net.serving().stats();
    assert_eq!((stats.connections_total, stats.calls_total), (1, 20));
    net.settle(1);
}

#[test]
fn bad_uris_are_refused() {
    for uri in ["ftp://127.0.0.1:1", "127.0.0.1:80", "unix:relative/path", "http://"] {
        let err = Endpoint::new(uri).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{uri}: {err}");
    }
    // https:// needs the `tls` feature: refused without it. With it, an endpoint given no TLS
    // settings trusts the system's roots (`net_tls.rs`, `net_tls_system_roots.rs`): a lazy
    // channel is made.
    let rt = spindle::Runtime::new().unwrap();
    let https =
        Endpoint::new("https://127.0.0.1:1").and_then(|e| e.handle(rt.handle()).connect_lazy().map(drop));
    if cfg!(feature = "tls") {
        https.unwrap();
    } else {
        let err = https.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "https: {err}");
    }
    // Outside a runtime, without a handle: a clear error, not a panic.
    let err = Endpoint::new("http://127.0.0.1:1").unwrap().connect_lazy().unwrap_err();
    assert!(err.to_string().contains("Endpoint::handle"), "{err}");
}

/// One client type either place: the URI picks the in-process channel or the network.
#[test]
fn any_channel_picks_the_place_by_uri() {
    let net = start(|s| s);
    let local = net.channel.clone();
    let remote_uri = format!("http://{}", net.addr);
    let sizes = net.run(async move {
        let mut sizes = Vec::new();
        for uri in ["inproc:", remote_uri.as_str()] {
            let channel = spindle_grpc::AnyChannel::from_uri(uri, &local).unwrap();
            let request = SimpleRequest { response_size: 9, ..Default::default() };
            let response = TestServiceClient::new(channel).unary_call(request).await.unwrap();
            sizes.push(response.into_inner().payload.unwrap().body.len());
        }
        sizes
    });
    assert_eq!(sizes, [9, 9]);
    // One call went through the server, both through the channel's services.
    assert_eq!(net.serving().stats().calls_total, 1);
    assert_eq!(net.counters.started.load(std::sync::atomic::Ordering::SeqCst), 2);
    let err = spindle_grpc::AnyChannel::from_uri("ftp://x", &net.channel).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    net.settle(0);
}
