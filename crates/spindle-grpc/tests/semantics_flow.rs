//! Semantics beyond the interop cases, part two: interceptors on both sides, backpressure,
//! cancellation seen by a handler's reader, a runtime shut down under a call, a channel
//! without a runtime, many services. Part one (`semantics.rs`): panics, message size limits,
//! frames split across chunks. Every channel case also runs on the typed fast path.

mod common;

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use common::{assert_channel_limit, Env, Kind, Transport};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::test_service_typed::TestServiceClient as TypedClient;
use spindle_grpc_interop::pb::*;
use spindle_grpc_interop::{payload, Counters, Server, SleepFn};
use tonic::{Code, Request, Status};

// ---------------------------------------------------------------------------------------
// Interceptors on both sides.

fn check_token(request: Request<()>) -> Result<Request<()>, Status> {
    match request.metadata().get("authorization") {
        Some(token) if token == "Bearer spindle" => Ok(request),
        _ => Err(Status::unauthenticated("no valid token")),
    }
}

type Intercepted = tonic::service::interceptor::InterceptedService<
    TestServiceServer<Server>,
    fn(Request<()>) -> Result<Request<()>, Status>,
>;

fn intercepted(sleep: SleepFn) -> (Intercepted, Arc<Counters>) {
    let server = Server::new(sleep);
    let counters = server.counters.clone();
    let check: fn(Request<()>) -> Result<Request<()>, Status> = check_token;
    (TestServiceServer::with_interceptor(server, check), counters)
}

type InterceptedTyped = spindle_grpc::typed::Intercepted<
    TestServiceServer<Server>,
    fn(Request<()>) -> Result<Request<()>, Status>,
>;

/// The same interceptor, keeping the typed path (tonic's `InterceptedService` hides it).
fn intercepted_typed(sleep: SleepFn) -> (InterceptedTyped, Arc<Counters>) {
    let server = Server::new(sleep);
    let counters = server.counters.clone();
    let check: fn(Request<()>) -> Result<Request<()>, Status> = check_token;
    (spindle_grpc::typed::Intercepted::new(TestServiceServer::new(server), check), counters)
}

/// The same case for each concrete transport (a client interceptor's bounds on a generic
/// transport are long to spell out).
macro_rules! interceptors_case {
    ($name:ident, $transport:ty) => {
        async fn $name(env: Env<$transport>) {
            let err = env.client().empty_call(Empty {}).await.unwrap_err();
            assert_eq!(err.code(), Code::Unauthenticated);
            assert_eq!(env.counters.started.load(SeqCst), 0, "the server interceptor let the call through");
            let mut client =
                TypedClient::with_interceptor(env.transport.clone(), |mut request: Request<()>| {
                    request.metadata_mut().insert("authorization", "Bearer spindle".parse().unwrap());
                    Ok(request)
                });
            client.empty_call(Empty {}).await.unwrap();
            // A client interceptor that refuses: the call never leaves the client.
            let mut refusing = TypedClient::with_interceptor(env.transport.clone(), |_: Request<()>| {
                Err(Status::permission_denied("refused by the client"))
            });
            assert_eq!(refusing.empty_call(Empty {}).await.unwrap_err().code(), Code::PermissionDenied);
            assert_eq!(env.counters.started.load(SeqCst), 1);
        }
    };
}

interceptors_case!(interceptors, spindle_grpc::Channel);
interceptors_case!(interceptors_over_tcp, tonic::transport::Channel);
interceptors_case!(interceptors_over_net, spindle_grpc::RemoteChannel);

#[test]
fn interceptors_inproc() {
    common::run_inproc_with(intercepted, interceptors);
}

#[test]
fn interceptors_outside() {
    common::run_outside_with(intercepted, interceptors);
}

#[test]
fn interceptors_typed() {
    common::run_typed_on(intercepted_typed, |c| c, interceptors);
}

#[test]
fn interceptors_typed_outside() {
    common::run_typed_outside_on(intercepted_typed, |c| c, interceptors);
}

/// The typed server behind its interceptor also serves the encoded path (tonic's client).
#[test]
fn interceptors_typed_server_encoded_client() {
    common::run_inproc_with(intercepted_typed, interceptors);
}

#[test]
fn interceptors_net() {
    common::run_net_on(false, intercepted, |c| c, interceptors_over_net);
}

#[test]
fn interceptors_tcp() {
    common::run_tcp_with(intercepted, interceptors_over_tcp);
}

// ---------------------------------------------------------------------------------------
// Backpressure: a slow reader bounds what the handler has produced.

async fn backpressure<T: Transport>(env: Env<T>) {
    let request = StreamingOutputCallRequest {
        response_parameters: (0..1000)
            .map(|_| ResponseParameters { size: 1024, ..Default::default() })
            .collect(),
        ..Default::default()
    };
    let mut stream = env.client().streaming_output_call(request).await.unwrap().into_inner();
    let mut read = 0u64;
    for _ in 0..3 {
        stream.message().await.unwrap().unwrap();
        read += 1;
    }
    env.sleep(Duration::from_millis(30)).await; // the handler could run ahead now, if unbounded
    let produced = env.counters.produced.load(SeqCst);
    // tonic's encoder batches ready messages into frames of up to 32 KiB (and the client's
    // decoder holds the rest of the frame it is reading): 33 messages of 1 KiB.
    let tonic = 33;
    let bound = match env.kind {
        // Pulled frame by frame: nothing but tonic's own batch.
        Kind::Inproc => tonic,
        // Pulled message by message: the handler produces one when the client asks for one.
        Kind::Typed => 1,
        // The typed pump's pipe holds up to PIPE_FRAMES messages, plus the one in hand.
        Kind::TypedOutside => spindle_grpc::PIPE_FRAMES as u64 + 1,
        // The pump's pipe holds up to PIPE_BYTES of frames, plus the frame in hand.
        Kind::Outside => tonic + spindle_grpc::PIPE_BYTES as u64 / 1024 + 33,
        Kind::Tcp | Kind::Net | Kind::NetOutside => unreachable!(),
    };
    assert!(produced <= read + bound, "{produced} messages produced while {read} were read");
    drop(stream);
    let counters = env.counters.clone();
    env.eventually("the handler was dropped", move || counters.live_handlers.load(SeqCst) == 0).await;
}

#[test]
fn backpressure_inproc() {
    common::run_inproc(backpressure);
}

#[test]
fn backpressure_outside() {
    common::run_outside(backpressure);
}

#[test]
fn backpressure_typed() {
    common::run_typed(backpressure);
}

#[test]
fn backpressure_typed_outside() {
    common::run_typed_outside(backpressure);
}

// ---------------------------------------------------------------------------------------
// A cancelled upload is CANCELLED for a handler that still reads it (not a clean end).

/// A raw service under TestService's name whose StreamingInputCall reads the upload (in a task
/// of its own, or `inline` in the handler's future) and never answers; it reports what the
/// reader saw: the end of the upload or its error.
#[derive(Clone)]
struct Reader {
    started: Arc<std::sync::atomic::AtomicBool>,
    outcome: Arc<std::sync::Mutex<Option<Result<(), Code>>>>,
    inline: bool,
}

impl tonic::server::NamedService for Reader {
    const NAME: &'static str = "spindle.interop.TestService";
}

impl tower_service::Service<http::Request<tonic::body::Body>> for Reader {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>,
    >;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let this = self.clone();
        let mut body = request.into_body();
        let read = async move {
            use http_body::Body as _;
            this.started.store(true, SeqCst);
            let outcome = loop {
                match std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
                    Some(Ok(_)) => continue,
                    Some(Err(status)) => break Err(status.code()),
                    None => break Ok(()),
                }
            };
            *this.outcome.lock().unwrap() = Some(outcome);
        };
        if self.inline {
            return Box::pin(async move {
                read.await;
                std::future::pending().await
            });
        }
        spindle::task::spawn_async(read);
        Box::pin(std::future::pending())
    }
}

#[test]
fn cancelled_upload_is_cancelled_for_the_reader() {
    let rt = spindle::Runtime::new().unwrap();
    let reader = Reader { started: Default::default(), outcome: Default::default(), inline: false };
    let channel = spindle_grpc::Channel::new().add_service(reader.clone());
    let outcome = reader.outcome.clone();
    rt.block_on(move || {
        spindle::task::block_on(async move {
            let (tx, rx) = tokio::sync::mpsc::channel::<StreamingInputCallRequest>(1);
            let mut client = TestServiceClient::new(channel.clone());
            let call = client.streaming_input_call(tokio_stream::wrappers::ReceiverStream::new(rx));
            let started = async {
                while !reader.started.load(SeqCst) {
                    spindle::time::sleep_future(Duration::from_millis(1)).await;
                }
                tx.send(StreamingInputCallRequest::default()).await.unwrap();
                spindle::time::sleep_future(Duration::from_millis(5)).await;
            };
            match futures_util::future::select(Box::pin(call), Box::pin(started)).await {
                futures_util::future::Either::Left(_) => panic!("the call ended by itself"),
                futures_util::future::Either::Right(_) => {} // the call is dropped: cancelled
            }
            for _ in 0..10_000 {
                if outcome.lock().unwrap().is_some() {
                    break;
                }
                spindle::time::sleep_future(Duration::from_millis(1)).await;
            }
            assert_eq!(channel.live_calls(), 0);
            drop(tx); // only now does the client's stream end
        })
    });
    assert_eq!(*reader.outcome.lock().unwrap(), Some(Err(Code::Cancelled)));
}

/// The same over spindle-grpc's network server and client: the client drops the call, the
/// HTTP/2 stream is reset, and the handler's reader (in a task it spawned) sees CANCELLED.
#[test]
fn cancelled_upload_is_cancelled_for_the_reader_over_the_network() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let reader = Reader { started: Default::default(), outcome: Default::default(), inline: false };
    let channel = spindle_grpc::Channel::new().with_handle(rt.handle()).add_service(reader.clone());
    let serving = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        spindle_grpc::Server::new(channel).serve_tcp(listener).unwrap()
    });
    let endpoint = spindle_grpc::Endpoint::new(format!("http://{}", serving.local_addr().unwrap())).unwrap();
    let outcome = reader.outcome.clone();
    rt.block_on(move || {
        spindle::task::block_on(async move {
            let remote = endpoint.connect().await.unwrap();
            let (tx, rx) = tokio::sync::mpsc::channel::<StreamingInputCallRequest>(1);
            let mut client = TestServiceClient::new(remote);
            tx.send(StreamingInputCallRequest::default()).await.unwrap();
            let call = client.streaming_input_call(tokio_stream::wrappers::ReceiverStream::new(rx));
            let started = async {
                while !reader.started.load(SeqCst) {
                    spindle::time::sleep_future(Duration::from_millis(1)).await;
                }
                spindle::time::sleep_future(Duration::from_millis(5)).await;
            };
            match futures_util::future::select(Box::pin(call), Box::pin(started)).await {
                futures_util::future::Either::Left(_) => panic!("the call ended by itself"),
                futures_util::future::Either::Right(_) => {} // the call is dropped: cancelled
            }
            for _ in 0..10_000 {
                if outcome.lock().unwrap().is_some() {
                    break;
                }
                spindle::time::sleep_future(Duration::from_millis(1)).await;
            }
            drop(tx);
        })
    });
    assert_eq!(*reader.outcome.lock().unwrap(), Some(Err(Code::Cancelled)));
    serving.shutdown(Duration::from_secs(1));
}

/// An oversized upload read in a task the handler spawned: the call still ends with
/// RESOURCE_EXHAUSTED (the failing request body wakes the call), and the reader gets that
/// error, not a clean end. Read inline, the handler is dropped and sees neither.
#[test]
fn oversized_upload_fails_the_call_and_the_reader() {
    for inline in [false, true] {
        let rt = spindle::Runtime::new().unwrap();
        let reader = Reader { started: Default::default(), outcome: Default::default(), inline };
        let channel = spindle_grpc::Channel::new().max_request_message_size(1000).add_service(reader.clone());
        let counters = Arc::new(Counters::default());
        let requests: Vec<_> = [10, 2000]
            .into_iter()
            .map(|size| StreamingInputCallRequest { payload: Some(payload(&counters, size)) })
            .collect();
        let outcome = reader.outcome.clone();
        let err = rt.block_on(move || {
            spindle::task::block_on(async move {
                let mut client = TestServiceClient::new(channel.clone());
                let err =
                    client.streaming_input_call(futures_util::stream::iter(requests)).await.unwrap_err();
                assert_eq!(channel.live_calls(), 0);
                for _ in 0..10_000 {
                    if inline || outcome.lock().unwrap().is_some() {
                        break;
                    }
                    spindle::time::sleep_future(Duration::from_millis(1)).await;
                }
                err
            })
        });
        assert_channel_limit(&err, "request", 1000);
        let expected = if inline { None } else { Some(Err(Code::ResourceExhausted)) };
        assert_eq!(*reader.outcome.lock().unwrap(), expected, "inline: {inline}");
        common::check_no_leaks(&counters);
    }
}

// ---------------------------------------------------------------------------------------
// Outside callers: the runtime going away, and no runtime at all.

#[test]
fn runtime_dropped_under_an_outside_call_is_unavailable() {
    let rt = spindle::Runtime::new().unwrap();
    let server = Server::new(common::spindle_sleep);
    let counters = server.counters.clone();
    let channel =
        spindle_grpc::Channel::new().with_handle(rt.handle()).add_service(TestServiceServer::new(server));
    let dropper = std::thread::spawn(move || {
        while counters.started.load(SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(rt);
        counters
    });
    let mut client = TestServiceClient::new(channel.clone());
    let request = SimpleRequest { sleep_ms: 60_000, ..Default::default() };
    let err = spindle::task::block_on(client.unary_call(request)).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    let counters = dropper.join().unwrap();
    // Later calls fail at once.
    let err = spindle::task::block_on(client.empty_call(Empty {})).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains("shut down"), "{err:?}");
    assert_eq!(channel.live_calls(), 0);
    common::check_no_leaks(&counters);
}

#[test]
fn outside_call_without_a_runtime_is_unavailable() {
    let server = Server::new(common::spindle_sleep);
    let channel = spindle_grpc::Channel::new().add_service(TestServiceServer::new(server));
    let err = spindle::task::block_on(TestServiceClient::new(channel).empty_call(Empty {})).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
}

// ---------------------------------------------------------------------------------------
// Many services: past the linear scan, lookups go through an index; re-registering replaces.

#[derive(Clone)]
struct Named<const N: usize>;

macro_rules! named {
    ($($n:literal),*) => {$(
        impl tonic::server::NamedService for Named<$n> {
            const NAME: &'static str = concat!("spindle.test.S", $n);
        }
    )*};
}
named!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19);

impl<const N: usize> tower_service::Service<http::Request<tonic::body::Body>> for Named<N> {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<tonic::body::Body>) -> Self::Future {
        // Answers every call with a status naming the service.
        std::future::ready(Ok(Status::aborted(format!("S{N}")).into_http()))
    }
}

#[test]
fn many_services_route_by_name() {
    let rt = spindle::Runtime::new().unwrap();
    let channel = spindle_grpc::Channel::new()
        .add_service(Named::<0>)
        .add_service(Named::<1>)
        .add_service(Named::<2>)
        .add_service(Named::<3>)
        .add_service(Named::<4>)
        .add_service(Named::<5>)
        .add_service(Named::<6>)
        .add_service(Named::<7>)
        .add_service(Named::<8>)
        .add_service(Named::<9>)
        .add_service(Named::<10>)
        .add_service(Named::<11>)
        .add_service(Named::<12>)
        .add_service(Named::<13>)
        .add_service(Named::<14>)
        .add_service(Named::<15>)
        .add_service(Named::<16>)
        .add_service(Named::<17>)
        .add_service(Named::<18>)
        .add_service(Named::<19>);
    rt.block_on(move || {
        spindle::task::block_on(async move {
            for n in [0, 7, 16, 19] {
                let mut grpc = tonic::client::Grpc::new(channel.clone());
                let path = format!("/spindle.test.S{n}/Call").parse().unwrap();
                let codec = tonic_prost::ProstCodec::<Empty, Empty>::default();
                let err = grpc.unary(Request::new(Empty {}), path, codec).await.unwrap_err();
                assert_eq!((err.code(), err.message()), (Code::Aborted, format!("S{n}").as_str()));
            }
            let mut grpc = tonic::client::Grpc::new(channel.clone());
            let codec = tonic_prost::ProstCodec::<Empty, Empty>::default();
            let path = "/spindle.test.S20/Call".parse().unwrap();
            assert_eq!(
                grpc.unary(Request::new(Empty {}), path, codec).await.unwrap_err().code(),
                Code::Unimplemented
            );
        })
    });
}
