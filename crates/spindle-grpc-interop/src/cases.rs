//! The client side of the gRPC interop cases (`doc/interop-test-descriptions.md` of
//! grpc/grpc, "Client"), written from the spec for `interop_client`: each case makes its calls
//! on any tonic transport and checks the answers; `Err` says what differed.

use std::time::Duration;

use bytes::Bytes;
use tonic::client::GrpcService;
use tonic::codec::CompressionEncoding;
use tonic::codegen::{Body as HttpBody, StdError};
use tonic::metadata::{BinaryMetadataValue, MetadataValue};
use tonic::{Code, Request};

use crate::compression::{MessageFlags, RecordResponseFlags};
use crate::grpc_testing::pb::test_service_client::TestServiceClient;
use crate::grpc_testing::pb::unimplemented_service_client::UnimplementedServiceClient;
use crate::grpc_testing::pb::*;
use crate::grpc_testing::zeros;

/// The cases `run` knows, in the spec's order. Not here: `client_compressed_streaming` and
/// `server_compressed_streaming`, which choose compression per message of a stream, where
/// tonic compresses a stream whole or not at all.
pub const CASES: &[&str] = &[
    "empty_unary",
    "large_unary",
    "client_compressed_unary",
    "server_compressed_unary",
    "client_streaming",
    "server_streaming",
    "ping_pong",
    "empty_stream",
    "custom_metadata",
    "status_code_and_message",
    "special_status_message",
    "unimplemented_method",
    "unimplemented_service",
    "cancel_after_begin",
    "cancel_after_first_response",
    "timeout_on_sleeping_server",
];

const REQUEST_SIZES: [i32; 4] = [27_182, 8, 1_828, 45_904];
const RESPONSE_SIZES: [i32; 4] = [31_415, 9, 2_653, 58_979];
const INITIAL_VALUE: &str = "test_initial_metadata_value";
const TRAILING_VALUE: &[u8] = b"\xab\xab\xab";
const SPECIAL_MESSAGE: &str =
    "\t\ntest with whitespace\r\nand Unicode BMP \u{263A} and non-BMP \u{1F608}\t\n";

type Result = std::result::Result<(), String>;

fn check(ok: bool, what: impl FnOnce() -> String) -> Result {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}

fn fail(what: &str, status: tonic::Status) -> String {
    format!("{what}: {:?} {:?}", status.code(), status.message())
}

fn payload_len(payload: &Option<Payload>) -> usize {
    payload.as_ref().map_or(0, |p| p.body.len())
}

fn params(sizes: &[i32]) -> Vec<ResponseParameters> {
    sizes.iter().map(|&size| ResponseParameters { size, ..Default::default() }).collect()
}

/// Runs the case `name` on `transport`, sleeping (for the cancellation cases) with `sleep`.
pub async fn run<T>(name: &str, transport: T, sleep: crate::SleepFn) -> Result
where
    T: GrpcService<tonic::body::Body> + Clone + Send + 'static,
    T::Error: Into<StdError>,
    T::ResponseBody: HttpBody<Data = Bytes> + Send + 'static,
    <T::ResponseBody as HttpBody>::Error: Into<StdError> + Send,
    T::Future: Send,
{
    let mut client = TestServiceClient::new(transport.clone());
    match name {
        "empty_unary" => {
            let r = client.empty_call(Empty {}).await.map_err(|s| fail("EmptyCall", s))?;
            check(r.into_inner() == Empty {}, || "EmptyCall answered a non-empty message".into())
        }
        "large_unary" => {
            let request =
                SimpleRequest { response_size: 314_159, payload: Some(zeros(271_828)), ..Default::default() };
            let r = client.unary_call(request).await.map_err(|s| fail("UnaryCall", s))?.into_inner();
            let body = r.payload.map(|p| p.body).unwrap_or_default();
            check(body.len() == 314_159 && body.iter().all(|&b| b == 0), || {
                format!("UnaryCall answered {} bytes, not 314159 zeros", body.len())
            })
        }
        "client_compressed_unary" => client_compressed_unary(client).await,
        "server_compressed_unary" => {
            // The response's compressed flag read off the wire (module `compression`).
            let client = TestServiceClient::new(RecordResponseFlags(transport))
                .accept_compressed(CompressionEncoding::Gzip);
            server_compressed_unary(client).await
        }
        "client_streaming" => {
            let requests = REQUEST_SIZES
                .map(|n| StreamingInputCallRequest { payload: Some(zeros(n)), ..Default::default() });
            let r = client
                .streaming_input_call(futures_util::stream::iter(requests))
                .await
                .map_err(|s| fail("StreamingInputCall", s))?
                .into_inner();
            check(r.aggregated_payload_size == 74_922, || {
                format!("aggregated size {}", r.aggregated_payload_size)
            })
        }
        "server_streaming" => {
            let request = StreamingOutputCallRequest {
                response_parameters: params(&RESPONSE_SIZES),
                ..Default::default()
            };
            let mut stream = client
                .streaming_output_call(request)
                .await
                .map_err(|s| fail("StreamingOutputCall", s))?
                .into_inner();
            let mut sizes = Vec::new();
            while let Some(msg) = stream.message().await.map_err(|s| fail("StreamingOutputCall stream", s))? {
                sizes.push(payload_len(&msg.payload) as i32);
            }
            check(sizes == RESPONSE_SIZES, || format!("response sizes {sizes:?}"))
        }
        "ping_pong" => {
            let (tx, rx) = futures_channel::mpsc::unbounded();
            let ping = |i: usize| StreamingOutputCallRequest {
                response_parameters: params(&[RESPONSE_SIZES[i]]),
                payload: Some(zeros(REQUEST_SIZES[i])),
                ..Default::default()
            };
            // The first ping goes before the call waits for response headers: a server may
            // send its headers only with its first response (grpc-go does).
            tx.unbounded_send(ping(0)).map_err(|e| format!("sending: {e}"))?;
            let mut stream =
                client.full_duplex_call(rx).await.map_err(|s| fail("FullDuplexCall", s))?.into_inner();
            for (i, resp) in RESPONSE_SIZES.into_iter().enumerate() {
                if i > 0 {
                    tx.unbounded_send(ping(i)).map_err(|e| format!("sending: {e}"))?;
                }
                let msg = stream.message().await.map_err(|s| fail("FullDuplexCall stream", s))?;
                let got = msg.as_ref().map(|m| payload_len(&m.payload) as i32);
                check(got == Some(resp), || format!("ping {i}: answer {got:?}, wanted {resp}"))?;
            }
            drop(tx);
            let end = stream.message().await.map_err(|s| fail("FullDuplexCall end", s))?;
            check(end.is_none(), || "a response after the last ping".into())
        }
        "empty_stream" => {
            let requests = futures_util::stream::iter(Vec::<StreamingOutputCallRequest>::new());
            let mut stream =
                client.full_duplex_call(requests).await.map_err(|s| fail("FullDuplexCall", s))?.into_inner();
            let end = stream.message().await.map_err(|s| fail("FullDuplexCall stream", s))?;
            check(end.is_none(), || "a response to an empty stream".into())
        }
        "custom_metadata" => custom_metadata(&mut client).await,
        "status_code_and_message" | "special_status_message" => {
            let message =
                if name == "special_status_message" { SPECIAL_MESSAGE } else { "test status message" };
            let status = EchoStatus { code: 2, message: message.into() };
            let request = SimpleRequest { response_status: Some(status.clone()), ..Default::default() };
            let err = client.unary_call(request).await.err().ok_or("UnaryCall succeeded")?;
            check(err.code() == Code::Unknown && err.message() == message, || {
                fail("UnaryCall", err.clone())
            })?;
            if name == "special_status_message" {
                return Ok(());
            }
            let request = StreamingOutputCallRequest { response_status: Some(status), ..Default::default() };
            let result = match client.full_duplex_call(futures_util::stream::iter([request])).await {
                Err(e) => Err(e),
                Ok(r) => r.into_inner().message().await.map(|_| ()),
            };
            let err = result.err().ok_or("FullDuplexCall succeeded")?;
            check(err.code() == Code::Unknown && err.message() == message, || {
                fail("FullDuplexCall", err.clone())
            })
        }
        "unimplemented_method" => {
            let err = client.unimplemented_call(Empty {}).await.err().ok_or("UnimplementedCall succeeded")?;
            check(err.code() == Code::Unimplemented, || fail("UnimplementedCall", err.clone()))
        }
        "unimplemented_service" => {
            let mut other = UnimplementedServiceClient::new(transport);
            let err = other.unimplemented_call(Empty {}).await.err().ok_or("UnimplementedCall succeeded")?;
            check(err.code() == Code::Unimplemented, || fail("UnimplementedService", err.clone()))
        }
        "cancel_after_begin" => {
            // A call whose requests never come, cancelled (dropped) once it has started.
            let call =
                client.streaming_input_call(futures_util::stream::pending::<StreamingInputCallRequest>());
            let started = sleep(Duration::from_millis(50));
            match futures_util::future::select(Box::pin(call), started).await {
                futures_util::future::Either::Left((result, _)) => {
                    Err(format!("the call ended by itself: {result:?}"))
                }
                futures_util::future::Either::Right(((), call)) => {
                    drop(call);
                    Ok(())
                }
            }
        }
        "cancel_after_first_response" => {
            let (tx, rx) = futures_channel::mpsc::unbounded();
            let request = StreamingOutputCallRequest {
                response_parameters: params(&[31_415]),
                payload: Some(zeros(27_182)),
                ..Default::default()
            };
            tx.unbounded_send(request).map_err(|e| format!("sending: {e}"))?;
            let mut stream =
                client.full_duplex_call(rx).await.map_err(|s| fail("FullDuplexCall", s))?.into_inner();
            let msg = stream.message().await.map_err(|s| fail("FullDuplexCall stream", s))?;
            check(msg.is_some_and(|m| payload_len(&m.payload) == 31_415), || "no first response".into())?;
            drop(stream); // cancel, requests still open
            drop(tx);
            Ok(())
        }
        "timeout_on_sleeping_server" => {
            let (tx, rx) = futures_channel::mpsc::unbounded();
            let mut request = Request::new(rx);
            request.set_timeout(Duration::from_millis(1));
            let ping = StreamingOutputCallRequest { payload: Some(zeros(27_182)), ..Default::default() };
            let _ = tx.unbounded_send(ping);
            let result = match client.full_duplex_call(request).await {
                Err(e) => Err(e),
                Ok(r) => r.into_inner().message().await.map(|_| ()),
            };
            drop(tx);
            let err = result.err().ok_or("the call outlived its deadline")?;
            check(err.code() == Code::DeadlineExceeded, || fail("FullDuplexCall", err.clone()))
        }
        other => Err(format!("unknown test case {other:?}; known: {}", CASES.join(", "))),
    }
}

fn large_request(expect_compressed: Option<bool>, response_compressed: Option<bool>) -> SimpleRequest {
    SimpleRequest {
        response_size: 314_159,
        payload: Some(zeros(271_828)),
        expect_compressed: expect_compressed.map(|value| BoolValue { value }),
        response_compressed: response_compressed.map(|value| BoolValue { value }),
        ..Default::default()
    }
}

fn check_large(what: &str, response: &SimpleResponse) -> Result {
    let body = response.payload.as_ref().map(|p| &p.body[..]).unwrap_or_default();
    check(body.len() == 314_159 && body.iter().all(|&b| b == 0), || {
        format!("{what}: {} bytes, not 314159 zeros", body.len())
    })
}

/// The probe (an uncompressed request that says it is compressed: a server that checks
/// refuses it), then a gzip request and a plain one, each saying what it is.
async fn client_compressed_unary<T>(client: TestServiceClient<T>) -> Result
where
    T: GrpcService<tonic::body::Body> + Clone,
    T::Error: Into<StdError>,
    T::ResponseBody: HttpBody<Data = Bytes> + Send + 'static,
    <T::ResponseBody as HttpBody>::Error: Into<StdError> + Send,
{
    let probe = client.clone().unary_call(large_request(Some(true), None)).await;
    match probe {
        Err(status) if status.code() == Code::InvalidArgument => {}
        Err(status) => {
            return Err(fail(
                "the probe (uncompressed, expect_compressed) failed, not INVALID_ARGUMENT",
                status,
            ))
        }
        Ok(_) => {
            return Err("the probe (uncompressed, expect_compressed) succeeded, not INVALID_ARGUMENT".into())
        }
    }
    let mut gzip = client.clone().send_compressed(CompressionEncoding::Gzip);
    let r = gzip
        .unary_call(large_request(Some(true), None))
        .await
        .map_err(|s| fail("compressed UnaryCall", s))?;
    check_large("compressed UnaryCall", r.get_ref())?;
    let mut plain = client;
    let r = plain
        .unary_call(large_request(Some(false), None))
        .await
        .map_err(|s| fail("uncompressed UnaryCall", s))?;
    check_large("uncompressed UnaryCall", r.get_ref())
}

/// Two calls, asking for a compressed response and then an uncompressed one; each response's
/// compressed flag must say so.
async fn server_compressed_unary<T>(mut client: TestServiceClient<T>) -> Result
where
    T: GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: HttpBody<Data = Bytes> + Send + 'static,
    <T::ResponseBody as HttpBody>::Error: Into<StdError> + Send,
{
    for compressed in [true, false] {
        let what = format!("UnaryCall with response_compressed {compressed}");
        let r = client.unary_call(large_request(None, Some(compressed))).await.map_err(|s| fail(&what, s))?;
        let flags = r.extensions().get::<MessageFlags>().map(MessageFlags::to_vec);
        check(flags == Some(vec![compressed]), || {
            format!("{what}: response messages' compressed flags {flags:?}")
        })?;
        check_large(&what, r.get_ref())?;
    }
    Ok(())
}

async fn custom_metadata<T>(client: &mut TestServiceClient<T>) -> Result
where
    T: GrpcService<tonic::body::Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: HttpBody<Data = Bytes> + Send + 'static,
    <T::ResponseBody as HttpBody>::Error: Into<StdError> + Send,
{
    fn decorate<M>(message: M) -> Request<M> {
        let mut request = Request::new(message);
        let md = request.metadata_mut();
        md.insert(crate::ECHO_INITIAL, MetadataValue::from_static(INITIAL_VALUE));
        md.insert_bin(crate::ECHO_TRAILING, BinaryMetadataValue::from_bytes(TRAILING_VALUE));
        request
    }
    fn check_md(
        what: &str,
        initial: &tonic::metadata::MetadataMap,
        trailing: &tonic::metadata::MetadataMap,
    ) -> Result {
        let got = initial.get(crate::ECHO_INITIAL).and_then(|v| v.to_str().ok());
        check(got == Some(INITIAL_VALUE), || format!("{what}: initial metadata {got:?}"))?;
        let got = trailing.get_bin(crate::ECHO_TRAILING).and_then(|v| v.to_bytes().ok());
        check(got.as_deref() == Some(TRAILING_VALUE), || format!("{what}: trailing metadata {got:?}"))
    }
    let request =
        SimpleRequest { response_size: 314_159, payload: Some(zeros(271_828)), ..Default::default() };
    // A unary call's trailers are merged into the response's metadata by tonic.
    let response = client.unary_call(decorate(request)).await.map_err(|s| fail("UnaryCall", s))?;
    check_md("UnaryCall", response.metadata(), response.metadata())?;
    check(payload_len(&response.get_ref().payload) == 314_159, || "UnaryCall payload size".into())?;
    let request = StreamingOutputCallRequest {
        response_parameters: params(&[314_159]),
        payload: Some(zeros(271_828)),
        ..Default::default()
    };
    let response = client
        .full_duplex_call(decorate(futures_util::stream::iter([request])))
        .await
        .map_err(|s| fail("FullDuplexCall", s))?;
    let initial = response.metadata().clone();
    let mut stream = response.into_inner();
    let mut sizes = Vec::new();
    while let Some(msg) = stream.message().await.map_err(|s| fail("FullDuplexCall stream", s))? {
        sizes.push(payload_len(&msg.payload));
    }
    check(sizes == [314_159], || format!("FullDuplexCall sizes {sizes:?}"))?;
    let trailing =
        stream.trailers().await.map_err(|s| fail("FullDuplexCall trailers", s))?.unwrap_or_default();
    check_md("FullDuplexCall", &initial, &trailing)
}
