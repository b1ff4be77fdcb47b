//! The gRPC interop suite's `grpc.testing.TestService`, implemented from the spec
//! (`doc/interop-test-descriptions.md` of grpc/grpc, "Server"), for `interop_server`: payloads
//! of zeros of the requested sizes, the requested status when one is set, response intervals,
//! the metadata echo of `custom_metadata` (by [`crate::EchoMetadata`] around it), and gzip
//! (the spec's CompressedRequest and CompressedResponse, see [`server`]).

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status, Streaming};

use crate::compression::{MessageFlags, RecordRequestFlags};

/// The generated code of `proto/grpc/testing`.
pub mod pb {
    tonic::include_proto!("grpc.testing");
}

use pb::test_service_server::{TestService, TestServiceServer};
use pb::*;

/// A payload of `size` zeros (the spec's COMPRESSABLE payload).
pub fn zeros(size: i32) -> Payload {
    Payload { r#type: PayloadType::Compressable as i32, body: Bytes::from(vec![0; size.max(0) as usize]) }
}

fn requested_status(status: &Option<EchoStatus>) -> Option<Status> {
    match status {
        Some(s) if s.code != 0 => Some(Status::new(tonic::Code::from_i32(s.code), s.message.clone())),
        _ => None,
    }
}

/// The spec's CompressedRequest: message `index` of a request that sets `expect_compressed`
/// must have arrived compressed (`true`) or not (`false`), else `INVALID_ARGUMENT`; unset, no
/// check (the field is nullable for servers that cannot tell).
fn check_compressed(
    flags: Option<&MessageFlags>,
    index: usize,
    expect: Option<&BoolValue>,
) -> Result<(), Status> {
    let Some(expect) = expect else { return Ok(()) };
    let Some(flags) = flags else {
        return Err(Status::internal("the server cannot tell compressed requests (no RecordRequestFlags)"));
    };
    let what = |c: bool| if c { "compressed" } else { "uncompressed" };
    match flags.get(index) {
        Some(got) if got == expect.value => Ok(()),
        Some(got) => Err(Status::invalid_argument(format!(
            "expect_compressed is {}, but message {index} arrived {}",
            expect.value,
            what(got)
        ))),
        None => Err(Status::internal(format!("no compressed flag recorded for message {index}"))),
    }
}

/// A response sent uncompressed unless `compressed` (tonic compresses a unary or
/// client-streaming response when the server sends gzip and the client accepts it).
fn respond<T>(message: T, compressed: bool) -> Response<T> {
    let mut response = Response::new(message);
    if !compressed {
        response.disable_compression();
    }
    response
}

/// The interop server's service: [`InteropService`] reading and (where a request asks)
/// sending gzip, its requests' compressed flags recorded for `expect_compressed`, inside the
/// metadata echo.
///
/// tonic chooses compression per response only for unary and client-streaming calls
/// (`Response::disable_compression`); a response *stream* is compressed whole when the client
/// accepts gzip, whatever `ResponseParameters.compressed` says, so this server does not pass
/// `server_compressed_streaming`.
pub fn server(
    service: InteropService,
) -> crate::EchoMetadata<RecordRequestFlags<TestServiceServer<InteropService>>> {
    let service = TestServiceServer::new(service)
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip);
    crate::EchoMetadata(RecordRequestFlags(service))
}

type OutStream = Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send>>;

/// The interop TestService; sleeps (response intervals) with the function it is given.
#[derive(Clone)]
pub struct InteropService {
    sleep: crate::SleepFn,
}

impl InteropService {
    pub fn new(sleep: crate::SleepFn) -> InteropService {
        InteropService { sleep }
    }

    /// The responses one request asks for, then its status if it asks for one.
    fn responses(
        &self,
        request: StreamingOutputCallRequest,
    ) -> impl Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send {
        let sleep = self.sleep;
        let status = requested_status(&request.response_status);
        futures_util::stream::iter(request.response_parameters)
            .then(move |p| async move {
                if p.interval_us > 0 {
                    sleep(Duration::from_micros(p.interval_us as u64)).await;
                }
                Ok(StreamingOutputCallResponse { payload: Some(zeros(p.size)) })
            })
            .chain(futures_util::stream::iter(status.map(Err)))
    }
}

#[tonic::async_trait]
impl TestService for InteropService {
    async fn empty_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Ok(respond(Empty {}, false))
    }

    async fn unary_call(&self, request: Request<SimpleRequest>) -> Result<Response<SimpleResponse>, Status> {
        let flags = request.extensions().get::<MessageFlags>().cloned();
        let request = request.into_inner();
        check_compressed(flags.as_ref(), 0, request.expect_compressed.as_ref())?;
        if let Some(status) = requested_status(&request.response_status) {
            return Err(status);
        }
        let compressed = request.response_compressed.is_some_and(|c| c.value);
        Ok(respond(
            SimpleResponse { payload: Some(zeros(request.response_size)), ..Default::default() },
            compressed,
        ))
    }

    async fn cacheable_unary_call(
        &self,
        request: Request<SimpleRequest>,
    ) -> Result<Response<SimpleResponse>, Status> {
        self.unary_call(request).await
    }

    type StreamingOutputCallStream = OutStream;

    async fn streaming_output_call(
        &self,
        request: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<OutStream>, Status> {
        Ok(Response::new(Box::pin(self.responses(request.into_inner()))))
    }

    async fn streaming_input_call(
        &self,
        request: Request<Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        let flags = request.extensions().get::<MessageFlags>().cloned();
        let mut stream = request.into_inner();
        let mut total = 0i32;
        let mut index = 0;
        while let Some(msg) = stream.message().await? {
            // The message's prefix has been read, so its flag is known (client_compressed_streaming).
            check_compressed(flags.as_ref(), index, msg.expect_compressed.as_ref())?;
            index += 1;
            total = total.saturating_add(msg.payload.map_or(0, |p| p.body.len() as i32));
        }
        Ok(respond(StreamingInputCallResponse { aggregated_payload_size: total }, false))
    }

    type FullDuplexCallStream = OutStream;

    async fn full_duplex_call(
        &self,
        request: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<OutStream>, Status> {
        let service = self.clone();
        // Each request answered in turn; the first error (requested, or of the inbound stream)
        // ends the call with that status.
        let stream = request
            .into_inner()
            .map(move |req| -> OutStream {
                match req {
                    Ok(req) => Box::pin(service.responses(req)),
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
            });
        Ok(Response::new(Box::pin(stream)))
    }

    type HalfDuplexCallStream = OutStream;

    async fn half_duplex_call(
        &self,
        request: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<OutStream>, Status> {
        // All requests first, then all their responses.
        let mut inbound = request.into_inner();
        let mut requests = Vec::new();
        while let Some(req) = inbound.message().await? {
            requests.push(req);
        }
        let service = self.clone();
        let stream = futures_util::stream::iter(requests).flat_map(move |req| service.responses(req));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn unimplemented_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("UnimplementedCall is not implemented"))
    }
}
