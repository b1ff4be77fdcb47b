//! spindle::compat (feature tokio-compat): tokio-only code run from fibers and tasks through
//! the tokio bridge: tokio's timer and sockets, reqwest (a widely used tokio-only HTTP client)
//! against a local HTTP server made of spindle fibers, cancellation and panics.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::net::TcpListener;
use spindle::Runtime;

/// A tiny HTTP/1.1 server in spindle fibers: answers `n` requests with "hello from spindle",
/// one per connection.
fn http_server(rt: &Runtime, n: usize) -> (SocketAddr, spindle::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(move || {
        for _ in 0..n {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            spindle::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
                    let n = conn.read(&mut buf).unwrap();
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                let body = "hello from spindle";
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                conn.write_all(response.as_bytes()).unwrap();
            });
        }
    });
    (addr, server)
}

async fn fetch(url: String) -> (u16, String) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
    let response = client.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[test]
fn reqwest_from_a_fiber_and_a_task_against_a_spindle_server() {
    let rt = Runtime::new().unwrap();
    let (addr, server) = http_server(&rt, 2);
    let url = format!("http://{addr}/");
    let u = url.clone();
    let from_fiber = rt.block_on(move || spindle::compat::block_on(fetch(u)));
    assert_eq!(from_fiber, (200, "hello from spindle".to_owned()));
    let from_task = rt.spawn_async(async move { spindle::compat::spawn(fetch(url)).await }).join().unwrap();
    assert_eq!(from_task, (200, "hello from spindle".to_owned()));
    server.join().unwrap();
}

#[test]
fn tokio_timers_and_sockets_run_through_the_bridge() {
    let rt = Runtime::new().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.write_all(b"tokio, meet spindle").unwrap();
    });
    let got = rt.block_on(move || {
        spindle::compat::block_on(async move {
            use tokio::io::AsyncReadExt;
            tokio::time::sleep(Duration::from_millis(1)).await;
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        })
    });
    assert_eq!(got, "tokio, meet spindle");
    server.join().unwrap();
}

#[test]
fn dropping_the_bridged_future_aborts_the_tokio_task() {
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let rt = Runtime::new().unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (d, s) = (dropped.clone(), started.clone());
    let timed_out = rt
        .spawn_async(async move {
            let forever = spindle::compat::spawn(async move {
                let _guard = SetOnDrop(d);
                s.store(true, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(3600)).await;
            });
            // Wait (bounded) until the tokio task runs, so the abort meets a started future.
            let limit = std::time::Instant::now() + Duration::from_secs(10);
            while !started.load(Ordering::SeqCst) && std::time::Instant::now() < limit {
                spindle::time::sleep_future(Duration::from_millis(1)).await;
            }
            spindle::time::timeout(Duration::from_millis(20), forever).await.is_err()
        })
        .join()
        .unwrap();
    assert!(timed_out);
    let limit = std::time::Instant::now() + Duration::from_secs(10);
    while !dropped.load(Ordering::SeqCst) && std::time::Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(dropped.load(Ordering::SeqCst), "the tokio task was not aborted");
}

#[test]
fn a_panic_in_the_bridged_future_resumes_in_the_fiber() {
    let rt = Runtime::new().unwrap();
    let joined = rt.spawn(|| spindle::compat::block_on(async { panic!("boom in tokio") })).join();
    let payload = joined.unwrap_err();
    let payload = payload.into_panic();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom in tokio"));
}

#[test]
fn a_bridge_of_its_own_stops_when_dropped() {
    let bridge = spindle::compat::TokioBridge::new("own-tokio").unwrap();
    let rt = Runtime::new().unwrap();
    let b = Arc::new(bridge);
    let b2 = b.clone();
    let name = rt.block_on(move || b2.block_on(async { std::thread::current().name().map(str::to_owned) }));
    assert_eq!(name.as_deref(), Some("own-tokio"));
    drop(b);
}
