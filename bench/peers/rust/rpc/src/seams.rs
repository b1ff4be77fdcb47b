//! The seams every competitor plugs into: the client transport ([`Transport`], [`Api`]) and
//! the runtime that spawns the concurrent callers ([`Spawn`]).

use std::future::Future;

use bytes::Bytes;
use tonic::client::GrpcService;
use tonic::codegen::{Body as HttpBody, StdError};
use tonic::{Response, Status};

use crate::pb::bench_client::BenchClient;
use crate::pb::bench_typed::BenchClient as TypedBenchClient;
use crate::pb::{Payload, StreamRequest};

/// What [`run_suite`](crate::suite::run_suite) needs of a client transport: tonic's [`GrpcService`] (any
/// `tower::Service<http::Request<tonic::body::Body>>` answering `http::Response<B>`), cheap to
/// clone, usable from spawned tasks.
///
/// Every competitor is one such service: `BenchServer<Echo>` itself (tonic-direct) or
/// `tonic::transport::Channel` (tonic-duplex, tonic-tcp). spindle's in-process channel joins
/// by being one too. Adding it takes:
///
/// 1. `spindle-grpc = { path = "../../../../crates/spindle-grpc" }` in rpc/Cargo.toml;
/// 2. a constructor next to [`tonic_direct`](crate::competitors::tonic_direct), serving the
///    same [`Echo`](crate::service::Echo):
///    ```ignore
///    fn spindle_grpc() -> BenchClient<spindle_grpc::Channel> {
///        BenchClient::new(spindle_grpc::Channel::new().add_service(BenchServer::new(Echo)))
///    }
///    ```
///    (whatever spindle-grpc's API turns out to be);
/// 3. if it runs on spindle's runtime rather than tokio's, an `impl Spawn for Spindle` (next to
///    [`Tokio`]) that spawns a task on spindle's workers and awaits its result;
/// 4. one arm in [`main`](crate::main)'s match, running the suite on that runtime:
///    ```ignore
///    "spindle-grpc" => spindle::Runtime::new()?.block_on(run_suite(Spindle, spindle_grpc(), cfg, &out)),
///    ```
/// 5. a `[[competitor]] name = "spindle-grpc"` in rpc.peer.toml (`--competitor spindle-grpc`).
pub(crate) trait Transport:
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

/// The calls [`run_suite`](crate::suite::run_suite) makes: tonic's generated client on any [`Transport`], or the typed
/// client that spindle-grpc-build generates beside it (whose streams are spindle-grpc's
/// `typed::Streaming`). Each method is the client's own, called as it is.
pub(crate) trait Api: Clone + Send + Sync + 'static {
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
pub(crate) trait Responses: Send + 'static {
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

/// What [`run_suite`](crate::suite::run_suite) needs of the async runtime: spawning the concurrent callers as tasks
/// (so that the runtime can interleave them) and awaiting their results. Everything else the
/// suite uses (tokio's mpsc and Mutex, tokio-stream) works on any executor.
pub(crate) trait Spawn: Copy + Send + Sync + 'static {
    /// Spawns `fut` as a task; the returned future resolves to its output (and resumes its
    /// panic, if it panicked).
    fn spawn<F>(self, fut: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
}

/// tokio's `spawn`, on whichever runtime (current_thread or multi_thread) runs the suite.
#[derive(Clone, Copy)]
pub(crate) struct Tokio;

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
pub(crate) struct Spindle;

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
