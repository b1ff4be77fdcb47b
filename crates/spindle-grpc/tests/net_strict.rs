//! spindle-grpc's network server refuses what grpc-go's refuses, driven by a raw HTTP/2 client
//! (hyper's) so that each request can break one rule: a content type that is not gRPC (HTTP
//! 415), a malformed `grpc-timeout` (400), a method other than POST (405), each a
//! trailers-only response that runs no handler; and a unary or server-streaming call with a
//! second request message, or none (`INTERNAL`, cardinality), whose handler never runs.

mod net;

use std::sync::atomic::Ordering::SeqCst;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use net::{grpc_frame, grpc_request, raw_client, start, start_registered, Net};
use spindle_grpc_interop::pb::*;
use tonic::Code;

const UNARY: &str = "/spindle.interop.TestService/UnaryCall";
const SERVER_STREAMING: &str = "/spindle.interop.TestService/StreamingOutputCall";
const CLIENT_STREAMING: &str = "/spindle.interop.TestService/StreamingInputCall";

/// What the server answered.
#[derive(Debug)]
struct Answer {
    http: u16,
    /// The response's HEADERS frame ended the stream (a trailers-only response).
    trailers_only: bool,
    /// The gRPC status: from the headers of a trailers-only response, else from the trailers.
    status: tonic::Status,
    /// The response's data (gRPC frames).
    data: Bytes,
}

/// Sends `request` on a connection of its own and reads the whole answer.
fn ask(net: &Net, request: http::Request<Full<Bytes>>) -> Answer {
    let addr = net.addr;
    net.run(async move {
        let mut send = raw_client(addr).await;
        let response = send.send_request(request).await.unwrap();
        let http = response.status().as_u16();
        let trailers_only = http_body::Body::is_end_stream(response.body());
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap();
        let trailers = body.trailers().cloned().unwrap_or_default();
        let data = body.to_bytes();
        let from = if trailers_only { &headers } else { &trailers };
        let status = tonic::Status::from_header_map(from)
            .unwrap_or_else(|| panic!("no grpc-status (HTTP {http}): {headers:?} {trailers:?}"));
        if trailers_only {
            assert_eq!(headers.get("content-type").unwrap(), "application/grpc", "{headers:?}");
        }
        Answer { http, trailers_only, status, data }
    })
}

/// A well-formed unary request for 3 bytes.
fn unary(net: &Net) -> http::Request<Full<Bytes>> {
    let message = SimpleRequest { response_size: 3, ..Default::default() };
    grpc_request(net.addr, UNARY, grpc_frame(&message))
}

/// A refusal: HTTP `http`, gRPC `code`, trailers-only, nothing else.
fn assert_refused(answer: &Answer, http: u16, code: Code, what: &str) {
    assert_eq!(answer.http, http, "{what}: {answer:?}");
    assert_eq!(answer.status.code(), code, "{what}: {answer:?}");
    assert!(answer.trailers_only, "{what}: not a trailers-only response: {answer:?}");
    assert!(answer.data.is_empty(), "{what}: {answer:?}");
}

fn assert_served(answer: &Answer, what: &str) {
    assert_eq!((answer.http, answer.status.code()), (200, Code::Ok), "{what}: {answer:?}");
}

#[test]
fn a_content_type_that_is_not_grpc_is_415() {
    let net = start(|s| s);
    for content_type in [Some("application/json"), Some("text/plain"), Some("application/grpc-web"), None] {
        let mut request = unary(&net);
        match content_type {
            Some(value) => request.headers_mut().insert("content-type", value.parse().unwrap()),
            None => request.headers_mut().remove("content-type"),
        };
        let answer = ask(&net, request);
        assert_refused(&answer, 415, Code::InvalidArgument, &format!("{content_type:?}"));
        assert!(answer.status.message().contains("content-type"), "{answer:?}");
    }
    assert_eq!(net.counters.started.load(SeqCst), 0, "a handler ran for a request that is not gRPC");
    assert_eq!(net.serving().stats().calls_total, 0, "a refused request counted as a call");
    // gRPC's content type with a codec or parameters is gRPC.
    for content_type in ["application/grpc+proto", "application/grpc;charset=utf-8"] {
        let mut request = unary(&net);
        request.headers_mut().insert("content-type", content_type.parse().unwrap());
        assert_served(&ask(&net, request), content_type);
    }
    net.settle(0);
}

#[test]
fn a_malformed_grpc_timeout_is_400() {
    let net = start(|s| s);
    for timeout in ["1.5S", "+5S", "5s", "123456789S", "S", "5", "5 S"] {
        let mut request = unary(&net);
        request.headers_mut().insert("grpc-timeout", timeout.parse().unwrap());
        let answer = ask(&net, request);
        assert_refused(&answer, 400, Code::Internal, timeout);
        assert!(answer.status.message().starts_with("malformed grpc-timeout"), "{answer:?}");
    }
    assert_eq!(net.counters.started.load(SeqCst), 0, "a handler ran for a malformed grpc-timeout");
    for timeout in ["5S", "99999999H", "00000100m"] {
        let mut request = unary(&net);
        request.headers_mut().insert("grpc-timeout", timeout.parse().unwrap());
        assert_served(&ask(&net, request), timeout);
    }
    net.settle(0);
}

#[test]
fn a_method_other_than_post_is_405() {
    let net = start(|s| s);
    for method in [http::Method::GET, http::Method::PUT, http::Method::DELETE, http::Method::PATCH] {
        let mut request = unary(&net);
        *request.method_mut() = method.clone();
        let answer = ask(&net, request);
        assert_refused(&answer, 405, Code::Internal, method.as_str());
        assert!(answer.status.message().contains(method.as_str()), "{answer:?}");
    }
    // grpc-go's order: the content type is checked first.
    let mut request = unary(&net);
    *request.method_mut() = http::Method::GET;
    request.headers_mut().insert("content-type", "text/html".parse().unwrap());
    assert_refused(&ask(&net, request), 415, Code::InvalidArgument, "GET text/html");
    assert_eq!(net.counters.started.load(SeqCst), 0, "a handler ran for a request that is not POST");
    assert_served(&ask(&net, unary(&net)), "POST");
    net.settle(0);
}

/// One message of each single-request method, as bytes.
fn one_message(path: &str) -> Bytes {
    match path {
        UNARY => grpc_frame(&SimpleRequest { response_size: 3, ..Default::default() }),
        _ => grpc_frame(&StreamingOutputCallRequest {
            response_parameters: vec![ResponseParameters { size: 3, ..Default::default() }],
            ..Default::default()
        }),
    }
}

/// A unary or server-streaming call with two request messages, or none, ends with
/// `INTERNAL`, as grpc-go's does; the handler never runs and sends nothing.
fn assert_cardinality_enforced(net: &Net) {
    for path in [UNARY, SERVER_STREAMING] {
        let two = [one_message(path), one_message(path)].concat();
        let answer = ask(net, grpc_request(net.addr, path, two.into()));
        assert_eq!(answer.status.code(), Code::Internal, "{path}, two messages: {answer:?}");
        assert!(answer.status.message().contains("multiple request messages"), "{path}: {answer:?}");
        assert!(answer.data.is_empty(), "{path}: the handler answered two messages: {answer:?}");
        let answer = ask(net, grpc_request(net.addr, path, Bytes::new()));
        assert_eq!(answer.status.code(), Code::Internal, "{path}, no message: {answer:?}");
        assert!(answer.status.message().contains("no request message"), "{path}: {answer:?}");
        assert!(answer.data.is_empty(), "{path}: {answer:?}");
    }
    assert_eq!(net.counters.started.load(SeqCst), 0, "a handler ran on a cardinality violation");
    // One message is served; a client-streaming method takes several, or none.
    for path in [UNARY, SERVER_STREAMING] {
        let answer = ask(net, grpc_request(net.addr, path, one_message(path)));
        assert_served(&answer, path);
        assert!(!answer.data.is_empty(), "{path}: no response message");
    }
    let upload = StreamingInputCallRequest::default();
    let three = [grpc_frame(&upload), grpc_frame(&upload), grpc_frame(&upload)].concat();
    assert_served(&ask(net, grpc_request(net.addr, CLIENT_STREAMING, three.into())), "client streaming, 3");
    assert_served(&ask(net, grpc_request(net.addr, CLIENT_STREAMING, Bytes::new())), "client streaming, 0");
    net.settle(0);
}

#[test]
fn a_single_request_method_takes_exactly_one_message_with_a_method_table() {
    assert_cardinality_enforced(&start(|s| s));
}

#[test]
fn a_single_request_method_takes_exactly_one_message_registered_typed() {
    assert_cardinality_enforced(&start_registered(|channel, svc| channel.add_typed_service(svc), |s| s));
}

/// Without a method table the channel cannot tell a unary method from a streaming one: tonic's
/// server reads the first message of a unary call and drops the rest (the README says so);
/// it refuses an empty one with `INTERNAL` itself.
#[test]
fn without_a_method_table_tonic_takes_the_first_message() {
    let net = start_registered(|channel, svc| channel.add_service(svc), |s| s);
    let two = [one_message(UNARY), one_message(UNARY)].concat();
    assert_served(&ask(&net, grpc_request(net.addr, UNARY, two.into())), "unary, two messages");
    let answer = ask(&net, grpc_request(net.addr, UNARY, Bytes::new()));
    assert_eq!(answer.status.code(), Code::Internal, "unary, no message: {answer:?}");
    net.settle(0);
}
