//! Semantics beyond the interop cases, part one: panics, message size limits and frames
//! split across chunks (part two, `semantics_flow.rs`: interceptors, backpressure,
//! cancellation, outside callers, many services). Where a case makes sense over TCP it runs
//! there too with the same assertions; every channel case also runs on the typed fast path
//! (`_typed`, `_typed_outside`: the service registered typed), with the same assertions.

mod common;

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use common::{assert_channel_limit, Env, Kind, Transport};
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
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
