//! Shared by the spindle-grpc tests: the transports each case runs on.
//!
//! - `inproc`: spindle-grpc's Channel, the client running in a fiber on a spindle worker (the
//!   handler runs in the caller's call on that worker), the service registered with
//!   `add_service`: the encoded path;
//! - `outside`: the same Channel, the client on a plain thread (the handler runs in a pump task
//!   on the channel's runtime);
//! - `typed`, `typed_outside`: the same two with the service registered with
//!   `add_typed_service`: the typed fast path (messages moved, never encoded);
//! - `tcp`: tonic's own transport over loopback TCP (HTTP/2), client and server on tokio;
//! - `net`: spindle-grpc's network server and client (`Server`, `RemoteChannel`) over loopback
//!   TCP, the client in a fiber; `net_outside`: the same, the client on a plain thread.
//!
//! Every case uses the typed client that spindle-grpc-build generates
//! (`pb::test_service_typed::TestServiceClient`): on the typed kinds it takes the fast path, on
//! every other kind it hands each call to tonic's own generated client (the fallback).

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use spindle_grpc::typed::TypedService;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::test_service_typed::TestServiceClient;
use spindle_grpc_interop::pb::unimplemented_service_typed::UnimplementedServiceClient;
use spindle_grpc_interop::{Counters, EchoMetadata, Server, SleepFn};
use tonic::client::GrpcService;
use tonic::codegen::{Body as HttpBody, StdError};

/// Everything a client transport must be for the cases.
pub trait Transport:
    GrpcService<
        tonic::body::Body,
        Error: Into<StdError> + Send,
        Future: Send,
        ResponseBody: HttpBody<Data = Bytes, Error: Into<StdError> + Send> + Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<T> Transport for T where
    T: GrpcService<
            tonic::body::Body,
            Error: Into<StdError> + Send,
            Future: Send,
            ResponseBody: HttpBody<Data = Bytes, Error: Into<StdError> + Send> + Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Inproc,
    Outside,
    Typed,
    TypedOutside,
    Tcp,
    Net,
    NetOutside,
}

impl Kind {
    /// The transports whose semantics are spindle-grpc's (the channel's, in process or over
    /// the network), as opposed to tonic's transport.
    pub fn is_spindle(self) -> bool {
        self != Kind::Tcp
    }

    /// The transports on which the typed client takes the fast path.
    pub fn is_typed(self) -> bool {
        matches!(self, Kind::Typed | Kind::TypedOutside)
    }
}

/// A sleep on the client side's runtime.
pub type ClientSleep = Arc<dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// What a case gets: clients on one transport, the server's counters, a sleep for the client
/// side's runtime.
pub struct Env<T> {
    pub kind: Kind,
    pub transport: T,
    pub counters: Arc<Counters>,
    pub sleep: ClientSleep,
}

impl<T: Transport> Env<T> {
    pub fn client(&self) -> TestServiceClient<T> {
        let client = TestServiceClient::new(self.transport.clone());
        assert_eq!(client.is_typed(), self.kind.is_typed(), "the typed client's path on {:?}", self.kind);
        client
    }

    pub fn unimplemented_client(&self) -> UnimplementedServiceClient<T> {
        UnimplementedServiceClient::new(self.transport.clone())
    }

    pub async fn sleep(&self, d: Duration) {
        (self.sleep)(d).await
    }

    /// Waits (up to 10 s) until `cond` holds.
    pub async fn eventually(&self, what: &str, cond: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if cond() {
                return;
            }
            self.sleep(Duration::from_millis(1)).await;
        }
        panic!("timed out waiting for: {what}");
    }
}

pub fn spindle_sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(spindle::time::sleep_future(d))
}

pub fn tokio_sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(tokio::time::sleep(d))
}

pub type Service = EchoMetadata<TestServiceServer<Server>>;

pub fn service(sleep: SleepFn) -> (Service, Arc<Counters>) {
    let server = Server::new(sleep);
    let counters = server.counters.clone();
    (EchoMetadata(TestServiceServer::new(server)), counters)
}

/// What a test registers: a generated server, maybe wrapped (interceptors, layers), whose
/// responses have a body of type `B`.
pub trait Svc<B>:
    tower_service::Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<B>,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + tonic::server::NamedService
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S, B> Svc<B> for S where
    S: tower_service::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<B>,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// What a response body must be for both transports.
pub trait RespBody: HttpBody<Data = Bytes, Error: Into<StdError>> + Send + 'static {}
impl<B> RespBody for B where B: HttpBody<Data = Bytes, Error: Into<StdError>> + Send + 'static {}

/// Runs `case` with the client in a fiber of a spindle runtime, on spindle-grpc's Channel.
pub fn run_inproc<F, Fut>(case: F)
where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_inproc_with(service, case)
}

/// [`run_inproc`] with the service made by `make`.
pub fn run_inproc_with<S: Svc<B>, B: RespBody, F, Fut>(
    make: impl FnOnce(SleepFn) -> (S, Arc<Counters>),
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_inproc_on(make, |channel| channel, case)
}

/// [`run_inproc_with`] on a channel set up by `configure` (its limits, say).
pub fn run_inproc_on<S: Svc<B>, B: RespBody, F, Fut>(
    make: impl FnOnce(SleepFn) -> (S, Arc<Counters>),
    configure: impl FnOnce(spindle_grpc::Channel) -> spindle_grpc::Channel,
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (svc, counters) = make(spindle_sleep);
    let channel = configure(spindle_grpc::Channel::new().with_handle(rt.handle())).add_service(svc);
    in_fiber(rt, Kind::Inproc, channel, counters, case);
}

/// Runs `case` with the client in a fiber, on spindle-grpc's Channel with the service
/// registered typed: the fast path.
pub fn run_typed<F, Fut>(case: F)
where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_typed_on(service, |channel| channel, case)
}

/// [`run_typed`] with the service made by `make`, on a channel set up by `configure`.
pub fn run_typed_on<S: Svc<B> + TypedService, B: RespBody, F, Fut>(
    make: impl FnOnce(SleepFn) -> (S, Arc<Counters>),
    configure: impl FnOnce(spindle_grpc::Channel) -> spindle_grpc::Channel,
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (svc, counters) = make(spindle_sleep);
    let channel = configure(spindle_grpc::Channel::new().with_handle(rt.handle())).add_typed_service(svc);
    in_fiber(rt, Kind::Typed, channel, counters, case);
}

fn in_fiber<F, Fut>(
    rt: spindle::Runtime,
    kind: Kind,
    channel: spindle_grpc::Channel,
    counters: Arc<Counters>,
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let env =
        Env { kind, transport: channel.clone(), counters: counters.clone(), sleep: Arc::new(spindle_sleep) };
    rt.block_on(move || spindle::task::block_on(case(env)));
    assert_eq!(channel.live_calls(), 0, "calls left alive on the channel");
    check_no_leaks(&counters);
}

/// Runs `case` with the client on this (plain) thread, on spindle-grpc's Channel: the calls
/// are pumped through the channel's runtime.
pub fn run_outside<F, Fut>(case: F)
where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut,
    Fut: Future<Output = ()>,
{
    run_outside_with(service, case)
}

/// [`run_outside`] with the service made by `make`.
pub fn run_outside_with<S: Svc<B>, B: RespBody, F, Fut>(
    make: impl FnOnce(SleepFn) -> (S, Arc<Counters>),
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut,
    Fut: Future<Output = ()>,
{
    run_outside_on(make, |channel| channel, case)
}

/// [`run_outside_with`] on a channel set up by `configure`.
pub fn run_outside_on<S: Svc<B>, B: RespBody, F, Fut>(
    make: impl FnOnce(SleepFn) -> (S, Arc<Counters>),
    configure: impl FnOnce(spindle_grpc::Channel) -> spindle_grpc::Channel,
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (svc, counters) = make(spindle_sleep);
    let channel = configure(spindle_grpc::Channel::new().with_handle(rt.handle())).add_service(svc);
    on_thread(&rt, Kind::Outside, channel, counters, case);
}

/// Runs `case` with the client on this (plain) thread, on spindle-grpc's Channel with the
/// service registered typed: the fast path, pumped through the channel's runtime.
pub fn run_typed_outside<F, Fut>(case: F)
where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut,
    Fut: Future<Output = ()>,
{
    run_typed_outside_on(service, |channel| channel, case)
}

/// [`run_typed_outside`] with the service made by `make`, on a channel set up by `configure`.
pub fn run_typed_outside_on<S: Svc<B> + TypedService, B: RespBody, F, Fut>(
    make: impl FnOnce(SleepFn) -> (S, Arc<Counters>),
    configure: impl FnOnce(spindle_grpc::Channel) -> spindle_grpc::Channel,
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (svc, counters) = make(spindle_sleep);
    let channel = configure(spindle_grpc::Channel::new().with_handle(rt.handle())).add_typed_service(svc);
    on_thread(&rt, Kind::TypedOutside, channel, counters, case);
}

fn on_thread<F, Fut>(
    rt: &spindle::Runtime,
    kind: Kind,
    channel: spindle_grpc::Channel,
    counters: Arc<Counters>,
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::Channel>) -> Fut,
    Fut: Future<Output = ()>,
{
    let handle = rt.handle();
    let sleep = Arc::new(move |d: Duration| -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let task = handle.spawn_async(spindle::time::sleep_future(d));
        Box::pin(async move {
            task.await.unwrap();
        })
    });
    let env = Env { kind, transport: channel.clone(), counters: counters.clone(), sleep };
    spindle::task::block_on(case(env));
    // The pump tasks finish on the runtime's workers, just after the client saw the end.
    for _ in 0..10_000 {
        if channel.live_calls() == 0 && counters.live_handlers.load(std::sync::atomic::Ordering::SeqCst) == 0
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(channel.live_calls(), 0, "calls left alive on the channel");
    check_no_leaks(&counters);
}

/// Runs `case` on tokio with tonic's transport over loopback TCP.
pub fn run_tcp<F, Fut>(case: F)
where
    F: FnOnce(Env<tonic::transport::Channel>) -> Fut,
    Fut: Future<Output = ()>,
{
    run_tcp_with(service, case)
}

/// [`run_tcp`] with the service made by `make`.
pub fn run_tcp_with<S: Svc<B>, B: RespBody, F, Fut>(make: impl FnOnce(SleepFn) -> (S, Arc<Counters>), case: F)
where
    F: FnOnce(Env<tonic::transport::Channel>) -> Fut,
    Fut: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (svc, counters) = make(tokio_sleep);
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        tokio::spawn(tonic::transport::Server::builder().add_service(svc).serve_with_incoming(incoming));
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let env = Env {
            kind: Kind::Tcp,
            transport: channel,
            counters: counters.clone(),
            sleep: Arc::new(tokio_sleep),
        };
        case(env).await;
        // The server drops a cancelled handler when the reset reaches it.
        for _ in 0..10_000 {
            if counters.live_handlers.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    check_no_leaks(&counters);
}

/// Runs `case` over spindle-grpc's network server and client on loopback TCP, the client in
/// a fiber (`outside == false`) or on this plain thread.
pub fn run_net<F, Fut>(outside: bool, case: F)
where
    F: FnOnce(Env<spindle_grpc::RemoteChannel>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    run_net_on(outside, service, |channel| channel, case)
}

/// [`run_net`] with the service made by `make`, on a channel set up by `configure`.
pub fn run_net_on<S: Svc<B>, B: RespBody, F, Fut>(
    outside: bool,
    make: impl FnOnce(SleepFn) -> (S, Arc<Counters>),
    configure: impl FnOnce(spindle_grpc::Channel) -> spindle_grpc::Channel,
    case: F,
) where
    F: FnOnce(Env<spindle_grpc::RemoteChannel>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (svc, counters) = make(spindle_sleep);
    let channel = configure(spindle_grpc::Channel::new().with_handle(rt.handle())).add_service(svc);
    let server_channel = channel.clone();
    let serving = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        spindle_grpc::Server::new(server_channel).serve_tcp(listener).unwrap()
    });
    let addr = serving.local_addr().unwrap();
    let endpoint = spindle_grpc::Endpoint::new(format!("http://{addr}")).unwrap().handle(rt.handle());
    let remote = rt.block_on(move || spindle::task::block_on(endpoint.connect())).unwrap();
    if outside {
        let handle = rt.handle();
        let sleep = Arc::new(move |d: Duration| -> Pin<Box<dyn Future<Output = ()> + Send>> {
            let task = handle.spawn_async(spindle::time::sleep_future(d));
            Box::pin(async move {
                task.await.unwrap();
            })
        });
        let env =
            Env { kind: Kind::NetOutside, transport: remote.clone(), counters: counters.clone(), sleep };
        spindle::task::block_on(case(env));
    } else {
        let env = Env {
            kind: Kind::Net,
            transport: remote.clone(),
            counters: counters.clone(),
            sleep: Arc::new(spindle_sleep),
        };
        rt.block_on(move || spindle::task::block_on(case(env)));
    }
    // The server drops a cancelled handler when the reset reaches it.
    for _ in 0..10_000 {
        let stats = serving.stats();
        if stats.calls == 0
            && channel.live_calls() == 0
            && counters.live_handlers.load(std::sync::atomic::Ordering::SeqCst) == 0
            && remote.in_flight() == 0
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(remote.in_flight(), 0, "client calls left in flight");
    assert_eq!(serving.stats().calls, 0, "server calls left alive");
    assert_eq!(channel.live_calls(), 0, "calls left alive on the channel");
    check_no_leaks(&counters);
    drop(remote);
    let report = serving.shutdown(Duration::from_secs(5));
    assert_eq!(report.dropped_connections, 0);
}

pub fn check_no_leaks(counters: &Counters) {
    use std::sync::atomic::Ordering::SeqCst;
    assert_eq!(counters.live_handlers.load(SeqCst), 0, "handlers left alive");
    assert_eq!(counters.live_payloads.load(SeqCst), 0, "payload buffers left alive");
}

/// The channel's own limit: RESOURCE_EXHAUSTED naming the size, the limit and the setting.
#[allow(dead_code)] // not every test binary checks a limit
pub fn assert_channel_limit(err: &tonic::Status, what: &str, limit: usize) {
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
    let message = err.message();
    assert!(message.contains(&format!("{what} message of ")), "{err:?}");
    assert!(message.contains(&format!("limit of {limit} bytes")), "{err:?}");
    assert!(message.contains(&format!("max_{what}_message_size")), "{err:?}");
}
