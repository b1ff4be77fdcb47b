//! Where the time of an in-process unary call goes: the same 32-byte echo measured
//!
//! 1. through spindle-grpc's Channel (the full in-process call),
//! 2. with the generated client wired straight to the generated server (`tonic-direct`: tonic's
//!    whole per-call machinery, no channel),
//! 3. as a typed call of the service trait (what a fast path skipping encoding would still pay:
//!    the handler, its `async_trait` box, `tonic::Request`/`Response` wrappers, no encoding),
//! 4. protobuf encode + decode of the request and the response alone (prost),
//! 5. through spindle-grpc's typed fast path (the typed client that spindle-grpc-build
//!    generates, the server registered with `add_typed_service`: 3 plus the channel's routing,
//!    deadline, cancellation, limits and panic guard),
//!
//! all on one spindle worker, each in a loop of back-to-back calls.
//!
//! ```sh
//! cargo run --release -p spindle-grpc --example where_time_goes
//! ```

use std::time::{Duration, Instant};

use prost::Message as _;
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::{TestService, TestServiceServer};
use spindle_grpc_interop::pb::test_service_typed::TestServiceClient as TypedClient;
use spindle_grpc_interop::pb::{Payload, SimpleRequest, SimpleResponse};
use spindle_grpc_interop::Server;

const CALLS: u32 = 200_000;

fn request() -> SimpleRequest {
    SimpleRequest {
        response_size: 32,
        payload: Some(Payload { body: vec![7u8; 32].into() }),
        ..Default::default()
    }
}

async fn time<F, Fut>(what: &str, mut op: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..CALLS / 10 {
        op().await; // warm-up
    }
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..CALLS {
            op().await;
        }
        best = best.min(start.elapsed() / CALLS);
    }
    println!("{what:<58} {:>7.0} ns/call (best of 5 x {CALLS})", best.as_nanos() as f64);
    best
}

fn main() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        spindle::task::block_on(async {
            let server = Server::new(|d| Box::pin(spindle::time::sleep_future(d)));
            let channel = spindle_grpc::Channel::new().add_service(TestServiceServer::new(server.clone()));
            let mut via_channel = TestServiceClient::new(channel);
            let mut direct = TestServiceClient::new(TestServiceServer::new(server.clone()));

            let channel = time("1. spindle-grpc Channel (full in-process call)", || {
                let mut c = via_channel.clone();
                async move {
                    c.unary_call(request()).await.unwrap();
                }
            })
            .await;
            let tonic = time("2. tonic-direct (client on the server's Service)", || {
                let mut c = direct.clone();
                async move {
                    c.unary_call(request()).await.unwrap();
                }
            })
            .await;
            let typed = time("3. typed trait call (no encoding, no http)", || {
                let server = server.clone();
                async move {
                    server.unary_call(tonic::Request::new(request())).await.unwrap();
                }
            })
            .await;
            let codec = time("4. prost encode + decode, request and response", || async {
                let req = request();
                let buf = req.encode_to_vec();
                let back = SimpleRequest::decode(&buf[..]).unwrap();
                let resp = SimpleResponse { payload: back.payload };
                let buf = resp.encode_to_vec();
                SimpleResponse::decode(&buf[..]).unwrap();
            })
            .await;
            let typed_channel = spindle_grpc::Channel::new().add_typed_service(TestServiceServer::new(server.clone()));
            let fast_client = TypedClient::new(typed_channel);
            let fast = time("5. spindle-grpc typed fast path (no encoding, no http)", || {
                let mut c = fast_client.clone();
                async move {
                    c.unary_call(request()).await.unwrap();
                }
            })
            .await;
            let _ = (&mut via_channel, &mut direct);
            println!();
            println!(
                "channel's own share (1 - 2):            {:>7.0} ns",
                channel.as_nanos() as f64 - tonic.as_nanos() as f64
            );
            println!(
                "tonic's per-call machinery (2 - 3):     {:>7.0} ns",
                tonic.as_nanos() as f64 - typed.as_nanos() as f64
            );
            println!("  of which protobuf encode/decode (4):  {:>7.0} ns", codec.as_nanos() as f64);
            println!("handler and typed wrappers (3):         {:>7.0} ns", typed.as_nanos() as f64);
            println!(
                "the typed fast path's own share (5 - 3): {:>7.0} ns; it takes a call from {:.0} ns to {:.0} ns ({:.1}x)",
                fast.as_nanos() as f64 - typed.as_nanos() as f64,
                channel.as_nanos() as f64,
                fast.as_nanos() as f64,
                channel.as_nanos() as f64 / fast.as_nanos() as f64
            );
        })
    });
}
