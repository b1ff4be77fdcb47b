//! Shared by the network tests: a spindle-grpc `Server` on loopback TCP with the conformance
//! service, and helpers to run client code on its runtime and to wait for the counters.

#![allow(dead_code)]

use std::future::Future;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use spindle_grpc::{Channel, Endpoint, RemoteChannel, Server, Serving};

pub mod fleet;
use spindle_grpc_interop::Counters;

pub struct Net {
    pub rt: spindle::Runtime,
    pub serving: Option<Serving>,
    pub channel: Channel,
    pub counters: Arc<Counters>,
    pub addr: std::net::SocketAddr,
}

pub fn spindle_sleep(d: Duration) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(spindle::time::sleep_future(d))
}

/// The conformance service as the network tests register it.
pub type Service = spindle_grpc_interop::EchoMetadata<
    spindle_grpc_interop::pb::test_service_server::TestServiceServer<spindle_grpc_interop::Server>,
>;

/// A server with the conformance service, set up by `configure`. The service is registered
/// with its method table (`spindle-grpc-build`'s `METHODS`), as a service built with
/// spindle-grpc-build would be: the channel knows which methods take one request message.
pub fn start(configure: impl FnOnce(Server) -> Server + Send + 'static) -> Net {
    let methods = &spindle_grpc_interop::pb::test_service_typed::METHODS;
    start_registered(move |channel, svc| channel.add_service_with_methods(svc, methods), configure)
}

/// [`start`] with the service registered on the channel by `register`.
pub fn start_registered(
    register: impl FnOnce(Channel, Service) -> Channel,
    configure: impl FnOnce(Server) -> Server + Send + 'static,
) -> Net {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let server = spindle_grpc_interop::Server::new(spindle_sleep);
    let counters = server.counters.clone();
    let svc = spindle_grpc_interop::EchoMetadata(
        spindle_grpc_interop::pb::test_service_server::TestServiceServer::new(server),
    );
    let channel = register(Channel::new().with_handle(rt.handle()), svc);
    let server_channel = channel.clone();
    let serving = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        configure(Server::new(server_channel)).serve_tcp(listener).unwrap()
    });
    let addr = serving.local_addr().unwrap();
    Net { rt, serving: Some(serving), channel, counters, addr }
}

impl Net {
    pub fn serving(&self) -> &Serving {
        self.serving.as_ref().unwrap()
    }

    pub fn endpoint(&self) -> Endpoint {
        Endpoint::new(format!("http://{}", self.addr)).unwrap().handle(self.rt.handle())
    }

    /// A connected client.
    pub fn client(&self) -> RemoteChannel {
        let endpoint = self.endpoint();
        self.rt.block_on(move || spindle::task::block_on(endpoint.connect())).unwrap()
    }

    /// Runs `f` in a fiber on the runtime.
    pub fn run<F>(&self, f: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.rt.block_on(move || spindle::task::block_on(f))
    }

    /// Waits (up to 10 s) until no call or handler is alive, and `connections` connections
    /// are open, then asserts it.
    pub fn settle(&self, connections: usize) {
        let done = || {
            let stats = self.serving().stats();
            stats.calls == 0
                && stats.connections == connections
                && self.channel.live_calls() == 0
                && self.counters.live_handlers.load(SeqCst) == 0
        };
        wait_until(Duration::from_secs(10), done);
        let stats = self.serving().stats();
        assert_eq!(stats.calls, 0, "server calls alive: {stats:?}");
        assert_eq!(stats.connections, connections, "connections open: {stats:?}");
        assert_eq!(self.channel.live_calls(), 0, "channel calls alive");
        assert_eq!(self.counters.live_handlers.load(SeqCst), 0, "handlers alive");
        assert_eq!(self.counters.live_payloads.load(SeqCst), 0, "payloads alive");
    }
}

/// Polls `cond` every millisecond until it holds or `limit` passes.
pub fn wait_until(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// A gRPC frame: compressed flag 0, big-endian length, the message.
pub fn grpc_frame(message: &impl prost::Message) -> bytes::Bytes {
    let encoded = message.encode_to_vec();
    let mut frame = vec![0];
    frame.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    frame.extend_from_slice(&encoded);
    frame.into()
}

/// A raw HTTP/2 connection (hyper's client on a spindle socket), for looking at frames.
pub async fn raw_client(
    addr: std::net::SocketAddr,
) -> hyper::client::conn::http2::SendRequest<http_body_util::Full<Bytes>> {
    let stream = spindle::net::TcpStream::connect(addr).unwrap();
    let (send, conn) = hyper::client::conn::http2::Builder::new(spindle::hyper_rt::Executor)
        .timer(spindle::hyper_rt::Timer)
        .handshake(stream)
        .await
        .unwrap();
    drop(spindle::task::spawn_async(conn));
    send
}

/// A gRPC POST of `body` (framed messages) to `path` on `addr`.
pub fn grpc_request(
    addr: std::net::SocketAddr,
    path: &str,
    body: Bytes,
) -> http::Request<http_body_util::Full<Bytes>> {
    http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(http_body_util::Full::new(body))
        .unwrap()
}
