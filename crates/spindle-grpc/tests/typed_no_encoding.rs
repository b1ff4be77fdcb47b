//! The typed fast path moves messages: a message type that counts its encodings and decodings
//! (`spindle_grpc_interop::counted::Counted`) crosses every kind of call on it, from a fiber
//! and from a plain thread, and is never encoded nor decoded. The same calls on the encoded
//! path move the counters (so they count).
//!
//! One test in its own binary: the counters are process-wide.

use bytes::Bytes;
use spindle_grpc::Channel;
use spindle_grpc_interop::counted::pb::counted_service_server::CountedServiceServer;
use spindle_grpc_interop::counted::pb::counted_service_typed::CountedServiceClient;
use spindle_grpc_interop::counted::{counts, Counted, CountedEcho};

/// Each kind of call once: 6 messages out, 7 back.
async fn every_kind(channel: Channel, typed: bool) {
    let mut client = CountedServiceClient::new(channel);
    assert_eq!(client.is_typed(), typed);
    let data = Bytes::from_static(b"spindle");
    let message = || Counted { data: data.clone() };

    let reply = client.unary(message()).await.unwrap().into_inner();
    assert_eq!(reply.data, data);

    let mut stream = client.server_stream(message()).await.unwrap().into_inner();
    assert_eq!(stream.is_typed(), typed);
    for _ in 0..3 {
        assert_eq!(stream.message().await.unwrap().unwrap().data, data);
    }
    assert!(stream.message().await.unwrap().is_none());

    let upload = futures_util::stream::iter([message(), message()]);
    let reply = client.client_stream(upload).await.unwrap().into_inner();
    assert_eq!(reply.data, Bytes::from_static(b"spindlespindle"));

    let requests = futures_util::stream::iter([message(), message()]);
    let mut echoes = client.bidi(requests).await.unwrap().into_inner();
    assert_eq!(echoes.message().await.unwrap().unwrap().data, data);
    assert_eq!(echoes.message().await.unwrap().unwrap().data, data);
    assert!(echoes.message().await.unwrap().is_none());
}

#[test]
fn typed_calls_never_encode_a_message() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let typed =
        Channel::new().with_handle(rt.handle()).add_typed_service(CountedServiceServer::new(CountedEcho));
    let encoded = Channel::new().with_handle(rt.handle()).add_service(CountedServiceServer::new(CountedEcho));

    let before = counts();
    let channel = typed.clone();
    rt.block_on(move || spindle::task::block_on(every_kind(channel, true)));
    spindle::task::block_on(every_kind(typed.clone(), true));
    assert_eq!(counts(), before, "(encodings, decodings) moved on the typed path");
    assert_eq!(typed.live_calls(), 0);

    // The counters count: the encoded path encodes and decodes each of the 13 messages.
    rt.block_on(move || spindle::task::block_on(every_kind(encoded, false)));
    assert_eq!(counts(), (before.0 + 13, before.1 + 13));
}
