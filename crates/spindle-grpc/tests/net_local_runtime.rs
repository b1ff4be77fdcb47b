//! A gRPC server and its client on one `spindle::LocalRuntime`: the process's own thread is
//! the only worker. Between two `block_on` calls nothing runs, and the server's accept task,
//! the connection's tasks and the client's manager fiber wait; the next call goes on over
//! the same connection.

use spindle_grpc::{Channel, Endpoint, Server};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::*;

fn sleep(d: std::time::Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(spindle::time::sleep_future(d))
}

async fn unary(client: &mut TestServiceClient<spindle_grpc::RemoteChannel>, size: i32) -> usize {
    let reply = client
        .unary_call(SimpleRequest { response_size: size, ..Default::default() })
        .await
        .unwrap_or_else(|s| panic!("the call failed: {s}"));
    reply.into_inner().payload.map_or(0, |p| p.body.len())
}

#[test]
fn server_and_client_share_one_local_runtime_across_block_on_calls() {
    let rt = spindle::LocalRuntime::new().unwrap();
    let service = TestServiceServer::new(spindle_grpc_interop::Server::new(sleep));
    let channel = Channel::new().with_handle(rt.handle()).add_service(service);
    let (serving, mut client, first) = rt.block_on(move || {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let serving = Server::new(channel).serve_tcp(listener).unwrap();
        let endpoint = Endpoint::new(format!("http://{}", serving.local_addr().unwrap())).unwrap();
        spindle::task::block_on(async move {
            let mut client = TestServiceClient::new(endpoint.connect().await.unwrap());
            let first = unary(&mut client, 7).await;
            (serving, client, first)
        })
    });
    assert_eq!(first, 7);
    assert_eq!(serving.stats().connections, 1);
    let (second, connections) = rt.block_on(move || {
        spindle::task::block_on(async move {
            let second = unary(&mut client, 11).await;
            (second, serving.stats().connections)
        })
    });
    assert_eq!((second, connections), (11, 1), "the second call went over the first connection");
}
