//! The typed upload (module `typed::upload`) over many messages: a client's request stream
//! reaches the handler whole and in order across many refills of the frame headers tonic's
//! `Streaming` reads, whether each message is ready when the handler asks for it or not; it
//! ends cleanly with no trailers, as on the encoded path; and the typed path pulls it one
//! message per read (the handler's reads bound the client's writer).

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_util::Stream;
use spindle_grpc::Channel;
use spindle_grpc_interop::pb::test_service_server::{TestService, TestServiceServer};
use spindle_grpc_interop::pb::test_service_typed::TestServiceClient;
use spindle_grpc_interop::pb::*;
use tonic::{Request, Response, Status, Streaming};

type OutStream = Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send>>;

/// Messages per upload: several refills of the upload's frame headers.
const MESSAGES: usize = 300;

/// A client's request stream of [`MESSAGES`] messages, the i-th of `i % 7 + 1` bytes, that is
/// pending (and wakes its reader at once) on every third poll; it counts what it produced.
struct Gappy {
    next: usize,
    polls: usize,
    produced: Arc<AtomicUsize>,
}

impl Stream for Gappy {
    type Item = StreamingInputCallRequest;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.polls += 1;
        if self.polls.is_multiple_of(3) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if self.next == MESSAGES {
            return Poll::Ready(None);
        }
        let body = vec![self.next as u8; self.next % 7 + 1];
        self.next += 1;
        self.produced.fetch_add(1, SeqCst);
        Poll::Ready(Some(StreamingInputCallRequest { payload: Some(Payload { body: body.into() }) }))
    }
}

/// What the handler saw: for each message read, its first byte, its size and how many
/// messages the client had produced by then; then whether the upload had trailers.
#[derive(Debug, Default)]
struct Seen {
    reads: Vec<(u8, usize, usize)>,
    trailers: Option<bool>,
}

/// A TestService whose StreamingInputCall reads the upload and records what it saw.
#[derive(Clone)]
struct Reader {
    produced: Arc<AtomicUsize>,
    seen: Arc<Mutex<Seen>>,
}

#[tonic::async_trait]
impl TestService for Reader {
    async fn empty_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn unary_call(&self, _: Request<SimpleRequest>) -> Result<Response<SimpleResponse>, Status> {
        Err(Status::unimplemented(""))
    }

    type StreamingOutputCallStream = OutStream;

    async fn streaming_output_call(
        &self,
        _: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<OutStream>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn streaming_input_call(
        &self,
        request: Request<Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        let mut upload = request.into_inner();
        let mut total = 0;
        while let Some(message) = upload.message().await? {
            let body = message.payload.unwrap_or_default().body;
            total += body.len() as i64;
            let produced = self.produced.load(SeqCst);
            self.seen.lock().unwrap().reads.push((body[0], body.len(), produced));
        }
        let trailers = upload.trailers().await?;
        self.seen.lock().unwrap().trailers = Some(trailers.is_some());
        Ok(Response::new(StreamingInputCallResponse { aggregated_payload_size: total }))
    }

    type FullDuplexCallStream = OutStream;

    async fn full_duplex_call(
        &self,
        _: Request<Streaming<StreamingOutputCallRequest>>,
    ) -> Result<Response<OutStream>, Status> {
        Err(Status::unimplemented(""))
    }

    async fn unimplemented_call(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented(""))
    }
}

/// Uploads [`MESSAGES`] from a [`Gappy`] stream, the service registered typed or not; returns
/// the aggregated size the handler answered and what it saw.
fn upload(rt: &spindle::Runtime, typed: bool) -> (i64, Seen) {
    let produced = Arc::new(AtomicUsize::new(0));
    let reader = Reader { produced: produced.clone(), seen: Arc::default() };
    let seen = reader.seen.clone();
    let channel = Channel::new().with_handle(rt.handle());
    let channel = match typed {
        true => channel.add_typed_service(TestServiceServer::new(reader)),
        false => channel.add_service(TestServiceServer::new(reader)),
    };
    let size = rt.block_on(move || {
        spindle::task::block_on(async move {
            let mut client = TestServiceClient::new(channel.clone());
            assert_eq!(client.is_typed(), typed);
            let requests = Gappy { next: 0, polls: 0, produced };
            let response = client.streaming_input_call(requests).await.unwrap();
            assert_eq!(channel.live_calls(), 0);
            response.into_inner().aggregated_payload_size
        })
    });
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (size, seen)
}

#[test]
fn a_long_upload_arrives_whole_in_order_and_ends_cleanly_without_trailers() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let expected: i64 = (0..MESSAGES).map(|i| (i % 7 + 1) as i64).sum();
    for typed in [true, false] {
        let (size, seen) = upload(&rt, typed);
        assert_eq!(size, expected, "typed: {typed}");
        assert_eq!(seen.reads.len(), MESSAGES, "typed: {typed}");
        for (i, &(first, len, _)) in seen.reads.iter().enumerate() {
            assert_eq!((first, len), (i as u8, i % 7 + 1), "message {i}, typed: {typed}");
        }
        // The encoded path's request body ends without trailers; so does the typed upload.
        assert_eq!(seen.trailers, Some(false), "typed: {typed}");
    }
}

#[test]
fn a_typed_upload_is_pulled_one_message_per_read() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let (_, seen) = upload(&rt, true);
    assert_eq!(seen.reads.len(), MESSAGES);
    for (i, &(_, _, produced)) in seen.reads.iter().enumerate() {
        // The client had produced exactly the messages the handler read: none ahead.
        assert_eq!(produced, i + 1, "read {}", i + 1);
    }
}
