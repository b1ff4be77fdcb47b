//! One constructor per competitor: the client on its transport, serving the same
//! [`Echo`], and the runtimes the suite runs on.

use std::future::Future;

use crate::pb::bench_client::BenchClient;
use crate::pb::bench_server::BenchServer;
use crate::pb::bench_typed::BenchClient as TypedBenchClient;
use crate::service::Echo;
use crate::Result;

/// spindle-grpc: the generated client on spindle-grpc's in-process Channel, serving the same
/// [`Echo`]. Calls made from the runtime's worker run their handler there.
pub(crate) fn spindle_grpc(rt: &SpindleRt) -> BenchClient<spindle_grpc::Channel> {
    BenchClient::new(
        spindle_grpc::Channel::new().with_handle(rt.handle()).add_service(BenchServer::new(Echo)),
    )
}

/// spindle-grpc-typed: the typed client on spindle-grpc's in-process Channel with
/// `BenchServer<Echo>` registered typed: messages moved, never encoded.
pub(crate) fn spindle_grpc_typed(rt: &SpindleRt) -> Result<TypedBenchClient<spindle_grpc::Channel>> {
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
pub(crate) fn spindle_grpc_tcp() -> Result<BenchClient<spindle_grpc::RemoteChannel>> {
    let channel = spindle_grpc::Channel::new().add_service(BenchServer::new(Echo));
    let listener = spindle::net::TcpListener::bind("127.0.0.1:0")?;
    // Serves until the process exits (dropping `Serving` does not stop it).
    let serving = spindle_grpc::Server::new(channel).serve_tcp(listener)?;
    let addr = serving.local_addr().ok_or("no TCP address")?;
    let endpoint = spindle_grpc::Endpoint::new(format!("http://{addr}"))?;
    Ok(BenchClient::new(spindle::task::block_on(endpoint.connect())?))
}

/// The spindle runtime a competitor runs on: for one worker a `spindle::LocalRuntime` (this
/// thread is the worker, no worker thread: the single-core comparable of tokio's
/// current_thread runtime), for more a runtime with that many worker threads.
pub(crate) enum SpindleRt {
    Local(spindle::LocalRuntime),
    Pool(spindle::Runtime),
}

impl SpindleRt {
    pub(crate) fn new(workers: usize) -> Result<SpindleRt> {
        Ok(match workers {
            1 => SpindleRt::Local(spindle::Builder::new().build_local()?),
            n => SpindleRt::Pool(spindle::Builder::new().worker_threads(n).build()?),
        })
    }

    pub(crate) fn handle(&self) -> spindle::Handle {
        match self {
            SpindleRt::Local(rt) => rt.handle(),
            SpindleRt::Pool(rt) => rt.handle(),
        }
    }

    /// Runs `f` in a fiber of the runtime and returns its result.
    pub(crate) fn block_on<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        match self {
            SpindleRt::Local(rt) => rt.block_on(f),
            SpindleRt::Pool(rt) => rt.block_on(f),
        }
    }
}

/// Runs `suite` as a task spawned on the runtime and waits for it (as `on_tokio` spawns it
/// on tokio's).
pub(crate) fn on_spindle(
    suite: impl Future<Output = Result<()>> + Send + 'static,
    rt: SpindleRt,
) -> Result<()> {
    let result = rt.block_on(move || spindle::task::spawn_async(suite).join());
    drop(rt);
    match result {
        Ok(out) => out,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

/// tonic-direct: the generated client on the generated server, no transport at all.
pub(crate) fn tonic_direct() -> BenchClient<BenchServer<Echo>> {
    BenchClient::new(BenchServer::new(Echo))
}

/// The duplex pipe's buffer, each way. Larger than the largest HTTP/2 frame tonic sends by
/// default (16 KiB) so that a frame never waits on the pipe.
pub(crate) const DUPLEX_BUFFER: usize = 256 * 1024;

/// tonic-duplex: a tonic server and a Channel joined by an in-memory byte pipe.
pub(crate) async fn tonic_duplex() -> Result<BenchClient<tonic::transport::Channel>> {
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
pub(crate) async fn tonic_tcp() -> Result<BenchClient<tonic::transport::Channel>> {
    use tonic::transport::server::TcpIncoming;
    use tonic::transport::{Endpoint, Server};

    let incoming = TcpIncoming::bind("127.0.0.1:0".parse()?)?.with_nodelay(Some(true));
    let addr = incoming.local_addr()?;
    tokio::spawn(Server::builder().add_service(BenchServer::new(Echo)).serve_with_incoming(incoming));
    let channel = Endpoint::from_shared(format!("http://{addr}"))?.tcp_nodelay(true).connect().await?;
    Ok(BenchClient::new(channel))
}
