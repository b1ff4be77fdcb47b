//! Measurement: the cases, the same client code for every competitor ([`run_suite`]).

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tonic::Status;

use crate::alloc_count::counting;
use crate::pb::{Payload, StreamRequest};
use crate::seams::{Api, Responses as _, Spawn};
use crate::Result;

#[derive(Clone, Copy)]
pub(crate) struct Config {
    /// Measured time per throughput case.
    pub(crate) target: Duration,
    /// Warm-up (and calibration) time per case.
    pub(crate) warmup: Duration,
    /// At least this many measured ops.
    pub(crate) min_ops: u64,
    /// Latency case: callers, and calls per caller.
    pub(crate) lat_tasks: usize,
    pub(crate) lat_calls: usize,
}

pub(crate) struct Out {
    pub(crate) competitor: String,
    pub(crate) only: Option<String>,
}

impl Out {
    pub(crate) fn emit(&self, case: &str, metric: &str, value: f64, unit: &str) {
        let value = if value.is_finite() { value } else { 0.0 };
        println!(
            r#"{{"suite":"rpc","case":"{case}","competitor":"{}","metric":"{metric}","value":{value},"unit":"{unit}"}}"#,
            self.competitor
        );
    }

    pub(crate) fn wants(&self, case: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == case)
    }
}

pub(crate) fn round_up(n: u64, g: u64) -> u64 {
    n.div_ceil(g) * g
}

/// Warms up for `cfg.warmup` (doubling batches), sizes N for `cfg.target` from the warm-up's
/// rate, times exactly N ops, then counts allocations over a pass of N/10 ops. `run(n)`
/// performs n ops in all, over `g` callers.
pub(crate) async fn measure<F, Fut>(cfg: Config, out: &Out, case: &str, g: u64, mut run: F) -> Result<()>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let (mut n, mut done, mut spent) = (g, 0u64, Duration::ZERO);
    while spent < cfg.warmup {
        let start = Instant::now();
        run(n).await.map_err(|e| format!("{case} warm-up: {e}"))?;
        spent += start.elapsed();
        done += n;
        n *= 2;
    }
    let per_op = spent.as_secs_f64() / done as f64;
    let n = round_up(cfg.min_ops.max((cfg.target.as_secs_f64() / per_op) as u64), g);

    let start = Instant::now();
    run(n).await.map_err(|e| format!("{case}: {e}"))?;
    let elapsed = start.elapsed();

    let m = round_up(cfg.min_ops.max(n / 10), g);
    let (result, allocs, bytes) = counting(run(m)).await;
    result.map_err(|e| format!("{case} (counting pass): {e}"))?;

    out.emit(case, "ns_per_op", elapsed.as_nanos() as f64 / n as f64, "ns");
    out.emit(case, "bytes_per_op", bytes as f64 / m as f64, "bytes");
    out.emit(case, "allocs_per_op", allocs as f64 / m as f64, "allocs");
    eprintln!("# {case}: {n} ops in {elapsed:?}");
    Ok(())
}

pub(crate) fn payload(size: usize) -> Bytes {
    (0..size).map(|i| i as u8).collect::<Vec<u8>>().into()
}

/// `count` unary echoes of `data` in a row.
pub(crate) async fn unary_loop<C: Api>(mut client: C, data: Bytes, count: u64) -> Result<()> {
    for _ in 0..count {
        let resp = client.unary(Payload { data: data.clone() }).await?.into_inner();
        if resp.data.len() != data.len() {
            return Err(format!("echo of {} bytes came back with {}", data.len(), resp.data.len()).into());
        }
    }
    Ok(())
}

/// `n` unary echoes in all, by `g` concurrent tasks (g == 1: in the calling task).
pub(crate) async fn unary_calls<S: Spawn, C: Api>(
    rt: S,
    client: &C,
    data: &Bytes,
    n: u64,
    g: u64,
) -> Result<()> {
    if g == 1 {
        return unary_loop(client.clone(), data.clone(), n).await;
    }
    let tasks: Vec<_> = (0..g)
        .map(|i| {
            let count = n / g + u64::from(i < n % g);
            rt.spawn(unary_loop(client.clone(), data.clone(), count))
        })
        .collect();
    for task in tasks {
        task.await?;
    }
    Ok(())
}

pub(crate) async fn server_stream_calls<C: Api>(client: &C, n: u64, count: u32, size: u32) -> Result<()> {
    let mut client = client.clone();
    for _ in 0..n {
        let mut stream = client.server_stream(StreamRequest { count, size }).await?.into_inner();
        let mut got = 0;
        while let Some(msg) = stream.message().await? {
            if msg.data.len() != size as usize {
                return Err(format!("stream message of {} bytes, want {size}", msg.data.len()).into());
            }
            got += 1;
        }
        if got != count {
            return Err(format!("stream gave {got} messages, want {count}").into());
        }
    }
    Ok(())
}

pub(crate) async fn bidi_echo<C: Api>(cfg: Config, out: &Out, client: &C) -> Result<()> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Payload>(1);
    let responses = client.clone().bidi(tokio_stream::wrappers::ReceiverStream::new(rx)).await?.into_inner();
    let data = payload(32);
    // measure() takes an FnMut whose futures may not borrow it mutably; the lock is taken once
    // per batch, never per op.
    let shared = tokio::sync::Mutex::new(responses);
    measure(cfg, out, "bidi_echo", 1, |n| {
        let (tx, data, shared) = (&tx, &data, &shared);
        async move {
            let mut responses = shared.lock().await;
            for _ in 0..n {
                tx.send(Payload { data: data.clone() }).await.map_err(|_| "bidi request stream closed")?;
                let echo = responses.message().await?.ok_or("bidi response stream ended")?;
                if echo.data.len() != data.len() {
                    return Err(format!("bidi echo of {} bytes", echo.data.len()).into());
                }
            }
            Ok(())
        }
    })
    .await?;
    drop(tx);
    let mut responses = shared.into_inner();
    match responses.message().await? {
        None => Ok(()),
        Some(_) => Err("bidi: an echo too many".into()),
    }
}

pub(crate) async fn latency<S: Spawn, C: Api>(rt: S, cfg: Config, out: &Out, client: &C) -> Result<()> {
    let (tasks, calls) = (cfg.lat_tasks, cfg.lat_calls);
    let data = payload(32);
    let warm = (tasks * calls / 10 + tasks) as u64;
    unary_calls(rt, client, &data, warm, tasks as u64).await.map_err(|e| format!("latency warm-up: {e}"))?;

    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (mut client, data) = (client.clone(), data.clone());
            rt.spawn(async move {
                let mut lat = Vec::with_capacity(calls);
                for _ in 0..calls {
                    let start = Instant::now();
                    client.unary(Payload { data: data.clone() }).await?;
                    lat.push(start.elapsed());
                }
                Ok::<_, Status>(lat)
            })
        })
        .collect();
    let mut all = Vec::with_capacity(tasks * calls);
    for handle in handles {
        all.extend(handle.await?);
    }
    all.sort_unstable();
    for p in [50, 90, 95, 99] {
        // Nearest rank: the smallest latency with at least p% of the calls at or below it.
        let rank = (p as f64 / 100.0 * all.len() as f64).ceil() as usize - 1;
        let us = all[rank].as_nanos() as f64 / 1e3;
        out.emit("latency", &format!("p{p}_us"), (us * 1000.0).round() / 1000.0, "us");
    }
    Ok(())
}

/// The whole suite, on any transport, with its concurrent callers spawned by `rt`.
pub(crate) async fn run_suite<S: Spawn, C: Api>(rt: S, client: C, cfg: Config, out: &Out) -> Result<()> {
    for (case, size) in [
        ("unary_32", 32),
        ("unary_64", 64),
        ("unary_1k", 1 << 10),
        ("unary_10k", 10 << 10),
        ("unary_100k", 100 << 10),
        ("unary_1m", 1 << 20),
    ] {
        if out.wants(case) {
            let data = payload(size);
            measure(cfg, out, case, 1, |n| unary_calls(rt, &client, &data, n, 1)).await?;
        }
    }
    if out.wants("server_stream_100x32") {
        measure(cfg, out, "server_stream_100x32", 1, |n| server_stream_calls(&client, n, 100, 32)).await?;
    }
    if out.wants("bidi_echo") {
        bidi_echo(cfg, out, &client).await?;
    }
    for g in [10, 50, 100] {
        let case = format!("concurrent_{g}");
        if out.wants(&case) {
            let data = payload(32);
            measure(cfg, out, &case, g, |n| unary_calls(rt, &client, &data, n, g)).await?;
        }
    }
    if out.wants("latency") {
        latency(rt, cfg, out, &client).await?;
    }
    Ok(())
}
