//! What a call through a `BalancedChannel` costs over a `RemoteChannel` to the same server:
//! `N` sequential unary calls (32-byte payload each way, the conformance service's
//! `UnaryCall`) over loopback TCP, server and client on one worker, through
//!
//! - `remote`: a `RemoteChannel` (`Endpoint::connect`);
//! - `remote-tls`: the same over TLS (a certificate authority and a `localhost` certificate
//!   made at start with rcgen), for the system calls a call makes under TLS;
//! - `balanced`: a `BalancedChannel` over that one endpoint (each call through the retrying
//!   future that keeps its request for transparent retries);
//! - `balanced-retry`: the same with a service config's retry policy for the method.
//!
//! Prints the wall time per call; for instruction counts run it under
//! `valgrind --tool=callgrind` with two values of `N` and divide the difference in
//! instructions by the difference in `N` (`scripts/grpc-balanced-instructions.sh`).
//!
//! ```text
//! cargo run --release -p spindle-perf --features grpc --bin grpc_balanced -- balanced 20000
//! ```

use std::time::{Duration, Instant};

use spindle_grpc::{
    BalancedChannel, Channel, ClientTlsConfig, Endpoint, RetryPolicy, Server, ServerTlsConfig, ServiceConfig,
};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::{Payload, SimpleRequest};

fn sleep(d: Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(spindle::time::sleep_future(d))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "balanced".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    if !matches!(mode.as_str(), "remote" | "remote-tls" | "balanced" | "balanced-retry") {
        eprintln!("usage: grpc_balanced remote|remote-tls|balanced|balanced-retry [N]");
        std::process::exit(2);
    }
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let service = TestServiceServer::new(spindle_grpc_interop::Server::new(sleep));
    let channel = Channel::new().with_handle(rt.handle()).add_service(service);
    let label = mode.clone();
    let tls = (mode == "remote-tls").then(tls_configs);
    let per_call = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut server = Server::new(channel);
        if let Some((server_tls, _)) = &tls {
            server = server.tls(server_tls.clone());
        }
        let serving = server.serve_tcp(listener).unwrap();
        let addr = serving.local_addr().unwrap();
        let endpoint = match &tls {
            Some((_, client_tls)) => {
                Endpoint::new(format!("https://{addr}")).unwrap().tls(client_tls.clone())
            }
            None => Endpoint::new(format!("http://{addr}")).unwrap(),
        };
        let request = SimpleRequest {
            response_size: 32,
            payload: Some(Payload { body: vec![7; 32].into() }),
            ..Default::default()
        };
        let elapsed = match mode.as_str() {
            "remote" | "remote-tls" => {
                let channel = spindle::task::block_on(endpoint.connect()).unwrap();
                calls(TestServiceClient::new(channel), &request, n)
            }
            _ => {
                let mut builder =
                    BalancedChannel::builder(&format!("ipv4:{addr}")).unwrap().endpoint(endpoint);
                if mode == "balanced-retry" {
                    let policy = RetryPolicy::new(
                        3,
                        Duration::from_millis(1),
                        Duration::from_millis(5),
                        2.0,
                        [tonic::Code::Unavailable],
                    )
                    .unwrap();
                    builder = builder.service_config(ServiceConfig::retry_all(policy));
                }
                calls(TestServiceClient::new(builder.build().unwrap()), &request, n)
            }
        };
        serving.shutdown(Duration::from_secs(1));
        elapsed / n.max(1) as u32
    });
    println!("{label}: {n} calls, {per_call:?} per call");
}

/// `n` calls after 100 to warm up; the time the `n` took.
fn calls<T>(mut client: TestServiceClient<T>, request: &SimpleRequest, n: u64) -> Duration
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    spindle::task::block_on(async move {
        for _ in 0..100 {
            client.unary_call(request.clone()).await.unwrap();
        }
        let start = Instant::now();
        for _ in 0..n {
            client.unary_call(request.clone()).await.unwrap();
        }
        start.elapsed()
    })
}

/// A server certificate for `localhost` signed by a certificate authority made here, and a
/// client configuration trusting that authority.
fn tls_configs() -> (ServerTlsConfig, ClientTlsConfig) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let server = ServerTlsConfig::from_pem(cert.pem().as_bytes(), key.serialize_pem().as_bytes()).unwrap();
    let client = ClientTlsConfig::from_ca_pem(ca.pem().as_bytes()).unwrap().domain_name("localhost");
    (server, client)
}
