//! The counted service: one message type, [`Counted`], implemented by hand to count how often
//! it is encoded and decoded, and [`CountedEcho`], a `CountedService` that echoes. The typed
//! fast path's tests call it every way (unary, both streamings) and check that the counters do
//! not move; on the encoded path they do.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use bytes::{Buf, BufMut, Bytes};
use futures_util::{Stream, StreamExt as _};
use prost::encoding::{DecodeContext, WireType};
use prost::DecodeError;
use tonic::{Request, Response, Status, Streaming};

/// The generated code of `proto/counted.proto` (its message is [`Counted`]).
pub mod pb {
    tonic::include_proto!("spindle.counted");
}

/// [`Counted`] messages encoded, in all.
pub static ENCODED: AtomicU64 = AtomicU64::new(0);
/// [`Counted`] messages decoded, in all.
pub static DECODED: AtomicU64 = AtomicU64::new(0);

/// `message Counted { bytes data = 1; }`, counting its encodings and decodings.
#[derive(Clone, PartialEq, Default, Debug)]
pub struct Counted {
    pub data: Bytes,
}

impl prost::Message for Counted {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        ENCODED.fetch_add(1, SeqCst);
        if !self.data.is_empty() {
            prost::encoding::bytes::encode(1, &self.data, buf);
        }
    }

    fn merge(&mut self, mut buf: impl Buf) -> Result<(), DecodeError> {
        DECODED.fetch_add(1, SeqCst);
        let ctx = DecodeContext::default();
        while buf.has_remaining() {
            let (tag, wire_type) = prost::encoding::decode_key(&mut buf)?;
            self.merge_field(tag, wire_type, &mut buf, ctx.clone())?;
        }
        Ok(())
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match tag {
            1 => prost::encoding::bytes::merge(wire_type, &mut self.data, buf, ctx),
            _ => prost::encoding::skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        if self.data.is_empty() {
            0
        } else {
            prost::encoding::bytes::encoded_len(1, &self.data)
        }
    }

    fn clear(&mut self) {
        self.data.clear();
    }
}

type CountedStream = Pin<Box<dyn Stream<Item = Result<Counted, Status>> + Send>>;

/// Echoes: the request, the request three times, the sum of an upload's lengths, each message.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountedEcho;

#[tonic::async_trait]
impl pb::counted_service_server::CountedService for CountedEcho {
    async fn unary(&self, request: Request<Counted>) -> Result<Response<Counted>, Status> {
        Ok(Response::new(request.into_inner()))
    }

    type ServerStreamStream = CountedStream;

    async fn server_stream(&self, request: Request<Counted>) -> Result<Response<CountedStream>, Status> {
        let message = request.into_inner();
        Ok(Response::new(Box::pin(futures_util::stream::iter([
            Ok(message.clone()),
            Ok(message.clone()),
            Ok(message),
        ]))))
    }

    async fn client_stream(&self, request: Request<Streaming<Counted>>) -> Result<Response<Counted>, Status> {
        let mut stream = request.into_inner();
        let mut data = Vec::new();
        while let Some(message) = stream.message().await? {
            data.extend_from_slice(&message.data);
        }
        Ok(Response::new(Counted { data: data.into() }))
    }

    type BidiStream = CountedStream;

    async fn bidi(&self, request: Request<Streaming<Counted>>) -> Result<Response<CountedStream>, Status> {
        Ok(Response::new(Box::pin(request.into_inner().map(|m| m))))
    }
}

/// Reads both counters.
pub fn counts() -> (u64, u64) {
    (ENCODED.load(SeqCst), DECODED.load(SeqCst))
}
