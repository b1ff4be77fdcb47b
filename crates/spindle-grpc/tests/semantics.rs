//! Semantics beyond the interop cases: panics, message size limits, interceptors on both
//! sides, backpressure, cancellation seen by a handler's reader, a runtime shut down under a
//! call, a channel without a runtime. Where a case makes sense over TCP it runs there too with
//! the same assertions; every channel case also runs on the typed fast path (`_typed`,
//! `_typed_outside`: the service registered typed), with the same assertions.

mod common;

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use common::{Env, Kind, Transport};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::test_service_typed::TestServiceClient as TypedClient;
use spindle_grpc_interop::pb::*;
use spindle_grpc_interop::{payload, Counters, Server, SleepFn};
use tonic::{Code, Request, Status};

// ---------------------------------------------------------------------------------------
// Panics: INTERNAL, and the channel keeps serving. (tonic over TCP has no such isolation: a
// panic unwinds the connection's task, so this runs in process only.)

async fn panics<T: Transport>(env: Env<T>) {
    let request = SimpleRequest { panic: true, ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    assert_eq!(err.code(), Code::Internal, "{err:?}");
    assert!(err.message().contains("panicked"), "{err:?}");
    // A stream that panics after its first message.
    let request = StreamingOutputCallRequest {
        response_parameters: vec![
            ResponseParameters { size: 8, ..Default::default() },
            // After a pause, so that tonic's encoder sends the first message on its own (it
            // batches ready messages into one frame).
            ResponseParameters { size: 8, panic: true, interval_us: 10_000 },
        ],
        ..Default::default()
    };
    let mut stream = env.client().streaming_output_call(request).await.unwrap().into_inner();
    assert!(stream.message().await.unwrap().is_some());
    assert_eq!(stream.message().await.unwrap_err().code(), Code::Internal);
    // Still serving.
    env.client().empty_call(Empty {}).await.unwrap();
    let request = SimpleRequest { response_size: 5, ..Default::default() };
    assert_eq!(env.client().unary_call(request).await.unwrap().into_inner().payload.unwrap().body.len(), 5);
}

#[test]
fn panics_inproc() {
    common::run_inproc(panics);
}

#[test]
fn panics_outside() {
    common::run_outside(panics);
}

/// Over spindle-grpc's network server the same isolation holds: the panic is the call's, the
/// server keeps serving.
#[test]
fn panics_typed() {
    common::run_typed(panics);
}

#[test]
fn panics_typed_outside() {
    common::run_typed_outside(panics);
}

#[test]
fn panics_net() {
    common::run_net(false, panics);
}

// ---------------------------------------------------------------------------------------
// Message size limits.
//
// The gRPC spec (and grpc-go, grpc-java) reports a message above a size limit as
// RESOURCE_EXHAUSTED; tonic 0.14's codec says OUT_OF_RANGE. Across spindle-grpc's channel,
// every limit the channel can see ends the call with RESOURCE_EXHAUSTED: its own limits (4 MiB
// each way by default), the server's codec limits (tonic's status, recognised by its code and
// message), the client's encoding limit (an error of the request body the channel reads). Over
// tonic's TCP transport the same cases give OUT_OF_RANGE (INTERNAL for the client's encoding
// limit: the request body's error resets the HTTP/2 stream). The one limit checked after the
// channel, a client's own decoding limit, is OUT_OF_RANGE on every transport (the README says
// so, and says to lower the channel's limit instead).

/// tonic's wording of its codec limits, by which spindle-grpc recognises them. The TCP cases
/// assert it on tonic's own statuses: a tonic upgrade that changes it fails them.
const TONIC_DECODE_TEXT: &str = "Error, decoded message length too large: found ";
const TONIC_ENCODE_TEXT: &str = "Error, encoded message length too large: found ";

const MIB: usize = 1024 * 1024;

/// The status for a size limit: RESOURCE_EXHAUSTED across the channel, `tcp` over TCP; the
/// message starts with `text`.
fn assert_limit(kind: Kind, err: &Status, tcp: Code, text: &str) {
    let code = if kind == Kind::Tcp { tcp } else { Code::ResourceExhausted };
    assert_eq!(err.code(), code, "{err:?}");
    assert!(err.message().starts_with(text), "{err:?}");
}

/// The channel's own limit: RESOURCE_EXHAUSTED naming the size, the limit and the setting.
fn assert_channel_limit(err: &Status, what: &str, limit: usize) {
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    let message = err.message();
    assert!(message.contains(&format!("{what} message of ")), "{err:?}");
    assert!(message.contains(&format!("limit of {limit} bytes")), "{err:?}");
    assert!(message.contains(&format!("max_{what}_message_size")), "{err:?}");
}

/// With every limit at its default: 5 MiB requests and responses are refused.
async fn size_limits_by_default<T: Transport>(env: Env<T>) {
    // A 5 MiB request: refused by the channel; over TCP by tonic's server (4 MiB by default).
    let request = SimpleRequest { payload: Some(payload(&env.counters, 5 * MIB)), ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    match env.kind {
        Kind::Inproc | Kind::Outside | Kind::Typed | Kind::TypedOutside | Kind::Net | Kind::NetOutside => {
            assert_channel_limit(&err, "request", 4 * MIB)
        }
        Kind::Tcp => assert_limit(env.kind, &err, Code::OutOfRange, TONIC_DECODE_TEXT),
    }
    assert_eq!(env.counters.started.load(SeqCst), 0, "the handler got the oversized request");

    // A 5 MiB response: refused by the channel; over TCP by tonic's client (4 MiB by default).
    let request = SimpleRequest { response_size: 5 * MIB as i32, ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    match env.kind {
        Kind::Inproc | Kind::Outside | Kind::Typed | Kind::TypedOutside | Kind::Net | Kind::NetOutside => {
            assert_channel_limit(&err, "response", 4 * MIB)
        }
        Kind::Tcp => assert_limit(env.kind, &err, Code::OutOfRange, TONIC_DECODE_TEXT),
    }

    // A response stream: the messages before the oversized one arrive (tonic's encoder puts
    // all three in one chunk: the channel cuts it before the third), then the status.
    let request = StreamingOutputCallRequest {
        response_parameters: [10, 20, 5 * MIB as i32, 30]
            .map(|size| ResponseParameters { size, ..Default::default() })
            .to_vec(),
        ..Default::default()
    };
    let mut stream = env.client().streaming_output_call(request).await.unwrap().into_inner();
    assert_eq!(stream.message().await.unwrap().unwrap().payload.unwrap().body.len(), 10);
    assert_eq!(stream.message().await.unwrap().unwrap().payload.unwrap().body.len(), 20);
    let err = stream.message().await.unwrap_err();
    match env.kind {
        Kind::Inproc | Kind::Outside | Kind::Typed | Kind::TypedOutside | Kind::Net | Kind::NetOutside => {
            assert_channel_limit(&err, "response", 4 * MIB);
            let counters = env.counters.clone();
            env.eventually("the handler was dropped", move || counters.live_handlers.load(SeqCst) == 0).await;
            assert_eq!(env.counters.dropped_early.load(SeqCst), 1, "the stream's handler was not dropped");
        }
        Kind::Tcp => assert_limit(env.kind, &err, Code::OutOfRange, TONIC_DECODE_TEXT),
    }
    drop(stream);

    // An upload whose third message is too large: the handler is dropped (it never sees the
    // end of a truncated upload).
    let requests: Vec<_> = [1000, 2000, 5 * MIB]
        .into_iter()
        .map(|size| StreamingInputCallRequest { payload: Some(payload(&env.counters, size)) })
        .collect();
    let err = env.client().streaming_input_call(futures_util::stream::iter(requests)).await.unwrap_err();
    match env.kind {
        Kind::Inproc | Kind::Outside | Kind::Typed | Kind::TypedOutside | Kind::Net | Kind::NetOutside => {
            assert_channel_limit(&err, "request", 4 * MIB);
            let counters = env.counters.clone();
            env.eventually("the handler was dropped", move || counters.live_handlers.load(SeqCst) == 0).await;
            assert_eq!(env.counters.dropped_early.load(SeqCst), 2, "the upload's handler was not dropped");
        }
        Kind::Tcp => assert_limit(env.kind, &err, Code::OutOfRange, TONIC_DECODE_TEXT),
    }
}

#[test]
fn size_limits_by_default_inproc() {
    common::run_inproc(size_limits_by_default);
}

#[test]
fn size_limits_by_default_outside() {
    common::run_outside(size_limits_by_default);
}

#[test]
fn size_limits_by_default_typed() {
    common::run_typed(size_limits_by_default);
}

#[test]
fn size_limits_by_default_typed_outside() {
    common::run_typed_outside(size_limits_by_default);
}

#[test]
fn size_limits_by_default_net() {
    common::run_net(false, size_limits_by_default);
}

#[test]
fn size_limits_by_default_tcp() {
    common::run_tcp(size_limits_by_default);
}

fn limited(sleep: SleepFn) -> (TestServiceServer<Server>, Arc<Counters>) {
    let server = Server::new(sleep);
    let counters = server.counters.clone();
    (TestServiceServer::new(server).max_decoding_message_size(1024).max_encoding_message_size(4096), counters)
}

/// tonic's codec limits, set on the generated server and client.
async fn tonic_size_limits<T: Transport>(env: Env<T>) {
    // The server refuses a request above its decoding limit.
    let request = SimpleRequest { payload: Some(payload(&env.counters, 2048)), ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    assert_limit(env.kind, &err, Code::OutOfRange, TONIC_DECODE_TEXT);
    // The server refuses to send a response above its encoding limit.
    let request = SimpleRequest { response_size: 8192, ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    assert_limit(env.kind, &err, Code::OutOfRange, TONIC_ENCODE_TEXT);
    // A handler's own OUT_OF_RANGE crosses unchanged.
    let status = EchoStatus { code: Code::OutOfRange as i32, message: "index 7 is out of range".into() };
    let request = SimpleRequest { response_status: Some(status), ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    assert_eq!((err.code(), err.message()), (Code::OutOfRange, "index 7 is out of range"));
    // The client refuses to send a request above its encoding limit: its request body fails,
    // the channel ends the call with that (the handler never starts); over HTTP/2 the body's
    // error resets the stream: INTERNAL.
    let started = env.counters.started.load(SeqCst);
    let request = SimpleRequest { payload: Some(payload(&env.counters, 2048)), ..Default::default() };
    let err = env.client().max_encoding_message_size(1024).unary_call(request).await.unwrap_err();
    assert_limit(env.kind, &err, Code::Internal, if env.kind == Kind::Tcp { "" } else { TONIC_ENCODE_TEXT });
    if env.kind != Kind::Tcp {
        assert_eq!(env.counters.started.load(SeqCst), started, "the handler got the request");
    }
    // The client refuses a response above its own decoding limit: tonic checks it in the
    // client, after any transport, so it stays OUT_OF_RANGE everywhere (documented in the
    // README; a channel limit below it gives RESOURCE_EXHAUSTED instead).
    let request = SimpleRequest { response_size: 2048, ..Default::default() };
    let err = env.client().max_decoding_message_size(1024).unary_call(request).await.unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    assert!(err.message().starts_with(TONIC_DECODE_TEXT), "{err:?}");
    // Within the limits.
    let request = SimpleRequest { response_size: 1000, ..Default::default() };
    env.client().max_decoding_message_size(1024).unary_call(request).await.unwrap();
}

#[test]
fn tonic_size_limits_inproc() {
    common::run_inproc_with(limited, tonic_size_limits);
}

#[test]
fn tonic_size_limits_outside() {
    common::run_outside_with(limited, tonic_size_limits);
}

#[test]
fn tonic_size_limits_typed() {
    common::run_typed_on(limited, |c| c, tonic_size_limits);
}

#[test]
fn tonic_size_limits_typed_outside() {
    common::run_typed_outside_on(limited, |c| c, tonic_size_limits);
}

#[test]
fn tonic_size_limits_net() {
    common::run_net_on(false, limited, |c| c, tonic_size_limits);
}

#[test]
fn tonic_size_limits_tcp() {
    common::run_tcp_with(limited, tonic_size_limits);
}

fn raised(sleep: SleepFn) -> (TestServiceServer<Server>, Arc<Counters>) {
    let server = Server::new(sleep);
    let counters = server.counters.clone();
    (TestServiceServer::new(server).max_decoding_message_size(8 * MIB), counters)
}

fn raise(channel: spindle_grpc::Channel) -> spindle_grpc::Channel {
    channel.max_request_message_size(8 * MIB).max_response_message_size(8 * MIB)
}

/// Raising the limits (the channel's, the server's decoding, the client's decoding) lets
/// 5 MiB messages through both ways.
async fn raised_size_limits<T: Transport>(env: Env<T>) {
    let request = SimpleRequest {
        payload: Some(payload(&env.counters, 5 * MIB)),
        response_size: 5 * MIB as i32,
        ..Default::default()
    };
    let response = env.client().max_decoding_message_size(8 * MIB).unary_call(request).await.unwrap();
    assert_eq!(response.into_inner().payload.unwrap().body.len(), 5 * MIB);
}

#[test]
fn raised_size_limits_inproc() {
    common::run_inproc_on(raised, raise, raised_size_limits);
}

#[test]
fn raised_size_limits_net() {
    common::run_net_on(false, raised, raise, raised_size_limits);
}

#[test]
fn raised_size_limits_outside() {
    common::run_outside_on(raised, raise, raised_size_limits);
}

#[test]
fn raised_size_limits_typed() {
    common::run_typed_on(raised, raise, raised_size_limits);
}

#[test]
fn raised_size_limits_typed_outside() {
    common::run_typed_outside_on(raised, raise, raised_size_limits);
}

#[test]
fn raised_size_limits_tcp() {
    common::run_tcp_with(raised, raised_size_limits);
}

/// The channel's limits below tonic's: RESOURCE_EXHAUSTED from the channel, where a client's
/// own decoding limit would give OUT_OF_RANGE.
async fn lowered_channel_limits(env: Env<spindle_grpc::Channel>) {
    let request = SimpleRequest { payload: Some(payload(&env.counters, 2048)), ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    assert_channel_limit(&err, "request", 1024);
    let request = SimpleRequest { response_size: 2048, ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    assert_channel_limit(&err, "response", 1024);
    let request = SimpleRequest {
        payload: Some(payload(&env.counters, 900)),
        response_size: 1000,
        ..Default::default()
    };
    env.client().unary_call(request).await.unwrap();
}

fn lower(channel: spindle_grpc::Channel) -> spindle_grpc::Channel {
    channel.max_request_message_size(1024).max_response_message_size(1024)
}

#[test]
fn lowered_channel_limits_inproc() {
    common::run_inproc_on(common::service, lower, lowered_channel_limits);
}

#[test]
fn lowered_channel_limits_outside() {
    common::run_outside_on(common::service, lower, lowered_channel_limits);
}

#[test]
fn lowered_channel_limits_typed() {
    common::run_typed_on(common::service, lower, lowered_channel_limits);
}

#[test]
fn lowered_channel_limits_typed_outside() {
    common::run_typed_outside_on(common::service, lower, lowered_channel_limits);
}

/// A gRPC frame: compressed flag 0, big-endian length, the message.
fn grpc_frame(message: &impl prost::Message) -> Vec<u8> {
    let encoded = message.encode_to_vec();
    let mut frame = vec![0];
    frame.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    frame.extend_from_slice(&encoded);
    frame
}

/// A body of the given chunks (then `trailers`, if any).
struct Chunks(std::collections::VecDeque<http_body::Frame<bytes::Bytes>>);

impl Chunks {
    /// `bytes` cut into chunks of `size` bytes: every length prefix of a message larger than
    /// `size` is split across two chunks.
    fn new(bytes: &[u8], size: usize, trailers: Option<http::HeaderMap>) -> Chunks {
        let mut frames: std::collections::VecDeque<_> =
            bytes.chunks(size).map(|c| http_body::Frame::data(bytes::Bytes::copy_from_slice(c))).collect();
        frames.extend(trailers.map(http_body::Frame::trailers));
        Chunks(frames)
    }
}

impl http_body::Body for Chunks {
    type Data = bytes::Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Status>>> {
        std::task::Poll::Ready(self.0.pop_front().map(Ok))
    }
}

/// The call's status from a raw response: its headers (trailers-only) or its trailers.
async fn raw_status(response: http::Response<spindle_grpc::ResponseBody>) -> Status {
    if let Some(status) = Status::from_header_map(response.headers()) {
        return status;
    }
    let mut body = response.into_body();
    loop {
        use http_body::Body as _;
        let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
        match frame {
            Some(Ok(frame)) if frame.is_trailers() => {
                return Status::from_header_map(frame.trailers_ref().unwrap()).expect("a status")
            }
            Some(Ok(_)) => continue,
            Some(Err(status)) => return status,
            None => panic!("the body ended without a status"),
        }
    }
}

/// Requests whose frames are split across body chunks (a length prefix in two chunks, a
/// message over many), sent as a raw body through the channel to the generated server.
#[test]
fn request_frames_split_across_chunks() {
    let rt = spindle::Runtime::new().unwrap();
    let server = Server::new(common::spindle_sleep);
    let counters = server.counters.clone();
    let channel = spindle_grpc::Channel::new()
        .max_request_message_size(1000)
        .add_service(TestServiceServer::new(server));
    let message = |size: usize| StreamingInputCallRequest { payload: Some(payload(&counters, size)) };
    let within: Vec<u8> = [grpc_frame(&message(300)), grpc_frame(&message(900))].concat();
    let above: Vec<u8> =
        [grpc_frame(&message(300)), grpc_frame(&message(2000)), grpc_frame(&message(1))].concat();
    let results = rt.block_on(move || {
        spindle::task::block_on(async move {
            let mut results = Vec::new();
            for bytes in [within, above] {
                let request = http::Request::post("/spindle.interop.TestService/StreamingInputCall")
                    .header("content-type", "application/grpc")
                    .header("te", "trailers")
                    .body(tonic::body::Body::new(Chunks::new(&bytes, 3, None)))
                    .unwrap();
                let mut channel = channel.clone();
                let response = tower_service::Service::call(&mut channel, request).await.unwrap();
                results.push(raw_status(response).await);
            }
            results
        })
    });
    assert_eq!(results[0].code(), Code::Ok, "{:?}", results[0]);
    assert_channel_limit(&results[1], "request", 1000);
    assert_eq!(counters.dropped_early.load(SeqCst), 1, "the upload's handler was not dropped");
    common::check_no_leaks(&counters);
}

/// A raw service under its own name whose responses are pre-made gRPC frames, cut into chunks
/// of 3 bytes, then an OK status.
#[derive(Clone)]
struct Split(Vec<u8>);

impl tonic::server::NamedService for Split {
    const NAME: &'static str = "spindle.test.Split";
}

impl tower_service::Service<http::Request<tonic::body::Body>> for Split {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<tonic::body::Body>) -> Self::Future {
        let mut trailers = http::HeaderMap::new();
        Status::ok("").add_header(&mut trailers).unwrap();
        let body = tonic::body::Body::new(Chunks::new(&self.0, 3, Some(trailers)));
        let response =
            http::Response::builder().header("content-type", "application/grpc").body(body).unwrap();
        std::future::ready(Ok(response))
    }
}

#[test]
fn response_frames_split_across_chunks() {
    let response = |size: usize| SimpleResponse { payload: Some(Payload { body: vec![7u8; size].into() }) };
    let frames: Vec<u8> =
        [grpc_frame(&response(100)), grpc_frame(&response(2000)), grpc_frame(&response(5))].concat();
    let rt = spindle::Runtime::new().unwrap();
    let got = rt.block_on(move || {
        spindle::task::block_on(async move {
            let mut got = Vec::new();
            for limit in [10_000, 1000] {
                let channel = spindle_grpc::Channel::new()
                    .max_response_message_size(limit)
                    .add_service(Split(frames.clone()));
                let mut grpc = tonic::client::Grpc::new(channel.clone());
                let codec = tonic_prost::ProstCodec::<Empty, SimpleResponse>::default();
                let path = "/spindle.test.Split/Call".parse().unwrap();
                let mut stream =
                    grpc.server_streaming(Request::new(Empty {}), path, codec).await.unwrap().into_inner();
                let mut sizes = Vec::new();
                let end = loop {
                    match stream.message().await {
                        Ok(Some(m)) => sizes.push(m.payload.unwrap().body.len()),
                        Ok(None) => break Ok(()),
                        Err(status) => break Err(status),
                    }
                };
                got.push((sizes, end));
                assert_eq!(channel.live_calls(), 0);
            }
            got
        })
    });
    assert_eq!(got[0].0, [100, 2000, 5]);
    assert!(got[0].1.is_ok(), "{:?}", got[0].1);
    // The message before the oversized one arrives; the oversized one does not, nor any after.
    assert_eq!(got[1].0, [100]);
    assert_channel_limit(got[1].1.as_ref().unwrap_err(), "response", 1000);
}

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
