//! The typed fast path beyond the shared cases (conformance.rs and semantics.rs run those on it
//! too): a cancelled upload seen by a reader the handler spawned, an oversized upload, the
//! runtime going away, no runtime, extensions both ways, `AnyChannel`, and a typed entry that
//! lists only some of the client's methods (the others take the encoded path).

mod common;

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use spindle_grpc::typed::{BoxHandler, Call, Dispatch, Entry, Method, TypedService};
use spindle_grpc::{AnyChannel, Channel};
use spindle_grpc_interop::pb::test_service_server::{TestService, TestServiceServer};
use spindle_grpc_interop::pb::test_service_typed::TestServiceClient;
use spindle_grpc_interop::pb::*;
use spindle_grpc_interop::{payload, Counters, Server};
use tonic::codegen::GrpcMethod;
use tonic::{Code, Request, Response, Status, Streaming};

type OutStream = Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send>>;

/// A request extension from the client, a response extension from the handler.
#[derive(Debug, Clone, PartialEq)]
struct Marker(&'static str);

/// A TestService whose StreamingInputCall hands the upload to a task it spawns (which reports
/// what it read: a count at a clean end, or the error) and never answers; whose UnaryCall
/// reports which path the call took (tonic's encoded client sends a `content-type`, the typed
/// path carries only the caller's metadata), the client's extension and the method; and whose
/// StreamingOutputCall answers one message naming the path.
#[derive(Clone, Default)]
struct Probe {
    started: Arc<AtomicBool>,
    outcome: Arc<Mutex<Option<Result<usize, Code>>>>,
}

fn path_of<T>(request: &Request<T>) -> &'static str {
    if request.metadata().get("content-type").is_some() {
        "encoded"
    } else {
        "typed"
    }
}

#[tonic::async_trait]
impl TestService for Probe {
    async fn empty_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn unary_call(&self, request: Request<SimpleRequest>) -> Result<Response<SimpleResponse>, Status> {
        let marker = request.extensions().get::<Marker>().map_or("none", |m| m.0);
        let method = request.extensions().get::<GrpcMethod>().map_or("none", |m| m.method());
        let body = format!("{} {marker} {method}", path_of(&request));
        let mut response = Response::new(SimpleResponse { payload: Some(Payload { body: body.into() }) });
        response.extensions_mut().insert(Marker("from the handler"));
        Ok(response)
    }

    type StreamingOutputCallStream = OutStream;

    async fn streaming_output_call(
        &self,
        request: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<OutStream>, Status> {
        let body = path_of(&request).into();
        let message = StreamingOutputCallResponse { payload: Some(Payload { body }) };
        Ok(Response::new(Box::pin(futures_util::stream::iter([Ok(message)]))))
    }

    async fn streaming_input_call(
        &self,
        request: Request<Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        let mut upload = request.into_inner();
        let outcome = self.outcome.clone();
        spindle::task::spawn_async(async move {
            let mut read = 0;
            let result = loop {
                match upload.message().await {
                    Ok(Some(_)) => read += 1,
                    Ok(None) => break Ok(read),
                    Err(status) => break Err(status.code()),
                }
            };
            *outcome.lock().unwrap() = Some(result);
        });
        self.started.store(true, SeqCst);
        std::future::pending().await
    }

    type FullDuplexCallStream = OutStream;

    async fn full_duplex_call(
        &self,
        _: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<OutStream>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn unimplemented_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented(""))
    }
}

/// Starts an upload of one message whose stream stays open, waits until the handler started,
/// drops the call, and returns what the handler's spawned reader saw.
fn cancel_an_upload(
    channel: Channel,
    probe: &Probe,
    sleep: common::ClientSleep,
) -> Option<Result<usize, Code>> {
    let (started, outcome) = (probe.started.clone(), probe.outcome.clone());
    spindle::task::block_on(async move {
        let (tx, rx) = tokio::sync::mpsc::channel::<StreamingInputCallRequest>(1);
        tx.send(StreamingInputCallRequest::default()).await.unwrap();
        let mut client = TestServiceClient::new(channel.clone());
        let call = client.streaming_input_call(tokio_stream::wrappers::ReceiverStream::new(rx));
        let wait = async {
            while !started.load(SeqCst) {
                sleep(Duration::from_millis(1)).await;
            }
            sleep(Duration::from_millis(5)).await;
        };
        match futures_util::future::select(Box::pin(call), Box::pin(wait)).await {
            futures_util::future::Either::Left(_) => panic!("the call ended by itself"),
            futures_util::future::Either::Right(_) => {} // the call is dropped: cancelled
        }
        for _ in 0..10_000 {
            if outcome.lock().unwrap().is_some() {
                break;
            }
            sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(channel.live_calls(), 0);
        drop(tx); // only now does the client's stream end
    });
    probe.outcome.lock().unwrap().take()
}

/// On the typed path, the handler's `tonic::Streaming` fails with CANCELLED once the client
/// dropped the call (from a fiber, and from a plain thread through the pump). On the encoded
/// path tonic's `Streaming` turns the channel's CANCELLED request body into a clean end of
/// stream (tonic 0.14, `codec/decode.rs`), so its reader sees the upload end after one message.
#[test]
fn cancelled_upload_fails_for_a_reader_the_handler_spawned() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    for typed in [true, false] {
        for outside in [false, true] {
            let probe = Probe::default();
            let channel = Channel::new().with_handle(rt.handle());
            let channel = match typed {
                true => channel.add_typed_service(TestServiceServer::new(probe.clone())),
                false => channel.add_service(TestServiceServer::new(probe.clone())),
            };
            let outcome = match outside {
                true => {
                    let handle = rt.handle();
                    let sleep: common::ClientSleep = Arc::new(move |d| {
                        let task = handle.spawn_async(spindle::time::sleep_future(d));
                        Box::pin(async move { task.await.unwrap() })
                    });
                    cancel_an_upload(channel, &probe, sleep)
                }
                false => {
                    let p = probe.clone();
                    rt.block_on(move || cancel_an_upload(channel, &p, Arc::new(common::spindle_sleep)))
                }
            };
            let expected = if typed { Err(Code::Cancelled) } else { Ok(1) };
            assert_eq!(outcome, Some(expected), "typed: {typed}, outside: {outside}");
        }
    }
}

/// An oversized message in an upload the handler reads in a task it spawned: the call ends
/// with RESOURCE_EXHAUSTED (the failing request side wakes the call) and the reader gets that
/// error, not a clean end nor the message.
#[test]
fn oversized_upload_fails_the_call_and_a_reader_the_handler_spawned() {
    let rt = spindle::Runtime::new().unwrap();
    let probe = Probe::default();
    let channel = Channel::new()
        .max_request_message_size(1000)
        .add_typed_service(TestServiceServer::new(probe.clone()));
    let counters = Arc::new(Counters::default());
    let requests: Vec<_> = [10, 2000]
        .into_iter()
        .map(|size| StreamingInputCallRequest { payload: Some(payload(&counters, size)) })
        .collect();
    let outcome = probe.outcome.clone();
    let err = rt.block_on(move || {
        spindle::task::block_on(async move {
            let mut client = TestServiceClient::new(channel.clone());
            assert!(client.is_typed());
            let err = client.streaming_input_call(futures_util::stream::iter(requests)).await.unwrap_err();
            assert_eq!(channel.live_calls(), 0);
            for _ in 0..10_000 {
                if outcome.lock().unwrap().is_some() {
                    break;
                }
                spindle::time::sleep_future(Duration::from_millis(1)).await;
            }
            err
        })
    });
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("max_request_message_size"), "{err:?}");
    assert_eq!(*probe.outcome.lock().unwrap(), Some(Err(Code::ResourceExhausted)));
    common::check_no_leaks(&counters);
}

#[test]
fn runtime_dropped_under_a_typed_outside_call_is_unavailable() {
    let rt = spindle::Runtime::new().unwrap();
    let server = Server::new(common::spindle_sleep);
    let counters = server.counters.clone();
    let channel = Channel::new().with_handle(rt.handle()).add_typed_service(TestServiceServer::new(server));
    let dropper = std::thread::spawn(move || {
        while counters.started.load(SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(rt);
        counters
    });
    let mut client = TestServiceClient::new(channel.clone());
    assert!(client.is_typed());
    let request = SimpleRequest { sleep_ms: 60_000, ..Default::default() };
    let err = spindle::task::block_on(client.unary_call(request)).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    let counters = dropper.join().unwrap();
    // Later calls fail at once, streams too.
    let err = spindle::task::block_on(client.empty_call(Empty {})).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains("shut down"), "{err:?}");
    let err = spindle::task::block_on(client.streaming_output_call(StreamingOutputCallRequest::default()))
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(channel.live_calls(), 0);
    common::check_no_leaks(&counters);
}

#[test]
fn typed_outside_call_without_a_runtime_is_unavailable() {
    let server = Server::new(common::spindle_sleep);
    let channel = Channel::new().add_typed_service(TestServiceServer::new(server));
    let mut client = TestServiceClient::new(channel);
    assert!(client.is_typed());
    let err = spindle::task::block_on(client.empty_call(Empty {})).unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(err.message().contains("Channel::with_handle"), "{err:?}");
}

/// Request extensions reach the handler and response extensions the client, on both paths of
/// the in-process channel (the encoded path carries them in the `http` request and response).
#[test]
fn extensions_cross_both_ways() {
    let rt = spindle::Runtime::new().unwrap();
    let typed = Channel::new().add_typed_service(TestServiceServer::new(Probe::default()));
    let encoded = Channel::new().add_service(TestServiceServer::new(Probe::default()));
    rt.block_on(move || {
        spindle::task::block_on(async move {
            for (channel, path) in [(typed, "typed"), (encoded, "encoded")] {
                let mut request = Request::new(SimpleRequest::default());
                request.extensions_mut().insert(Marker("from the client"));
                let response = TestServiceClient::new(channel).unary_call(request).await.unwrap();
                assert_eq!(response.extensions().get::<Marker>(), Some(&Marker("from the handler")));
                let body = response.into_inner().payload.unwrap().body;
                assert_eq!(body, format!("{path} from the client UnaryCall").as_bytes());
            }
        })
    });
}

/// `AnyChannel::Local` takes the typed path; `AnyChannel::Remote` the encoded one.
#[test]
fn any_channel_local_is_typed() {
    let rt = spindle::Runtime::new().unwrap();
    let channel = Channel::new().add_typed_service(TestServiceServer::new(Probe::default()));
    rt.block_on(move || {
        let local = AnyChannel::from_uri("inproc:", &channel).unwrap();
        assert!(TestServiceClient::new(local.clone()).is_typed());
        let remote = AnyChannel::from_uri("http://127.0.0.1:9", &channel).unwrap();
        assert!(!TestServiceClient::new(remote).is_typed());
        spindle::task::block_on(async move {
            let response = TestServiceClient::new(local).unary_call(SimpleRequest::default()).await.unwrap();
            assert!(response.into_inner().payload.unwrap().body.starts_with(b"typed"));
        })
    });
}

/// A typed entry listing only UnaryCall (under another index): that method takes the typed
/// path, the others the encoded one, with the same client.
#[derive(Clone)]
struct OnlyUnary(TestServiceServer<Probe>);

impl tonic::server::NamedService for OnlyUnary {
    const NAME: &'static str = "spindle.interop.TestService";
}

impl tower_service::Service<http::Request<tonic::body::Body>> for OnlyUnary {
    type Response =
        <TestServiceServer<Probe> as tower_service::Service<http::Request<tonic::body::Body>>>::Response;
    type Error = std::convert::Infallible;
    type Future =
        <TestServiceServer<Probe> as tower_service::Service<http::Request<tonic::body::Body>>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        tower_service::Service::<http::Request<tonic::body::Body>>::poll_ready(&mut self.0, cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        self.0.call(request)
    }
}

static ONLY_UNARY: std::sync::OnceLock<[Method; 1]> = std::sync::OnceLock::new();

struct OnlyUnaryDispatch(Arc<dyn Dispatch>);

impl Dispatch for OnlyUnaryDispatch {
    fn methods(&self) -> &'static [Method] {
        ONLY_UNARY.get_or_init(|| [spindle_grpc_interop::pb::test_service_typed::METHODS[1]])
    }

    fn call(&self, method: usize, call: Call<'_>) -> Result<BoxHandler, Status> {
        assert_eq!(method, 0, "only UnaryCall is listed");
        self.0.call(1, call)
    }
}

impl TypedService for OnlyUnary {
    fn typed_entry(&self) -> Entry {
        self.0.typed_entry().map(OnlyUnaryDispatch)
    }
}

#[test]
fn a_partial_typed_entry_routes_method_by_method() {
    let rt = spindle::Runtime::new().unwrap();
    let channel = Channel::new().add_typed_service(OnlyUnary(TestServiceServer::new(Probe::default())));
    rt.block_on(move || {
        spindle::task::block_on(async move {
            let mut client = TestServiceClient::new(channel);
            assert!(client.is_typed());
            let body =
                client.unary_call(SimpleRequest::default()).await.unwrap().into_inner().payload.unwrap().body;
            assert!(body.starts_with(b"typed"), "{body:?}");
            let mut stream = client
                .streaming_output_call(StreamingOutputCallRequest::default())
                .await
                .unwrap()
                .into_inner();
            assert!(!stream.is_typed());
            let body = stream.message().await.unwrap().unwrap().payload.unwrap().body;
            assert_eq!(body, b"encoded".as_slice());
        })
    });
}

/// A handler that is not what the route promised never gets a wrong message: a slot of the
/// wrong type is INTERNAL (exercised through a dispatch that answers the wrong method).
#[test]
fn a_mismatched_slot_is_internal_not_a_wrong_message() {
    struct Wrong(Arc<dyn Dispatch>);
    impl Dispatch for Wrong {
        fn methods(&self) -> &'static [Method] {
            self.0.methods()
        }
        fn call(&self, method: usize, call: Call<'_>) -> Result<BoxHandler, Status> {
            // UnaryCall's request handed to EmptyCall's adapter.
            self.0.call(if method == 1 { 0 } else { method }, call)
        }
    }
    #[derive(Clone)]
    struct Miswired(TestServiceServer<Probe>);
    impl TypedService for Miswired {
        fn typed_entry(&self) -> Entry {
            self.0.typed_entry().map(Wrong)
        }
    }
    impl tonic::server::NamedService for Miswired {
        const NAME: &'static str = "spindle.interop.TestService";
    }
    impl tower_service::Service<http::Request<tonic::body::Body>> for Miswired {
        type Response = <OnlyUnary as tower_service::Service<http::Request<tonic::body::Body>>>::Response;
        type Error = std::convert::Infallible;
        type Future = <OnlyUnary as tower_service::Service<http::Request<tonic::body::Body>>>::Future;
        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            tower_service::Service::<http::Request<tonic::body::Body>>::poll_ready(&mut self.0, cx)
        }
        fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
            self.0.call(request)
        }
    }
    let rt = spindle::Runtime::new().unwrap();
    let channel = Channel::new().add_typed_service(Miswired(TestServiceServer::new(Probe::default())));
    rt.block_on(move || {
        spindle::task::block_on(async move {
            let err = TestServiceClient::new(channel).unary_call(SimpleRequest::default()).await.unwrap_err();
            assert_eq!(err.code(), Code::Internal, "{err:?}");
            assert!(err.message().contains("mismatched"), "{err:?}");
        })
    });
}
