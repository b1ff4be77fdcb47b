//! The service of spindle-grpc's conformance tests: `spindle.interop.TestService`, modelled on
//! the gRPC interop suite's TestService (see `proto/test.proto`), with an implementation that
//! counts its live handlers and payload buffers, so that tests can assert that nothing leaks.
//!
//! The implementation is runtime-neutral: it sleeps through the function it is given
//! (spindle's timers in process, tokio's over TCP).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};

pub mod pb {
    tonic::include_proto!("spindle.interop");
}

pub mod args;
pub mod cases;
pub mod compression;
pub mod counted;
mod echo_metadata;
pub mod grpc_testing;
pub use echo_metadata::{EchoMetadata, ECHO_INITIAL, ECHO_TRAILING};

use pb::test_service_server::TestService;
use pb::*;

/// Sleeps on the caller's runtime.
pub type SleepFn = fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Live-object counters shared by a server and its tests.
#[derive(Debug, Default)]
pub struct Counters {
    /// Handlers (unary futures or response streams) alive now.
    pub live_handlers: AtomicI64,
    /// Handlers started in all.
    pub started: AtomicU64,
    /// Handlers dropped before they finished (cancelled by the client or a deadline).
    pub dropped_early: AtomicU64,
    /// Payload buffers made by [`payload`] alive now (server responses and client requests).
    pub live_payloads: AtomicI64,
    /// Payload buffers made by [`payload`] in all.
    pub produced: AtomicU64,
}

/// A handler's presence: counted while alive; `finish` marks a normal end.
#[derive(Debug)]
pub struct Live {
    counters: Arc<Counters>,
    finished: bool,
}

impl Live {
    pub fn new(counters: &Arc<Counters>) -> Live {
        counters.live_handlers.fetch_add(1, Ordering::SeqCst);
        counters.started.fetch_add(1, Ordering::SeqCst);
        Live { counters: counters.clone(), finished: false }
    }

    pub fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if !self.finished {
            self.counters.dropped_early.fetch_add(1, Ordering::SeqCst);
        }
        self.counters.live_handlers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A counted buffer: `live_payloads` is one higher while it (or a `Bytes` sharing it) lives.
struct CountedBuf {
    data: Vec<u8>,
    counters: Arc<Counters>,
}

impl AsRef<[u8]> for CountedBuf {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for CountedBuf {
    fn drop(&mut self) {
        self.counters.live_payloads.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A payload of `size` bytes (`i as u8` patterns), counted in `counters.live_payloads`.
pub fn payload(counters: &Arc<Counters>, size: usize) -> Payload {
    counters.live_payloads.fetch_add(1, Ordering::SeqCst);
    counters.produced.fetch_add(1, Ordering::SeqCst);
    let data = (0..size).map(|i| i as u8).collect();
    Payload { body: Bytes::from_owner(CountedBuf { data, counters: counters.clone() }) }
}

/// The TestService implementation.
#[derive(Clone)]
pub struct Server {
    pub counters: Arc<Counters>,
    sleep: SleepFn,
}

impl Server {
    pub fn new(sleep: SleepFn) -> Server {
        Server { counters: Arc::default(), sleep }
    }
}

fn requested_status(status: &Option<EchoStatus>) -> Option<Status> {
    match status {
        Some(s) if s.code != 0 => Some(Status::new(tonic::Code::from_i32(s.code), s.message.clone())),
        _ => None,
    }
}

type OutStream = Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send>>;

/// Answers one request's `response_parameters`, in order, then its `response_status` if set.
fn responses(
    server: Server,
    request: StreamingOutputCallRequest,
) -> impl Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send {
    let status = requested_status(&request.response_status);
    let params = request.response_parameters;
    futures_util::stream::iter(params)
        .then(move |p| {
            let server = server.clone();
            async move {
                if p.interval_us > 0 {
                    (server.sleep)(Duration::from_micros(p.interval_us as u64)).await;
                }
                if p.panic {
                    panic!("the response stream was asked to panic");
                }
                Ok(StreamingOutputCallResponse { payload: Some(payload(&server.counters, p.size as usize)) })
            }
        })
        .chain(futures_util::stream::iter(status.map(Err)))
}

#[tonic::async_trait]
impl TestService for Server {
    async fn empty_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        let mut live = Live::new(&self.counters);
        live.finish();
        Ok(Response::new(Empty {}))
    }

    async fn unary_call(&self, request: Request<SimpleRequest>) -> Result<Response<SimpleResponse>, Status> {
        let mut live = Live::new(&self.counters);
        let request = request.into_inner();
        if request.sleep_ms > 0 {
            (self.sleep)(Duration::from_millis(request.sleep_ms as u64)).await;
        }
        if request.panic {
            panic!("the handler was asked to panic");
        }
        live.finish();
        if let Some(status) = requested_status(&request.response_status) {
            return Err(status);
        }
        Ok(Response::new(SimpleResponse {
            payload: Some(payload(&self.counters, request.response_size.max(0) as usize)),
        }))
    }

    type StreamingOutputCallStream = OutStream;

    async fn streaming_output_call(
        &self,
        request: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<OutStream>, Status> {
        let mut live = Live::new(&self.counters);
        let stream =
            responses(self.clone(), request.into_inner()).chain(futures_util::stream::poll_fn(move |_| {
                live.finish();
                std::task::Poll::Ready(None)
            }));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn streaming_input_call(
        &self,
        request: Request<Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        let mut live = Live::new(&self.counters);
        let mut stream = request.into_inner();
        let mut total = 0i64;
        while let Some(msg) = stream.message().await? {
            total += msg.payload.map_or(0, |p| p.body.len() as i64);
        }
        live.finish();
        Ok(Response::new(StreamingInputCallResponse { aggregated_payload_size: total }))
    }

    type FullDuplexCallStream = OutStream;

    async fn full_duplex_call(
        &self,
        request: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<OutStream>, Status> {
        let mut live = Live::new(&self.counters);
        let server = self.clone();
        let inbound = request.into_inner();
        // Answer each request in turn; an error (in the inbound stream or requested) ends the
        // call with that status.
        let stream = inbound
            .map(move |req| -> OutStream {
                match req {
                    Ok(req) => Box::pin(responses(server.clone(), req)),
                    Err(status) => Box::pin(futures_util::stream::once(async move { Err(status) })),
                }
            })
            .flatten()
            .scan(false, |failed, item| {
                let out = if *failed { None } else { Some(item) };
                if let Some(Err(_)) = &out {
                    *failed = true;
                }
                std::future::ready(out)
            })
            .chain(futures_util::stream::poll_fn(move |_| {
                live.finish();
                std::task::Poll::Ready(None)
            }));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn unimplemented_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("UnimplementedCall is not implemented"))
    }
}
