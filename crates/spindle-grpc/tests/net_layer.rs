//! `Server::layer`: server-wide tower layers around every call served over the network, as
//! tonic's `Server::builder().layer()`. Layers see admitted gRPC requests, later layers wrap
//! earlier ones, and their responses are what the client gets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spindle_grpc::{Channel, Endpoint, Server};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::*;

fn sleep(d: std::time::Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(spindle::time::sleep_future(d))
}

#[test]
fn layers_wrap_every_call_in_order() {
    let rt = spindle::Runtime::new().unwrap();
    let service = TestServiceServer::new(spindle_grpc_interop::Server::new(sleep));
    let channel = Channel::new().with_handle(rt.handle()).add_service(service);
    let seen = Arc::new(AtomicUsize::new(0));
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (inner_order, outer_order, counter) = (order.clone(), order.clone(), seen.clone());
    let server = Server::new(channel)
        .handle(rt.handle())
        .layer(tower::util::MapRequestLayer::new(move |request: http::Request<tonic::body::Body>| {
            inner_order.lock().unwrap().push("inner");
            request
        }))
        .layer(tower::util::MapRequestLayer::new(move |request: http::Request<tonic::body::Body>| {
            outer_order.lock().unwrap().push("outer");
            counter.fetch_add(1, Ordering::Relaxed);
            request
        }))
        .layer(tower::util::MapResponseLayer::new(|mut response: http::Response<tonic::body::Body>| {
            response.headers_mut().insert("x-layer", http::HeaderValue::from_static("seen"));
            response
        }));
    let (size, header) = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let serving = server.serve_tcp(listener).unwrap();
        let endpoint = Endpoint::new(format!("http://{}", serving.local_addr().unwrap())).unwrap();
        spindle::task::block_on(async move {
            let mut client = TestServiceClient::new(endpoint.connect().await.unwrap());
            let reply = client
                .unary_call(SimpleRequest { response_size: 9, ..Default::default() })
                .await
                .unwrap_or_else(|s| panic!("the call failed: {s}"));
            let header = reply.metadata().get("x-layer").map(|v| v.to_str().unwrap().to_owned());
            (reply.into_inner().payload.map_or(0, |p| p.body.len()), header)
        })
    });
    assert_eq!(size, 9);
    assert_eq!(header.as_deref(), Some("seen"));
    assert_eq!(seen.load(Ordering::Relaxed), 1);
    assert_eq!(*order.lock().unwrap(), ["outer", "inner"], "the later layer sees the request first");
}
