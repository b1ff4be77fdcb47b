//! hyper 1.x runs on spindle's sockets unchanged: an HTTP/1.1 server and client, each driven
//! as a spindle async task, talking over loopback. Needs the `hyper` feature.
#![cfg(feature = "hyper")]

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};

#[test]
fn hyper_server_and_client_over_spindle_tcp() {
    let rt = spindle::Runtime::new().unwrap();
    let bodies = rt.block_on(|| {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // Server: accept in a fiber, serve each connection as an async task.
        spindle::spawn(move || loop {
            let Ok((stream, _)) = listener.accept() else { return };
            spindle::task::spawn_async(async move {
                let service = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let path = req.uri().path().to_owned();
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!("hello {path}")))))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(stream, service).await;
            });
        });
        // Client: one keep-alive connection, several requests.
        let stream = spindle::net::TcpStream::connect(addr).unwrap();
        spindle::task::block_on(async move {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(stream).await.unwrap();
            spindle::task::spawn_async(async move {
                let _ = conn.await;
            });
            let mut bodies = Vec::new();
            for path in ["/a", "/b", "/c"] {
                let req = Request::get(path).header("host", "x").body(Full::new(Bytes::new())).unwrap();
                // The connection task may not have taken up the next request yet (it may run
                // on another worker): hyper's client needs `ready` between requests.
                sender.ready().await.unwrap();
                let resp = sender.send_request(req).await.unwrap();
                assert_eq!(resp.status(), 200);
                let body = resp.into_body().collect().await.unwrap().to_bytes();
                bodies.push(String::from_utf8(body.to_vec()).unwrap());
            }
            bodies
        })
    });
    assert_eq!(bodies, ["hello /a", "hello /b", "hello /c"]);
}
