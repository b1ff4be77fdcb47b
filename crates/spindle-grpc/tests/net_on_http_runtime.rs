//! HTTP and gRPC in one process on one pool of workers: a spindle-grpc server and its
//! clients on the runtime of a spindle-http server (`spindle_http::Server::handle`), with no
//! runtime of their own. No other spindle runtime exists in this test: `serve_tcp` is called
//! from the test's thread, so the server runs where its `handle` says or not at all.

use std::time::Duration;

use spindle_grpc::{Channel, Endpoint, Server};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::test_service_server::TestServiceServer;
use spindle_grpc_interop::pb::SimpleRequest;
use spindle_http::{Body, Request, Response};

fn sleep(d: Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(spindle::time::sleep_future(d))
}

fn http_get(addr: std::net::SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn a_grpc_server_and_its_clients_run_on_spindle_https_workers() {
    let http = spindle_http::Server::builder()
        .workers(2)
        .serve("127.0.0.1:0", |_req: Request<Body>| Response::new("http here"))
        .unwrap();
    let handle = http.handle();
    let service = TestServiceServer::new(spindle_grpc_interop::Server::new(sleep));
    let channel = Channel::new().with_handle(handle.clone()).add_service(service);
    let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let serving = Server::new(channel).handle(handle.clone()).serve_tcp(listener).unwrap();
    let addr = serving.local_addr().unwrap();
    let (sizes, thread) = handle
        .spawn(move || {
            let endpoint = Endpoint::new(format!("http://{addr}")).unwrap();
            let sizes = spindle::task::block_on(async move {
                let mut client = TestServiceClient::new(endpoint.connect().await.unwrap());
                let mut sizes = Vec::new();
                for size in [3, 300, 30_000] {
                    let reply = client
                        .unary_call(SimpleRequest { response_size: size, ..Default::default() })
                        .await
                        .unwrap_or_else(|s| panic!("the call failed: {s}"));
                    sizes.push(reply.into_inner().payload.map_or(0, |p| p.body.len()));
                }
                sizes
            });
            (sizes, std::thread::current().name().unwrap_or("").to_owned())
        })
        .join()
        .unwrap();
    assert_eq!(sizes, [3, 300, 30_000]);
    assert!(thread.starts_with("spindle-http"), "the client ran on thread {thread:?}");
    // Over one connection (accepted in all: the client, dropped with its fiber, may have
    // closed it by now).
    assert_eq!(serving.stats().connections_total, 1);
    let answer = http_get(http.local_addr());
    assert!(answer.ends_with("http here"), "{answer:?}");
    // The gRPC server first (its calls drain), then the HTTP server, whose runtime it is.
    serving.shutdown(Duration::from_secs(5));
    assert_eq!(http.shutdown().cancelled_connections, 0);
}
