//! The tournament's Rust rpc peer: the `Bench` service of `bench/peers/proto/bench.proto`
//! served by tonic and called by tonic's generated client over one of several transports.
//!
//! ```text
//! rpc-peer --competitor tonic-direct|tonic-duplex|tonic-tcp|spindle-grpc|spindle-grpc-mt|spindle-grpc-tcp|spindle-grpc-typed
//!          [--runtime current|multi] [--workers N] [--quick] [--case NAME]
//! ```
//!
//! * `tonic-direct`: `BenchClient::new(BenchServer::new(Echo))`. The client's `GrpcService`
//!   is the server's `tower::Service` itself: messages are still encoded to gRPC frames and
//!   decoded again, but there is no HTTP/2, no connection, no task in between.
//! * `tonic-duplex`: a tonic `Server` on one end of a `tokio::io::duplex` pipe, a
//!   `tonic::transport::Channel` on the other (HTTP/2 in memory).
//! * `tonic-tcp`: a tonic `Server` on `127.0.0.1:0`, a `Channel` over loopback.
//! * `spindle-grpc`: spindle-grpc's in-process `Channel` with `BenchServer<Echo>` registered,
//!   the suite running as a task on a `spindle::LocalRuntime` (this thread is its one worker,
//!   no worker thread, as tokio's current_thread runtime; the handler runs in the caller's
//!   call on that worker); `--workers N` (N > 1) gives it a runtime of N worker threads.
//! * `spindle-grpc-mt`: the same on a runtime with a worker per core (like Go's default
//!   GOMAXPROCS); the concurrent callers, spawned as tasks, spread over the workers by work
//!   stealing, and each call runs its handler on its caller's worker.
//! * `spindle-grpc-typed`: spindle-grpc's typed fast path: `BenchServer<Echo>` registered with
//!   `add_typed_service` and the typed client that spindle-grpc-build generates beside tonic's
//!   (`pb::bench_typed::BenchClient`) on the same local runtime: the client's messages are
//!   moved into the handler and back, never encoded.
//! * `spindle-grpc-tcp`: spindle-grpc's network `Server` on `127.0.0.1:0` and a
//!   `RemoteChannel` over loopback (HTTP/2 by hyper on spindle sockets, one connection), on a
//!   local runtime that runs server, client and callers (the single-core comparable of
//!   tonic-tcp on current_thread); `--workers N` (N > 1) gives it N worker threads.
//!
//! Every competitor runs the same client code, [`run_suite`], which is generic over the
//! client ([`Api`](seams::Api): tonic's generated client on any [`Transport`](seams::Transport), or the typed client) and
//! over the async runtime that spawns the concurrent callers ([`Spawn`](seams::Spawn)). Adding a competitor (spindle-grpc) is a function that builds its
//! `BenchClient`, a `Spawn` impl if it runs on another runtime than tokio, and one match arm
//! in [`main`]; see [`Transport`](seams::Transport) for the recipe. One file each: the
//! allocation counter (`alloc_count`), the service (`service`), the seams (`seams`), the
//! competitors' constructors (`competitors`) and the measurement (`suite`).
//!
//! Output: one JSON line per measurement (bench/peers/README.md). Throughput cases calibrate
//! their op count from a warm-up, time exactly N ops, then run a shorter pass with the
//! counting allocator switched on for `bytes_per_op` and `allocs_per_op` (so the counter's
//! atomics never slow the timed pass). Allocations are counted process wide: client, server
//! and runtime alike, as Go's runtime.MemStats counts them.

mod alloc_count;
mod competitors;
mod seams;
mod service;
mod suite;

use std::future::Future;
use std::time::Duration;

use competitors::{
    on_spindle, spindle_grpc, spindle_grpc_tcp, spindle_grpc_typed, tonic_direct, tonic_duplex, tonic_tcp,
    SpindleRt,
};
use seams::{Spindle, Tokio};
use suite::{run_suite, Config, Out};

pub mod pb {
    tonic::include_proto!("spindle.bench");
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = BoxError> = std::result::Result<T, E>;

const USAGE: &str =
    "usage: rpc-peer --competitor tonic-direct|tonic-duplex|tonic-tcp|spindle-grpc|spindle-grpc-mt|spindle-grpc-tcp|spindle-grpc-typed \
                     [--runtime current|multi] [--workers N] [--quick] [--case NAME]";

const CASES: &[&str] = &[
    "unary_32",
    "unary_64",
    "unary_1k",
    "unary_10k",
    "unary_100k",
    "unary_1m",
    "server_stream_100x32",
    "bidi_echo",
    "concurrent_10",
    "concurrent_50",
    "concurrent_100",
    "latency",
];

fn main() {
    let mut competitor = None;
    let mut runtime = String::from("current");
    let mut quick = false;
    let mut only = None;
    let mut workers: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--competitor" => competitor = args.next(),
            "--runtime" => runtime = args.next().unwrap_or_default(),
            "--quick" => quick = true,
            "--case" => only = args.next(),
            "--workers" => match args.next().and_then(|n| n.parse().ok()).filter(|&n| n > 0) {
                Some(n) => workers = Some(n),
                None => {
                    eprintln!("--workers takes a number of workers (at least 1)\n{USAGE}");
                    std::process::exit(2);
                }
            },
            _ => {
                eprintln!("unknown argument {arg:?}\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    let Some(competitor) = competitor else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    if let Some(case) = &only {
        if !CASES.contains(&case.as_str()) {
            eprintln!("unknown case {case:?}; cases: {}", CASES.join(" "));
            std::process::exit(2);
        }
    }
    let cfg = if quick {
        Config {
            target: Duration::from_millis(30),
            warmup: Duration::from_millis(10),
            min_ops: 5,
            lat_tasks: 10,
            lat_calls: 200,
        }
    } else {
        Config {
            target: Duration::from_secs(1),
            warmup: Duration::from_millis(200),
            min_ops: 20,
            lat_tasks: 10,
            lat_calls: 5000,
        }
    };
    if !["current", "multi"].contains(&runtime.as_str()) {
        eprintln!("unknown runtime {runtime:?}\n{USAGE}");
        std::process::exit(2);
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = match competitor.as_str() {
        "spindle-grpc" | "spindle-grpc-tcp" | "spindle-grpc-typed" => workers.unwrap_or(1),
        "spindle-grpc-mt" => workers.unwrap_or(cores),
        _ if workers.is_some() => {
            eprintln!("--workers applies to the spindle-grpc competitors only\n{USAGE}");
            std::process::exit(2);
        }
        _ => 0,
    };
    eprintln!("# rpc-peer: competitor={competitor} runtime={runtime} workers={workers} cores={cores}");

    let out = Out { competitor: competitor.clone(), only };
    let result = match competitor.as_str() {
        "tonic-direct" => {
            on_tokio(&runtime, async move { run_suite(Tokio, tonic_direct(), cfg, &out).await })
        }
        "tonic-duplex" => {
            on_tokio(&runtime, async move { run_suite(Tokio, tonic_duplex().await?, cfg, &out).await })
        }
        "tonic-tcp" => {
            on_tokio(&runtime, async move { run_suite(Tokio, tonic_tcp().await?, cfg, &out).await })
        }
        "spindle-grpc" | "spindle-grpc-mt" => (|| {
            let rt = SpindleRt::new(workers)?;
            let client = spindle_grpc(&rt);
            on_spindle(async move { run_suite(Spindle, client, cfg, &out).await }, rt)
        })(),
        "spindle-grpc-typed" => (|| {
            let rt = SpindleRt::new(workers)?;
            let client = spindle_grpc_typed(&rt)?;
            on_spindle(async move { run_suite(Spindle, client, cfg, &out).await }, rt)
        })(),
        "spindle-grpc-tcp" => (|| {
            let rt = SpindleRt::new(workers)?;
            let client = rt.block_on(spindle_grpc_tcp)?;
            on_spindle(async move { run_suite(Spindle, client, cfg, &out).await }, rt)
        })(),
        other => {
            eprintln!("unknown competitor {other:?}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Runs `suite` on a tokio runtime (`current`: current_thread, `multi`: multi_thread with a
/// worker per core), as a spawned task, as callers in a tokio program run (on a worker thread
/// of the multi-thread runtime, not on the thread blocked in `block_on`).
fn on_tokio(runtime: &str, suite: impl Future<Output = Result<()>> + Send + 'static) -> Result<()> {
    let rt = match runtime {
        "multi" => tokio::runtime::Builder::new_multi_thread().enable_all().build()?,
        _ => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
    };
    rt.block_on(async { tokio::spawn(suite).await? })
}
