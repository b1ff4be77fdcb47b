//! The `Bench` service every competitor serves.

use std::pin::Pin;

use bytes::Bytes;
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status};

use crate::pb::bench_server::Bench;
use crate::pb::{Payload, StreamRequest};

/// The Bench service: echoes, streams `count` messages of `size` bytes, echoes a stream.
#[derive(Clone, Copy, Default)]
pub(crate) struct Echo;

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
