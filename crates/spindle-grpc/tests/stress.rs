//! Stress: 100 concurrent callers (90 tasks on the runtime's workers, 10 plain threads going
//! through pump tasks), each making a series of random calls (unary, server streaming, client
//! streaming, bidi), with random deadlines and random cancellations (the call dropped at a
//! random moment). Every call must end exactly once (a response, or one status, or our own
//! drop), and at the end no call, handler or payload may be left alive.
//!
//! Size: `SPINDLE_GRPC_STRESS_CALLS` calls per caller (default 200, so that `cargo test` stays
//! quick in CI; the full size is 10,000:
//! `SPINDLE_GRPC_STRESS_CALLS=10000 cargo test --release -p spindle-grpc --test stress`).

mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::{select, Either};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::*;
use spindle_grpc_interop::{payload, Counters, Server};
use tonic::{Code, Request};

const CALLERS: usize = 100;
const THREAD_CALLERS: usize = 10;

type Sleep = Arc<dyn Fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How each call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Ok,
    Status(i32),
    DroppedByUs,
}

fn params(rng: &mut fastrand::Rng) -> Vec<ResponseParameters> {
    (0..rng.usize(0..4))
        .map(|_| ResponseParameters {
            size: rng.i32(0..2048),
            interval_us: if rng.bool() { rng.i64(0..1500) } else { 0 },
            ..Default::default()
        })
        .collect()
}

/// One random call, to its end. Returns its outcome; panics if it ends twice.
async fn one_call(
    client: &mut TestServiceClient<spindle_grpc::Channel>,
    counters: &Arc<Counters>,
    rng: &mut fastrand::Rng,
) -> Outcome {
    let timeout = rng.bool().then(|| Duration::from_micros(rng.u64(200..3000)));
    fn with_deadline<M>(mut request: Request<M>, timeout: Option<Duration>) -> Request<M> {
        if let Some(t) = timeout {
            request.set_timeout(t);
        }
        request
    }
    fn status(code: Code) -> Outcome {
        Outcome::Status(code as i32)
    }
    match rng.u8(0..4) {
        0 => {
            let request = SimpleRequest {
                response_size: rng.i32(0..4096),
                payload: Some(payload(counters, rng.usize(0..4096))),
                sleep_ms: if rng.u8(0..4) == 0 { rng.i64(0..3) } else { 0 },
                response_status: (rng.u8(0..8) == 0).then(|| EchoStatus { code: 9, message: "asked".into() }),
                ..Default::default()
            };
            match client.unary_call(with_deadline(Request::new(request), timeout)).await {
                Ok(_) => Outcome::Ok,
                Err(s) => status(s.code()),
            }
        }
        1 => {
            let request =
                StreamingOutputCallRequest { response_parameters: params(rng), ..Default::default() };
            let mut stream =
                match client.streaming_output_call(with_deadline(Request::new(request), timeout)).await {
                    Ok(r) => r.into_inner(),
                    Err(s) => return status(s.code()),
                };
            let end = loop {
                match stream.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => break Outcome::Ok,
                    Err(s) => break status(s.code()),
                }
            };
            // Exactly one end: nothing after it.
            assert!(matches!(stream.message().await, Ok(None)), "a second end after {end:?}");
            end
        }
        2 => {
            let requests: Vec<_> = (0..rng.usize(0..4))
                .map(|_| StreamingInputCallRequest { payload: Some(payload(counters, rng.usize(0..1024))) })
                .collect();
            let request = with_deadline(Request::new(futures_util::stream::iter(requests)), timeout);
            match client.streaming_input_call(request).await {
                Ok(_) => Outcome::Ok,
                Err(s) => status(s.code()),
            }
        }
        _ => {
            let requests: Vec<_> = (0..rng.usize(0..4))
                .map(|_| StreamingOutputCallRequest {
                    response_parameters: params(rng),
                    ..Default::default()
                })
                .collect();
            let request = with_deadline(Request::new(futures_util::stream::iter(requests)), timeout);
            let mut stream = match client.full_duplex_call(request).await {
                Ok(r) => r.into_inner(),
                Err(s) => return status(s.code()),
            };
            let end = loop {
                match stream.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => break Outcome::Ok,
                    Err(s) => break status(s.code()),
                }
            };
            assert!(matches!(stream.message().await, Ok(None)), "a second end after {end:?}");
            end
        }
    }
}

async fn caller(
    seed: u64,
    calls: usize,
    channel: spindle_grpc::Channel,
    counters: Arc<Counters>,
    sleep: Sleep,
    outcomes: Arc<Mutex<BTreeMap<Outcome, u64>>>,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut client = TestServiceClient::new(channel);
    let mut local = BTreeMap::new();
    for _ in 0..calls {
        let outcome = if rng.u8(0..5) == 0 {
            // Cancel at a random moment (maybe after the call ended by itself).
            let after = Duration::from_micros(rng.u64(0..2000));
            let mut call_rng = fastrand::Rng::with_seed(rng.u64(..));
            let call = Box::pin(one_call(&mut client, &counters, &mut call_rng));
            let outcome = match select(call, sleep(after)).await {
                Either::Left((outcome, _)) => outcome,
                Either::Right(((), call)) => {
                    drop(call);
                    Outcome::DroppedByUs
                }
            };
            outcome
        } else {
            one_call(&mut client, &counters, &mut rng).await
        };
        *local.entry(outcome).or_insert(0u64) += 1;
    }
    let mut all = outcomes.lock().unwrap();
    for (k, v) in local {
        *all.entry(k).or_insert(0) += v;
    }
}

#[test]
fn stress_random_calls_cancellations_and_deadlines() {
    let calls: usize =
        std::env::var("SPINDLE_GRPC_STRESS_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let seed: u64 = std::env::var("SPINDLE_GRPC_STRESS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("stress: {CALLERS} callers x {calls} calls, seed {seed} (SPINDLE_GRPC_STRESS_SEED)");
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let server = Server::new(common::spindle_sleep);
    let counters = server.counters.clone();
    let channel =
        spindle_grpc::Channel::new().with_handle(rt.handle()).add_service(TestServiceServer::new(server));
    let outcomes = Arc::new(Mutex::new(BTreeMap::new()));

    let task_sleep: Sleep = Arc::new(common::spindle_sleep);
    let handle = rt.handle();
    let thread_sleep: Sleep = Arc::new(move |d| {
        let task = handle.spawn_async(spindle::time::sleep_future(d));
        Box::pin(async move { task.await.unwrap() })
    });
    let mut tasks = Vec::new();
    for i in 0..CALLERS - THREAD_CALLERS {
        let fut = caller(
            seed + i as u64,
            calls,
            channel.clone(),
            counters.clone(),
            task_sleep.clone(),
            outcomes.clone(),
        );
        tasks.push(rt.handle().spawn_async(fut));
    }
    let threads: Vec<_> = (CALLERS - THREAD_CALLERS..CALLERS)
        .map(|i| {
            let fut = caller(
                seed + i as u64,
                calls,
                channel.clone(),
                counters.clone(),
                thread_sleep.clone(),
                outcomes.clone(),
            );
            std::thread::spawn(move || spindle::task::block_on(fut))
        })
        .collect();
    for task in tasks {
        task.join().unwrap();
    }
    for thread in threads {
        thread.join().unwrap();
    }
    // Pump tasks and dropped handlers finish on the workers just after their callers.
    for _ in 0..10_000 {
        if channel.live_calls() == 0 && counters.live_handlers.load(SeqCst) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let outcomes = outcomes.lock().unwrap().clone();
    eprintln!("stress outcomes: {outcomes:?}; handlers started {}", counters.started.load(SeqCst));
    assert_eq!(outcomes.values().sum::<u64>(), (CALLERS * calls) as u64, "every call ends exactly once");
    for outcome in outcomes.keys() {
        let allowed = [
            Outcome::Ok,
            Outcome::DroppedByUs,
            Outcome::Status(Code::DeadlineExceeded as i32),
            Outcome::Status(9),
        ];
        assert!(allowed.contains(outcome), "unexpected outcome {outcome:?}");
    }
    assert_eq!(channel.live_calls(), 0, "calls left alive");
    common::check_no_leaks(&counters);
    drop(rt);
}
