//! The interop suite's compression cases spindle ↔ spindle: the interop client's cases against
//! the interop server's service (`grpc_testing::server`), over loopback HTTP/2 and on the
//! in-process channel; and the server's side of the spec's CompressedRequest (the probe, and
//! a stream whose messages say what they are) called directly.

use std::time::Duration;

use futures_util::StreamExt as _;
use spindle_grpc_interop::cases;
use spindle_grpc_interop::grpc_testing::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::grpc_testing::pb::*;
use spindle_grpc_interop::grpc_testing::{self, zeros, InteropService};
use tonic::codec::CompressionEncoding;
use tonic::Code;

const COMPRESSION_CASES: [&str; 2] = ["client_compressed_unary", "server_compressed_unary"];

fn sleep(d: Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(spindle::time::sleep_future(d))
}

fn interop_channel() -> spindle_grpc::Channel {
    spindle_grpc::Channel::new().add_service(grpc_testing::server(InteropService::new(sleep)))
}

/// Runs `body` with a client channel to the interop server on loopback HTTP/2.
fn over_loopback<F, T>(body: impl FnOnce(spindle_grpc::RemoteChannel) -> F + Send + 'static) -> T
where
    F: std::future::Future<Output = T>,
    T: Send + 'static,
{
    let rt = spindle::Builder::new().worker_threads(1).build().expect("a spindle runtime");
    rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let serving = spindle_grpc::Server::new(interop_channel()).serve_tcp(listener).unwrap();
        let uri = format!("http://{}", serving.local_addr().unwrap());
        let out = spindle::task::block_on(async move {
            let channel = spindle_grpc::Endpoint::new(&uri).unwrap().connect().await.unwrap();
            body(channel).await
        });
        drop(serving);
        out
    })
}

/// Every case the interop client knows, the compression ones among them, passes against the
/// interop server over loopback HTTP/2 (the new server stack breaks none of the others).
#[test]
fn every_case_passes_over_loopback() {
    assert!(COMPRESSION_CASES.iter().all(|c| cases::CASES.contains(c)));
    let failures = over_loopback(|channel| async move {
        let mut failures = Vec::new();
        for name in cases::CASES {
            if let Err(e) = cases::run(name, channel.clone(), sleep).await {
                failures.push(format!("{name}: {e}"));
            }
        }
        failures
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The compression cases pass on the in-process channel too (it carries the encoded messages,
/// compressed flags and all). The handler runs on the caller's fiber there, and gzip builds
/// flate2's miniz_oxide state on the stack in a debug build (~300 KiB): on the default stack,
/// as a user's test would run it (it overflowed when debug builds had 256 KiB stacks).
#[test]
fn compression_cases_pass_in_process() {
    let rt = spindle::Builder::new().worker_threads(1).build().expect("a spindle runtime");
    let failures = rt.block_on(|| {
        let channel = interop_channel();
        spindle::task::block_on(async move {
            let mut failures = Vec::new();
            for name in COMPRESSION_CASES {
                if let Err(e) = cases::run(name, channel.clone(), sleep).await {
                    failures.push(format!("{name}: {e}"));
                }
            }
            failures
        })
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

fn large(expect_compressed: bool) -> SimpleRequest {
    SimpleRequest {
        response_size: 314_159,
        payload: Some(zeros(271_828)),
        expect_compressed: Some(BoolValue { value: expect_compressed }),
        ..Default::default()
    }
}

/// The probe of client_compressed_unary is refused with INVALID_ARGUMENT, and so is its
/// mirror (a compressed request that says it is not); requests that tell the truth pass.
#[test]
fn unary_requests_must_be_what_they_say() {
    let codes = over_loopback(|channel| async move {
        let plain = TestServiceClient::new(channel);
        let gzip = plain.clone().send_compressed(CompressionEncoding::Gzip);
        let mut codes = Vec::new();
        for (mut client, expect) in
            [(plain.clone(), true), (gzip.clone(), false), (gzip, true), (plain, false)]
        {
            let result = client.unary_call(large(expect)).await;
            codes.push(result.map(|r| r.into_inner().payload.unwrap().body.len()).map_err(|s| s.code()));
        }
        codes
    });
    assert_eq!(
        codes,
        [Err(Code::InvalidArgument), Err(Code::InvalidArgument), Ok(314_159), Ok(314_159)],
        "(uncompressed, expect true), (gzip, expect false), (gzip, expect true), (uncompressed, expect false)"
    );
}

/// StreamingInputCall checks each message's expect_compressed against that message (the
/// server's side of client_compressed_streaming): a compressed stream that says so passes, an
/// uncompressed message that says it is compressed fails the call with INVALID_ARGUMENT.
#[test]
fn streamed_requests_are_checked_message_by_message() {
    let (gzip_total, probe, late) = over_loopback(|channel| async move {
        let msg = |size, expect| StreamingInputCallRequest {
            payload: Some(zeros(size)),
            expect_compressed: Some(BoolValue { value: expect }),
        };
        let plain = TestServiceClient::new(channel);
        let mut gzip = plain.clone().send_compressed(CompressionEncoding::Gzip);
        let total = gzip
            .streaming_input_call(futures_util::stream::iter([msg(27_182, true), msg(45_904, true)]))
            .await
            .map(|r| r.into_inner().aggregated_payload_size);
        let probe = plain.clone().streaming_input_call(futures_util::stream::iter([msg(27_182, true)])).await;
        // A truthful first message, then a lying one: the call fails at the second.
        let late = plain
            .clone()
            .streaming_input_call(futures_util::stream::iter([msg(8, false), msg(8, true)]).boxed())
            .await;
        (
            total.map_err(|s| s.code()),
            probe.map(|_| ()).map_err(|s| s.code()),
            late.map(|_| ()).map_err(|s| s.code()),
        )
    });
    assert_eq!(gzip_total, Ok(73_086));
    assert_eq!(probe, Err(Code::InvalidArgument));
    assert_eq!(late, Err(Code::InvalidArgument));
}

/// A server's response to `response_compressed` needs a client that accepts gzip: one that
/// does not gets an uncompressed response, and the call still succeeds.
#[test]
fn no_compressed_response_to_a_client_that_does_not_accept_gzip() {
    let flags = over_loopback(|channel| async move {
        let mut client =
            TestServiceClient::new(spindle_grpc_interop::compression::RecordResponseFlags(channel));
        let request = SimpleRequest {
            response_size: 1_000,
            response_compressed: Some(BoolValue { value: true }),
            ..Default::default()
        };
        let response = client.unary_call(request).await.unwrap();
        response.extensions().get::<spindle_grpc_interop::compression::MessageFlags>().map(|f| f.to_vec())
    });
    assert_eq!(flags, Some(vec![false]));
}
