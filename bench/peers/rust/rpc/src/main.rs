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
//!   the suite running as a task on a one-worker spindle runtime (the handler runs in the
//!   caller's call on that worker); `--workers N` gives the runtime N workers.
//! * `spindle-grpc-mt`: the same on a runtime with a worker per core (like Go's default
//!   GOMAXPROCS); the concurrent callers, spawned as tasks, spread over the workers by work
//!   stealing, and each call runs its handler on its caller's worker.
//! * `spindle-grpc-typed`: spindle-grpc's typed fast path: `BenchServer<Echo>` registered with
//!   `add_typed_service` and the typed client that spindle-grpc-build generates beside tonic's
//!   (`pb::bench_typed::BenchClient`) on the same one-worker runtime: the client's messages are
//!   moved into the handler and back, never encoded.
//! * `spindle-grpc-tcp`: spindle-grpc's network `Server` on `127.0.0.1:0` and a
//!   `RemoteChannel` over loopback (HTTP/2 by hyper on spindle sockets, one connection), on a
//!   one-worker spindle runtime that runs server, client and callers (the single-core
//!   comparable of tonic-tcp on current_thread); `--workers N` gives it N workers.
//!
//! Every competitor runs the same client code, [`run_suite`], which is generic over the
//! client ([`Api`]: tonic's generated client on any [`Transport`], or the typed client) and
//! over the async runtime that spawns the concurrent callers ([`Spawn`]). Adding a competitor (spindle-grpc) is a function that builds its
//! `BenchClient`, a `Spawn` impl if it runs on another runtime than tokio, and one match arm
//! in [`main`]; see [`Transport`] for the recipe.
//!
//! Output: one JSON line per measurement (bench/peers/README.md). Throughput cases calibrate
//! their op count from a warm-up, time exactly N ops, then run a shorter pass with the
//! counting allocator switched on for `bytes_per_op` and `allocs_per_op` (so the counter's
//! atomics never slow the timed pass). Allocations are counted process wide: client, server
//! and runtime alike, as Go's runtime.MemStats counts them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_stream::{Stream, StreamExt as _};
use tonic::client::GrpcService;
use tonic::codegen::{Body as HttpBody, StdError};
use tonic::{Request, Response, Status};

pub mod pb {
    tonic::include_proto!("spindle.bench");
}

use pb::bench_client::BenchClient;
use pb::bench_server::{Bench, BenchServer};
use pb::bench_typed::BenchClient as TypedBenchClient;
use pb::{Payload, StreamRequest};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = BoxError> = std::result::Result<T, E>;

// ---------------------------------------------------------------------------------------
// Allocation counting.

/// The system allocator, counting allocations and requested bytes while [`COUNTING`] is on.
/// A `realloc` counts as one allocation of its new size (what a copying grow costs, and
/// what Go counts when append grows a slice).
struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

#[inline]
fn count(size: usize) {
    if COUNTING.load(Relaxed) {
        ALLOCS.fetch_add(1, Relaxed);
        BYTES.fetch_add(size as u64, Relaxed);
    }
}

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Runs `f` with allocation counting on; returns its result and (allocations, bytes).
async fn counting<F: Future>(f: F) -> (F::Output, u64, u64) {
    let (a0, b0) = (ALLOCS.load(Relaxed), BYTES.load(Relaxed));
    COUNTING.store(true, Relaxed);
    let out = f.await;
    COUNTING.store(false, Relaxed);
    (out, ALLOCS.load(Relaxed) - a0, BYTES.load(Relaxed) - b0)
}

// ---------------------------------------------------------------------------------------
// The service.

/// The Bench service: echoes, streams `count` messages of `size` bytes, echoes a stream.
#[derive(Clone, Copy, Default)]
struct Echo;

type PayloadStream = Pin<Box<dyn Stream<Item = Result<Payload, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Bench for Echo {
    async fn unary(&self, request: Request<Payload>) -> Result<Response<Payload>, Status> {
        Ok(Response::new(request.into_inner()))
    }

    type ServerStreamStream = PayloadStream;

    async fn server_stream(
        &self,
        request: Request<StreamRequest>,
    ) -> Result<Response<PayloadStream>, Status> {
        let StreamRequest { count, size } = request.into_inner();
        // One buffer per call, shared by its messages (a refcount per message), as the Go
        // peer sends one message again and again.
        let data = Bytes::from(vec![0u8; size as usize]);
        let stream = tokio_stream::iter(0..count).map(move |_| Ok(Payload { data: data.clone() }));
        Ok(Response::new(Box::pin(stream)))
    }

    type BidiStream = PayloadStream;

    async fn bidi(
        &self,
        request: Request<tonic::Streaming<Payload>>,
    ) -> Result<Response<PayloadStream>, Status> {
        // The inbound stream is already a stream of Result<Payload, Status>: answering with it
        // echoes every message as it is decoded, without a task or a channel in between.
        Ok(Response::new(Box::pin(request.into_inner())))
    }
}

// ---------------------------------------------------------------------------------------
// The seams: transport and runtime.

/// What [`run_suite`] needs of a client transport: tonic's [`GrpcService`] (any
/// `tower::Service<http::Request<tonic::body::Body>>` answering `http::Response<B>`), cheap to
/// clone, usable from spawned tasks.
///
/// Every competitor is one such service: `BenchServer<Echo>` itself (tonic-direct) or
/// `tonic::transport::Channel` (tonic-duplex, tonic-tcp). spindle's in-process channel joins
/// by being one too. Adding it takes:
///
/// 1. `spindle-grpc = { path = "../../../../crates/spindle-grpc" }` in rpc/Cargo.toml;
/// 2. a constructor next to [`tonic_direct`], serving the same [`Echo`]:
///    ```ignore
///    fn spindle_grpc() -> BenchClient<spindle_grpc::Channel> {
///        BenchClient::new(spindle_grpc::Channel::new().add_service(BenchServer::new(Echo)))
///    }
///    ```
///    (whatever spindle-grpc's API turns out to be);
/// 3. if it runs on spindle's runtime rather than tokio's, an `impl Spawn for Spindle` (next to
///    [`Tokio`]) that spawns a task on spindle's workers and awaits its result;
/// 4. one arm in [`main`]'s match, running the suite on that runtime:
///    ```ignore
///    "spindle-grpc" => spindle::Runtime::new()?.block_on(run_suite(Spindle, spindle_grpc(), cfg, &out)),
///    ```
/// 5. a `[[competitor]] name = "spindle-grpc"` in rpc.peer.toml (`--competitor spindle-grpc`).
trait Transport:
    GrpcService<
        tonic::body::Body,
        Error: Into<StdError> + Send,
        Future: Send,
        ResponseBody: HttpBody<Data = Bytes, Error: Into<StdError> + Send> + Send + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<T> Transport for T where
    T: GrpcService<
            tonic::body::Body,
            Error: Into<StdError> + Send,
            Future: Send,
            ResponseBody: HttpBody<Data = Bytes, Error: Into<StdError> + Send> + Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// The calls [`run_suite`] makes: tonic's generated client on any [`Transport`], or the typed
/// client that spindle-grpc-build generates beside it (whose streams are spindle-grpc's
/// `typed::Streaming`). Each method is the client's own, called as it is.
trait Api: Clone + Send + Sync + 'static {
    type Responses: Responses;

    fn unary(&mut self, request: Payload) -> impl Future<Output = Result<Response<Payload>, Status>> + Send;

    fn server_stream(
        &mut self,
        request: StreamRequest,
    ) -> impl Future<Output = Result<Response<Self::Responses>, Status>> + Send;

    fn bidi(
        &mut self,
        requests: tokio_stream::wrappers::ReceiverStream<Payload>,
    ) -> impl Future<Output = Result<Response<Self::Responses>, Status>> + Send;
}

/// A response stream's `message()`.
trait Responses: Send + 'static {
    fn message(&mut self) -> impl Future<Output = Result<Option<Payload>, Status>> + Send;
}

impl Responses for tonic::Streaming<Payload> {
    fn message(&mut self) -> impl Future<Output = Result<Option<Payload>, Status>> + Send {
        tonic::Streaming::message(self)
    }
}

impl Responses for spindle_grpc::typed::Streaming<Payload> {
    fn message(&mut self) -> impl Future<Output = Result<Option<Payload>, Status>> + Send {
        spindle_grpc::typed::Streaming::message(self)
    }
}

impl<T: Transport> Api for BenchClient<T> {
    type Responses = tonic::Streaming<Payload>;

    fn unary(&mut self, request: Payload) -> impl Future<Output = Result<Response<Payload>, Status>> + Send {
        BenchClient::unary(self, request)
    }

    fn server_stream(
        &mut self,
        request: StreamRequest,
    ) -> impl Future<Output = Result<Response<Self::Responses>, Status>> + Send {
        BenchClient::server_stream(self, request)
    }

    fn bidi(
        &mut self,
        requests: tokio_stream::wrappers::ReceiverStream<Payload>,
    ) -> impl Future<Output = Result<Response<Self::Responses>, Status>> + Send {
        BenchClient::bidi(self, requests)
    }
}

impl Api for TypedBenchClient<spindle_grpc::Channel> {
    type Responses = spindle_grpc::typed::Streaming<Payload>;

    fn unary(&mut self, request: Payload) -> impl Future<Output = Result<Response<Payload>, Status>> + Send {
        TypedBenchClient::unary(self, request)
    }

    fn server_stream(
        &mut self,
        request: StreamRequest,
    ) -> impl Future<Output = Result<Response<Self::Responses>, Status>> + Send {
        TypedBenchClient::server_stream(self, request)
    }

    fn bidi(
        &mut self,
        requests: tokio_stream::wrappers::ReceiverStream<Payload>,
    ) -> impl Future<Output = Result<Response<Self::Responses>, Status>> + Send {
        TypedBenchClient::bidi(self, requests)
    }
}

/// What [`run_suite`] needs of the async runtime: spawning the concurrent callers as tasks
/// (so that the runtime can interleave them) and awaiting their results. Everything else the
/// suite uses (tokio's mpsc and Mutex, tokio-stream) works on any executor.
trait Spawn: Copy + Send + Sync + 'static {
    /// Spawns `fut` as a task; the returned future resolves to its output (and resumes its
    /// panic, if it panicked).
    fn spawn<F>(self, fut: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
}

/// tokio's `spawn`, on whichever runtime (current_thread or multi_thread) runs the suite.
#[derive(Clone, Copy)]
struct Tokio;

impl Spawn for Tokio {
    fn spawn<F>(self, fut: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = tokio::spawn(fut);
        async move {
            match task.await {
                Ok(out) => out,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("a caller task was cancelled: {e}"),
            }
        }
    }
}

/// spindle's task spawn, for the suite running on a spindle runtime.
#[derive(Clone, Copy)]
struct Spindle;

impl Spawn for Spindle {
    fn spawn<F>(self, fut: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = spindle::task::spawn_async(fut);
        async move {
            match task.await {
                Ok(out) => out,
                Err(err) => std::panic::resume_unwind(err.into_panic()),
            }
        }
    }
}

/// spindle-grpc: the generated client on spindle-grpc's in-process Channel, serving the same
/// [`Echo`]. Calls made from the runtime's worker run their handler there.
fn spindle_grpc(rt: &spindle::Runtime) -> BenchClient<spindle_grpc::Channel> {
    BenchClient::new(
        spindle_grpc::Channel::new().with_handle(rt.handle()).add_service(BenchServer::new(Echo)),
    )
}

/// spindle-grpc-typed: the typed client on spindle-grpc's in-process Channel with
/// `BenchServer<Echo>` registered typed: messages moved, never encoded.
fn spindle_grpc_typed(rt: &spindle::Runtime) -> Result<TypedBenchClient<spindle_grpc::Channel>> {
    let channel =
        spindle_grpc::Channel::new().with_handle(rt.handle()).add_typed_service(BenchServer::new(Echo));
    let client = TypedBenchClient::new(channel);
    if !client.is_typed() {
        return Err("the typed client found no typed route".into());
    }
    Ok(client)
}

/// spindle-grpc-tcp: spindle-grpc's network server on 127.0.0.1:0 (TCP_NODELAY) and a
/// RemoteChannel connected to it over loopback. Called in a fiber on the runtime.
fn spindle_grpc_tcp() -> Result<BenchClient<spindle_grpc::RemoteChannel>> {
    let channel = spindle_grpc::Channel::new().add_service(BenchServer::new(Echo));
    let listener = spindle::net::TcpListener::bind("127.0.0.1:0")?;
    // Serves until the process exits (dropping `Serving` does not stop it).
    let serving = spindle_grpc::Server::new(channel).serve_tcp(listener)?;
    let addr = serving.local_addr().ok_or("no TCP address")?;
    let endpoint = spindle_grpc::Endpoint::new(format!("http://{addr}"))?;
    Ok(BenchClient::new(spindle::task::block_on(endpoint.connect())?))
}

/// Runs `suite` as a task on a spindle runtime (one worker for `spindle-grpc`, the single-core
/// comparable of tokio's current_thread runtime) and waits for it from this thread.
fn on_spindle(suite: impl Future<Output = Result<()>> + Send + 'static, rt: spindle::Runtime) -> Result<()> {
    let result = rt.handle().spawn_async(suite).join();
    drop(rt);
    match result {
        Ok(out) => out,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// tonic-direct: the generated client on the generated server, no transport at all.
fn tonic_direct() -> BenchClient<BenchServer<Echo>> {
    BenchClient::new(BenchServer::new(Echo))
}

/// The duplex pipe's buffer, each way. Larger than the largest HTTP/2 frame tonic sends by
/// default (16 KiB) so that a frame never waits on the pipe.
const DUPLEX_BUFFER: usize = 256 * 1024;

/// tonic-duplex: a tonic server and a Channel joined by an in-memory byte pipe.
async fn tonic_duplex() -> Result<BenchClient<tonic::transport::Channel>> {
    use hyper_util::rt::TokioIo;
    use tonic::transport::{Endpoint, Server, Uri};

    let (client_io, server_io) = tokio::io::duplex(DUPLEX_BUFFER);
    let incoming = tokio_stream::once(Ok::<_, std::io::Error>(server_io));
    tokio::spawn(Server::builder().add_service(BenchServer::new(Echo)).serve_with_incoming(incoming));
    let mut client_io = Some(client_io);
    // The URI is never resolved: the connector hands over the pipe's other end, once.
    let channel = Endpoint::from_static("http://in-memory.invalid")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let io = client_io.take();
            async move {
                io.map(TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("the duplex pipe is already connected"))
            }
        }))
        .await?;
    Ok(BenchClient::new(channel))
}

/// tonic-tcp: a tonic server on 127.0.0.1:0, a Channel over loopback (TCP_NODELAY both ways).
async fn tonic_tcp() -> Result<BenchClient<tonic::transport::Channel>> {
    use tonic::transport::server::TcpIncoming;
    use tonic::transport::{Endpoint, Server};

    let incoming = TcpIncoming::bind("127.0.0.1:0".parse()?)?.with_nodelay(Some(true));
    let addr = incoming.local_addr()?;
    tokio::spawn(Server::builder().add_service(BenchServer::new(Echo)).serve_with_incoming(incoming));
    let channel = Endpoint::from_shared(format!("http://{addr}"))?.tcp_nodelay(true).connect().await?;
    Ok(BenchClient::new(channel))
}

// ---------------------------------------------------------------------------------------
// Measurement.

#[derive(Clone, Copy)]
struct Config {
    /// Measured time per throughput case.
    target: Duration,
    /// Warm-up (and calibration) time per case.
    warmup: Duration,
    /// At least this many measured ops.
    min_ops: u64,
    /// Latency case: callers, and calls per caller.
    lat_tasks: usize,
    lat_calls: usize,
}

struct Out {
    competitor: String,
    only: Option<String>,
}

impl Out {
    fn emit(&self, case: &str, metric: &str, value: f64, unit: &str) {
        let value = if value.is_finite() { value } else { 0.0 };
        println!(
            r#"{{"suite":"rpc","case":"{case}","competitor":"{}","metric":"{metric}","value":{value},"unit":"{unit}"}}"#,
            self.competitor
        );
    }

    fn wants(&self, case: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == case)
    }
}

fn round_up(n: u64, g: u64) -> u64 {
    n.div_ceil(g) * g
}

/// Warms up for `cfg.warmup` (doubling batches), sizes N for `cfg.target` from the warm-up's
/// rate, times exactly N ops, then counts allocations over a pass of N/10 ops. `run(n)`
/// performs n ops in all, over `g` callers.
async fn measure<F, Fut>(cfg: Config, out: &Out, case: &str, g: u64, mut run: F) -> Result<()>
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

fn payload(size: usize) -> Bytes {
    (0..size).map(|i| i as u8).collect::<Vec<u8>>().into()
}

/// `count` unary echoes of `data` in a row.
async fn unary_loop<C: Api>(mut client: C, data: Bytes, count: u64) -> Result<()> {
    for _ in 0..count {
        let resp = client.unary(Payload { data: data.clone() }).await?.into_inner();
        if resp.data.len() != data.len() {
            return Err(format!("echo of {} bytes came back with {}", data.len(), resp.data.len()).into());
        }
    }
    Ok(())
}

/// `n` unary echoes in all, by `g` concurrent tasks (g == 1: in the calling task).
async fn unary_calls<S: Spawn, C: Api>(rt: S, client: &C, data: &Bytes, n: u64, g: u64) -> Result<()> {
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

async fn server_stream_calls<C: Api>(client: &C, n: u64, count: u32, size: u32) -> Result<()> {
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

async fn bidi_echo<C: Api>(cfg: Config, out: &Out, client: &C) -> Result<()> {
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

async fn latency<S: Spawn, C: Api>(rt: S, cfg: Config, out: &Out, client: &C) -> Result<()> {
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
async fn run_suite<S: Spawn, C: Api>(rt: S, client: C, cfg: Config, out: &Out) -> Result<()> {
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

// ---------------------------------------------------------------------------------------

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
            let rt = spindle::Builder::new().worker_threads(workers).build()?;
            let client = spindle_grpc(&rt);
            on_spindle(async move { run_suite(Spindle, client, cfg, &out).await }, rt)
        })(),
        "spindle-grpc-typed" => (|| {
            let rt = spindle::Builder::new().worker_threads(workers).build()?;
            let client = spindle_grpc_typed(&rt)?;
            on_spindle(async move { run_suite(Spindle, client, cfg, &out).await }, rt)
        })(),
        "spindle-grpc-tcp" => (|| {
            let rt = spindle::Builder::new().worker_threads(workers).build()?;
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
