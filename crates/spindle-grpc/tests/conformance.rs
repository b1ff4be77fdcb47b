//! The conformance suite, modelled on the gRPC interop cases, run with the same assertions on
//! spindle-grpc's Channel (client in a fiber: `inproc`; client on a plain thread: `outside`),
//! on its typed fast path (`typed`, `typed_outside`: the same with the service registered
//! typed, messages moved and never encoded), over spindle-grpc's network transport (`net`,
//! `net_outside`) and on tonic's transport over loopback TCP (`tcp`).
//!
//! Where tonic over TCP departs from the gRPC spec, the case says so and asserts each side's
//! behaviour: `timeout_on_sleeping_server` (tonic's server reports an expired `grpc-timeout`
//! as `CANCELLED`; the spec and spindle-grpc say `DEADLINE_EXCEEDED`). Message size limits,
//! which are not interop cases, are in `tests/semantics.rs` with the same pattern: across the
//! channel a message above a limit gives `RESOURCE_EXHAUSTED` (the spec's code), over tonic's
//! TCP transport `OUT_OF_RANGE` (tonic 0.14's codec), and each side's code is asserted.

mod common;

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use common::{Env, Kind, Transport};
use spindle_grpc_interop::pb::*;
use spindle_grpc_interop::{payload, ECHO_INITIAL, ECHO_TRAILING};
use tonic::{Code, Request};

fn params(sizes: &[i32]) -> Vec<ResponseParameters> {
    sizes.iter().map(|&size| ResponseParameters { size, ..Default::default() }).collect()
}

pub async fn empty_unary<T: Transport>(env: Env<T>) {
    let response = env.client().empty_call(Empty {}).await.unwrap();
    assert_eq!(response.into_inner(), Empty {});
}

pub async fn large_unary<T: Transport>(env: Env<T>) {
    let request = SimpleRequest {
        response_size: 314_159,
        payload: Some(payload(&env.counters, 271_828)),
        ..Default::default()
    };
    let response = env.client().unary_call(request).await.unwrap().into_inner();
    let body = response.payload.unwrap().body;
    assert_eq!(body.len(), 314_159);
    assert!(body.iter().enumerate().all(|(i, &b)| b == i as u8));
}

pub async fn client_streaming<T: Transport>(env: Env<T>) {
    let requests: Vec<_> = [27_182, 8, 1_828, 45_904]
        .into_iter()
        .map(|size| StreamingInputCallRequest { payload: Some(payload(&env.counters, size)) })
        .collect();
    let response = env.client().streaming_input_call(futures_util::stream::iter(requests)).await.unwrap();
    assert_eq!(response.into_inner().aggregated_payload_size, 74_922);
}

pub async fn server_streaming<T: Transport>(env: Env<T>) {
    let sizes = [31_415, 9, 2_653, 58_979];
    let request = StreamingOutputCallRequest { response_parameters: params(&sizes), ..Default::default() };
    let mut stream = env.client().streaming_output_call(request).await.unwrap().into_inner();
    let mut got = Vec::new();
    while let Some(msg) = stream.message().await.unwrap() {
        got.push(msg.payload.unwrap().body.len() as i32);
    }
    assert_eq!(got, sizes);
}

pub async fn ping_pong<T: Transport>(env: Env<T>) {
    let sizes = [31_415, 9, 2_653, 58_979];
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let mut responses = env
        .client()
        .full_duplex_call(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    for size in sizes {
        let request =
            StreamingOutputCallRequest { response_parameters: params(&[size]), ..Default::default() };
        tx.send(request).await.unwrap();
        let msg = responses.message().await.unwrap().expect("a response per request");
        assert_eq!(msg.payload.unwrap().body.len(), size as usize);
    }
    drop(tx);
    assert!(responses.message().await.unwrap().is_none());
}

pub async fn empty_stream<T: Transport>(env: Env<T>) {
    let requests = futures_util::stream::empty::<StreamingOutputCallRequest>();
    let mut responses = env.client().full_duplex_call(requests).await.unwrap().into_inner();
    assert!(responses.message().await.unwrap().is_none());
}

pub async fn custom_metadata<T: Transport>(env: Env<T>) {
    let initial = "test_initial_metadata_value";
    let trailing = tonic::metadata::MetadataValue::from_bytes(b"\x0a\x0b\x0a\x0b\x0a\x0b");
    // Unary: initial metadata echoed as a header, trailing as a trailer (merged into the
    // response's metadata by tonic's unary client).
    let mut request = Request::new(SimpleRequest { response_size: 314_159, ..Default::default() });
    request.metadata_mut().insert(ECHO_INITIAL, initial.parse().unwrap());
    request.metadata_mut().insert_bin(ECHO_TRAILING, trailing.clone());
    let response = env.client().unary_call(request).await.unwrap();
    assert_eq!(response.metadata().get(ECHO_INITIAL).unwrap(), initial);
    assert_eq!(response.metadata().get_bin(ECHO_TRAILING).unwrap(), &trailing);
    assert_eq!(response.into_inner().payload.unwrap().body.len(), 314_159);
    // Full duplex: the same, with the trailer read from the stream's trailers.
    let request =
        StreamingOutputCallRequest { response_parameters: params(&[314_159]), ..Default::default() };
    let mut request = Request::new(futures_util::stream::iter([request]));
    request.metadata_mut().insert(ECHO_INITIAL, initial.parse().unwrap());
    request.metadata_mut().insert_bin(ECHO_TRAILING, trailing.clone());
    let response = env.client().full_duplex_call(request).await.unwrap();
    assert_eq!(response.metadata().get(ECHO_INITIAL).unwrap(), initial);
    let mut stream = response.into_inner();
    assert_eq!(stream.message().await.unwrap().unwrap().payload.unwrap().body.len(), 314_159);
    assert!(stream.message().await.unwrap().is_none());
    let trailers = stream.trailers().await.unwrap().expect("trailers");
    assert_eq!(trailers.get_bin(ECHO_TRAILING).unwrap(), &trailing);
}

pub async fn status_code_and_message<T: Transport>(env: Env<T>) {
    let message = "test status message";
    let status = EchoStatus { code: 2, message: message.into() };
    let request = SimpleRequest { response_status: Some(status.clone()), ..Default::default() };
    let err = env.client().unary_call(request).await.unwrap_err();
    assert_eq!(err.code(), Code::Unknown);
    assert_eq!(err.message(), message);
    let request = StreamingOutputCallRequest { response_status: Some(status), ..Default::default() };
    let mut stream =
        env.client().full_duplex_call(futures_util::stream::iter([request])).await.unwrap().into_inner();
    let err = stream.message().await.unwrap_err();
    assert_eq!(err.code(), Code::Unknown);
    assert_eq!(err.message(), message);
}

pub async fn unimplemented_method<T: Transport>(env: Env<T>) {
    let err = env.client().unimplemented_call(Empty {}).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}

pub async fn unimplemented_service<T: Transport>(env: Env<T>) {
    let err = env.unimplemented_client().unimplemented_call(Empty {}).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}

pub async fn cancel_after_begin<T: Transport>(env: Env<T>) {
    // A client stream that never sends: the handler starts and waits for the first message.
    let (tx, rx) = tokio::sync::mpsc::channel::<StreamingInputCallRequest>(1);
    let mut client = env.client();
    let call = client.streaming_input_call(tokio_stream::wrappers::ReceiverStream::new(rx));
    let counters = env.counters.clone();
    let started = env.eventually("the handler started", move || counters.started.load(SeqCst) == 1);
    match futures_util::future::select(Box::pin(call), Box::pin(started)).await {
        futures_util::future::Either::Left((result, _)) => panic!("the call ended by itself: {result:?}"),
        futures_util::future::Either::Right(((), call)) => drop(call), // cancel
    }
    let counters = env.counters.clone();
    env.eventually("the handler was dropped", move || counters.live_handlers.load(SeqCst) == 0).await;
    match env.kind {
        // The handler's future is dropped (it never sees a clean end of its input).
        Kind::Inproc | Kind::Outside | Kind::Typed | Kind::TypedOutside | Kind::Net | Kind::NetOutside => {
            assert_eq!(env.counters.dropped_early.load(SeqCst), 1)
        }
        // tonic over HTTP/2 ends the upload with END_STREAM when the call is dropped: the
        // handler sees a normal end of stream and finishes, as if the client had completed.
        Kind::Tcp => assert_eq!(env.counters.dropped_early.load(SeqCst), 0),
    }
    drop(tx);
}

pub async fn cancel_after_first_response<T: Transport>(env: Env<T>) {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let mut responses = env
        .client()
        .full_duplex_call(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let request = StreamingOutputCallRequest { response_parameters: params(&[31_415]), ..Default::default() };
    tx.send(request).await.unwrap();
    let msg = responses.message().await.unwrap().unwrap();
    assert_eq!(msg.payload.unwrap().body.len(), 31_415);
    drop(responses); // cancel, with the request stream still open
    if env.kind == Kind::Tcp {
        // tonic's client keeps the HTTP/2 stream (and so the handler) open while the request
        // stream is: the call ends only when the client also closes its requests.
        drop(tx);
        let counters = env.counters.clone();
        env.eventually("the handler ended", move || counters.live_handlers.load(SeqCst) == 0).await;
        return;
    }
    let counters = env.counters.clone();
    env.eventually("the handler was dropped", move || counters.live_handlers.load(SeqCst) == 0).await;
    assert_eq!(env.counters.dropped_early.load(SeqCst), 1);
    drop(tx);
}

pub async fn timeout_on_sleeping_server<T: Transport>(env: Env<T>) {
    let mut request = Request::new(SimpleRequest { sleep_ms: 10_000, ..Default::default() });
    request.set_timeout(Duration::from_millis(20));
    let err = env.client().unary_call(request).await.unwrap_err();
    match env.kind {
        // The gRPC spec: the deadline passed, DEADLINE_EXCEEDED.
        Kind::Inproc | Kind::Outside | Kind::Typed | Kind::TypedOutside | Kind::Net | Kind::NetOutside => {
            assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}")
        }
        // tonic's server reports its grpc-timeout as CANCELLED ("Timeout expired").
        Kind::Tcp => assert_eq!(err.code(), Code::Cancelled, "{err:?}"),
    }
    let counters = env.counters.clone();
    env.eventually("the sleeping handler was dropped", move || counters.live_handlers.load(SeqCst) == 0)
        .await;
    assert_eq!(env.counters.dropped_early.load(SeqCst), 1);
    // The deadline also bounds a stream (the spec's deadline is per call; tonic's server only
    // enforces it until the response headers).
    let mut request = Request::new(StreamingOutputCallRequest {
        response_parameters: vec![
            ResponseParameters { size: 1, ..Default::default() },
            ResponseParameters { size: 1, interval_us: 10_000_000, ..Default::default() },
        ],
        ..Default::default()
    });
    request.set_timeout(Duration::from_millis(50));
    if env.kind != Kind::Tcp {
        let mut stream = env.client().streaming_output_call(request).await.unwrap().into_inner();
        assert!(stream.message().await.unwrap().is_some());
        let err = stream.message().await.unwrap_err();
        assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
        let counters = env.counters.clone();
        env.eventually("the stream's handler was dropped", move || counters.live_handlers.load(SeqCst) == 0)
            .await;
    }
}

/// Each case on each transport.
macro_rules! conformance {
    ($($case:ident),* $(,)?) => {
        mod inproc {
            $( #[test] fn $case() { crate::common::run_inproc(crate::$case); } )*
        }
        mod outside {
            $( #[test] fn $case() { crate::common::run_outside(crate::$case); } )*
        }
        mod typed {
            $( #[test] fn $case() { crate::common::run_typed(crate::$case); } )*
        }
        mod typed_outside {
            $( #[test] fn $case() { crate::common::run_typed_outside(crate::$case); } )*
        }
        mod tcp {
            $( #[test] fn $case() { crate::common::run_tcp(crate::$case); } )*
        }
        mod net {
            $( #[test] fn $case() { crate::common::run_net(false, crate::$case); } )*
        }
        mod net_outside {
            $( #[test] fn $case() { crate::common::run_net(true, crate::$case); } )*
        }
    };
}

conformance!(
    empty_unary,
    large_unary,
    client_streaming,
    server_streaming,
    ping_pong,
    empty_stream,
    custom_metadata,
    status_code_and_message,
    unimplemented_method,
    unimplemented_service,
    cancel_after_begin,
    cancel_after_first_response,
    timeout_on_sleeping_server,
);
