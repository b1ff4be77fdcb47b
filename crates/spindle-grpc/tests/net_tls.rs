//! gRPC over TLS (feature `tls`): spindle-grpc's server and client with certificates made at
//! run time with rcgen. Calls and streams over TLS; an untrusted certificate, a wrong name, a
//! plain client against a TLS server (and the reverse), a handshake that never finishes, and
//! mutual TLS each end in a clear error, with nothing left open and the server still serving.

mod net;

#[path = "../../spindle/tests/support/test_ca.rs"]
mod test_ca;

use std::io::Read;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use net::{start, wait_until, Net};
use spindle_grpc::{ClientTlsConfig, Endpoint, RemoteChannel, ServerTlsConfig};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;
use test_ca::Ca;

/// A TLS server (certificate for "localhost" from `ca`) with the conformance service.
fn tls_server(ca: &Ca, configure: impl FnOnce(ServerTlsConfig) -> ServerTlsConfig) -> Net {
    let (cert, key) = ca.issue(&["localhost"]);
    let config = configure(ServerTlsConfig::from_pem(cert.as_bytes(), key.as_bytes()).unwrap());
    start(move |s| s.tls(config))
}

fn https(net: &Net, tls: ClientTlsConfig) -> Endpoint {
    Endpoint::new(format!("https://127.0.0.1:{}", net.addr.port()))
        .unwrap()
        .handle(net.rt.handle())
        .connect_timeout(Duration::from_secs(5))
        .tls(tls)
}

fn trusting(ca: &Ca) -> ClientTlsConfig {
    ClientTlsConfig::from_ca_pem(ca.pem().as_bytes()).unwrap().domain_name("localhost")
}

fn connect(net: &Net, endpoint: Endpoint) -> std::io::Result<RemoteChannel> {
    net.rt.block_on(move || spindle::task::block_on(endpoint.connect()))
}

/// A unary call with a response of `size` bytes (on a clone: the caller keeps its channel, and
/// with it the connection that `settle` counts).
fn unary(net: &Net, channel: &RemoteChannel, size: i32) -> Result<usize, tonic::Status> {
    let channel = channel.clone();
    net.run(async move {
        let request = SimpleRequest { response_size: size, ..Default::default() };
        let response = TestServiceClient::new(channel).unary_call(request).await?;
        Ok(response.into_inner().payload.unwrap_or_default().body.len())
    })
}

#[test]
fn calls_and_streams_over_tls() {
    let ca = Ca::new("spindle test CA");
    let net = tls_server(&ca, |c| c);
    let channel = connect(&net, https(&net, trusting(&ca))).unwrap();
    // Larger than a TLS record (16 KiB) and than one read of the stack buffer.
    assert_eq!(unary(&net, &channel, 100_000).unwrap(), 100_000);
    let streaming = channel.clone();
    let sizes = net.run(async move {
        let request = StreamingOutputCallRequest {
            response_parameters: [5, 40_000, 7]
                .into_iter()
                .map(|size| ResponseParameters { size, ..Default::default() })
                .collect(),
            ..Default::default()
        };
        let mut stream =
            TestServiceClient::new(streaming).streaming_output_call(request).await.unwrap().into_inner();
        let mut sizes = Vec::new();
        while let Some(message) = stream.message().await.unwrap() {
            sizes.push(message.payload.unwrap_or_default().body.len());
        }
        sizes
    });
    assert_eq!(sizes, [5, 40_000, 7]);
    net.settle(1);
}

/// Without `domain_name`, the name checked is the URI's host.
#[test]
fn the_uri_host_is_the_name_checked() {
    let ca = Ca::new("spindle test CA");
    let net = tls_server(&ca, |c| c);
    let endpoint = Endpoint::new(format!("https://localhost:{}", net.addr.port()))
        .unwrap()
        .handle(net.rt.handle())
        .tls(ClientTlsConfig::from_ca_pem(ca.pem().as_bytes()).unwrap());
    let channel = connect(&net, endpoint).unwrap();
    assert_eq!(unary(&net, &channel, 3).unwrap(), 3);
    // By address, the certificate (for "localhost" only) does not match.
    let by_address = Endpoint::new(format!("https://127.0.0.1:{}", net.addr.port()))
        .unwrap()
        .handle(net.rt.handle())
        .tls(ClientTlsConfig::from_ca_pem(ca.pem().as_bytes()).unwrap());
    let err = connect(&net, by_address).unwrap_err();
    assert!(err.to_string().contains("TLS handshake") && err.to_string().contains("certificate"), "{err}");
}

#[test]
fn an_untrusted_certificate_or_a_wrong_name_fails_the_connect() {
    let ca = Ca::new("spindle test CA");
    let net = tls_server(&ca, |c| c);
    let other = Ca::new("another CA");
    let err = connect(&net, https(&net, trusting(&other))).unwrap_err();
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    let wrong_name = trusting(&ca).domain_name("elsewhere.example");
    let err = connect(&net, https(&net, wrong_name)).unwrap_err();
    assert!(err.to_string().contains("not valid for name"), "{err}");
    // A lazy channel's calls see the same error as UNAVAILABLE.
    let lazy = https(&net, trusting(&other)).connect_lazy().unwrap();
    let status = unary(&net, &lazy, 1).unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("UnknownIssuer"), "{status:?}");
    drop(lazy);
    // The server goes on serving.
    let channel = connect(&net, https(&net, trusting(&ca))).unwrap();
    assert_eq!(unary(&net, &channel, 9).unwrap(), 9);
    net.settle(1);
}

/// A plain HTTP/2 client against the TLS server, and a TLS client against a plain server:
/// both connects fail (no hang), and the servers go on serving.
#[test]
fn plain_and_tls_do_not_mix() {
    let ca = Ca::new("spindle test CA");
    let net = tls_server(&ca, |c| c);
    // Refused when the server ends the connection, not at the connect timeout (hyper ended
    // it without a read the manager saw: it used to wait the timeout out, module first_frame).
    let plain = net.endpoint().connect_timeout(Duration::from_secs(30));
    let err = connect(&net, plain).unwrap_err().to_string();
    assert!(!err.contains("in time"), "{err}");
    let channel = connect(&net, https(&net, trusting(&ca))).unwrap();
    assert_eq!(unary(&net, &channel, 4).unwrap(), 4);
    net.settle(1);

    let plain_net = start(|s| s);
    let err = connect(&plain_net, https(&plain_net, trusting(&ca))).unwrap_err();
    assert!(err.to_string().contains("TLS handshake"), "{err}");
    let channel = plain_net.client();
    assert_eq!(unary(&plain_net, &channel, 6).unwrap(), 6);
    plain_net.settle(1);
}

/// A client that connects and never says a word is disconnected at the handshake timeout; the
/// server serves others meanwhile.
#[test]
fn a_stalled_handshake_is_cut() {
    let ca = Ca::new("spindle test CA");
    let net = tls_server(&ca, |c| c.handshake_timeout(Duration::from_millis(200)));
    let mut silent = std::net::TcpStream::connect(net.addr).unwrap();
    assert!(wait_until(Duration::from_secs(10), || net.serving().stats().connections == 1));
    let channel = connect(&net, https(&net, trusting(&ca))).unwrap();
    assert_eq!(unary(&net, &channel, 2).unwrap(), 2);
    // The silent one is closed by the server: its read sees the end (a hang guard, not a
    // timing claim).
    silent.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(silent.read(&mut byte).unwrap(), 0, "the server should have closed it");
    net.settle(1);
}

/// The server's shutdown ends a handshake in progress (its timeout here is an hour).
#[test]
fn shutdown_ends_a_pending_handshake() {
    let ca = Ca::new("spindle test CA");
    let mut net = tls_server(&ca, |c| c.handshake_timeout(Duration::from_secs(3600)));
    let mut silent = std::net::TcpStream::connect(net.addr).unwrap();
    assert!(wait_until(Duration::from_secs(10), || net.serving().stats().connections == 1));
    let report = net.serving.take().unwrap().shutdown(Duration::from_secs(30));
    assert_eq!(report.dropped_connections, 0);
    silent.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(silent.read(&mut byte).unwrap(), 0, "the server should have closed it");
}

#[test]
fn mutual_tls() {
    let ca = Ca::new("spindle test CA");
    let client_ca = Ca::new("client CA");
    let (cert, key) = ca.issue(&["localhost"]);
    let config = ServerTlsConfig::from_pem_with_client_auth(
        cert.as_bytes(),
        key.as_bytes(),
        client_ca.pem().as_bytes(),
    )
    .unwrap();
    let net = start(move |s| s.tls(config));
    // No client certificate: refused.
    // The attempt fails with the connection (the server's alert, or the reset of the first
    // write), never only at the connect timeout (as it sometimes did: module first_frame).
    let anonymous = connect(&net, https(&net, trusting(&ca)).connect_timeout(Duration::from_secs(30)));
    let err = anonymous.map(drop).unwrap_err().to_string();
    assert!(!err.contains("in time"), "{err}");
    // One from another authority: refused.
    let (stranger_cert, stranger_key) = ca.issue(&["client"]);
    let stranger = ClientTlsConfig::from_ca_pem_with_identity(
        ca.pem().as_bytes(),
        stranger_cert.as_bytes(),
        stranger_key.as_bytes(),
    )
    .unwrap()
    .domain_name("localhost");
    let stranger = connect(&net, https(&net, stranger));
    assert!(stranger.is_err() || unary(&net, &stranger.unwrap(), 1).is_err());
    // One the server's client CA issued: served.
    let (client_cert, client_key) = client_ca.issue(&["client"]);
    let known = ClientTlsConfig::from_ca_pem_with_identity(
        ca.pem().as_bytes(),
        client_cert.as_bytes(),
        client_key.as_bytes(),
    )
    .unwrap()
    .domain_name("localhost");
    let channel = connect(&net, https(&net, known)).unwrap();
    assert_eq!(unary(&net, &channel, 8).unwrap(), 8);
    assert!(wait_until(Duration::from_secs(10), || net.counters.live_handlers.load(SeqCst) == 0));
    net.settle(1);
}

#[test]
fn misconfigurations_are_clear_errors() {
    let ca = Ca::new("spindle test CA");
    let net = tls_server(&ca, |c| c);
    // https:// without TLS settings is no longer refused: it trusts the system's roots, which
    // do not hold this test's CA (or, on a machine without any, the error says so): a TLS
    // failure of the attempt. `tests/net_tls_system_roots.rs` has the system's roots under
    // control. TLS settings for http:// are refused.
    let bare =
        Endpoint::new(format!("https://localhost:{}", net.addr.port())).unwrap().handle(net.rt.handle());
    let err = connect(&net, bare).unwrap_err().to_string();
    assert!(!err.contains("needs its TLS settings"), "{err}");
    assert!(err.contains("TLS handshake") || err.contains("no trusted root certificate"), "{err}");
    let mixed = net.endpoint().tls(trusting(&ca));
    let err = mixed.connect_lazy().unwrap_err();
    assert!(err.to_string().contains("not https://"), "{err}");
    // PEM that holds no certificate or key.
    let err = ServerTlsConfig::from_pem(b"not pem", b"not pem").unwrap_err();
    assert!(err.to_string().contains("no CERTIFICATE block"), "{err}");
    let (cert, _) = ca.issue(&["localhost"]);
    let (_, other_key) = ca.issue(&["localhost"]);
    let err = ServerTlsConfig::from_pem(cert.as_bytes(), other_key.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    let err = ClientTlsConfig::from_ca_pem(b"").unwrap_err();
    assert!(err.to_string().contains("no CERTIFICATE block"), "{err}");
    let err = ServerTlsConfig::from_pem_files("/nonexistent/cert.pem", "/nonexistent/key.pem").unwrap_err();
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
}
