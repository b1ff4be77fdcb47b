//! The tokio context on every worker (feature tokio-compat): tokio-only code called directly
//! in fibers and tasks, without `spindle::compat::spawn` or `block_on`. reqwest awaited in a
//! spindle task (it spawns its connection onto tokio, resolves names on tokio's blocking pool
//! and reads through tokio's reactor), `tokio::spawn` and `tokio::time` in fibers and tasks of
//! both runtime flavours.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use spindle::net::TcpListener;
use spindle::Runtime;

/// A tiny HTTP/1.1 server in spindle fibers: answers `n` requests, one per connection.
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

async fn fetch(client: &reqwest::Client, url: &str) -> (u16, String) {
    let response = client.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// reqwest awaited in a spindle task, 20 times in a row, a new client each time (so each run
/// starts from nothing: connection, name resolution, connection task), and from fibers.
#[test]
fn reqwest_in_a_spindle_task_works_every_time() {
    const RUNS: usize = 20;
    let rt = Runtime::new().unwrap();
    let (addr, server) = http_server(&rt, 2 * RUNS);
    let url = format!("http://localhost:{}/", addr.port());
    for _ in 0..RUNS {
        let u = url.clone();
        let got = rt
            .spawn_async(async move {
                let client = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
                fetch(&client, &u).await
            })
            .join()
            .unwrap();
        assert_eq!(got, (200, "hello from spindle".to_owned()));
    }
    let u = url.clone();
    let from_fibers = rt.block_on(move || {
        let fibers: Vec<_> = (0..RUNS)
            .map(|_| {
                let u = u.clone();
                spindle::spawn(move || {
                    let client = reqwest::Client::new();
                    spindle::task::block_on(fetch(&client, &u))
                })
            })
            .collect();
        fibers.into_iter().map(|f| f.join().unwrap()).collect::<Vec<_>>()
    });
    assert!(from_fibers.iter().all(|got| *got == (200, "hello from spindle".to_owned())));
    server.join().unwrap();
}

/// `tokio::spawn`, `tokio::time::sleep` and `Handle::current` from a fiber and a task: the
/// spawned tokio task runs on the bridge's thread.
#[test]
fn tokio_spawn_and_timers_from_fibers_and_tasks() {
    let rt = Runtime::new().unwrap();
    let in_fiber = rt.block_on(|| {
        let handle = tokio::runtime::Handle::current();
        let task = handle.spawn(async { std::thread::current().name().map(str::to_owned) });
        spindle::task::block_on(async {
            tokio::time::sleep(Duration::from_millis(2)).await;
            task.await.unwrap()
        })
    });
    assert_eq!(in_fiber.as_deref(), Some("spindle-tokio"));
    let in_task = rt
        .spawn_async(async {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                tx.send(7).unwrap();
            });
            tokio::time::timeout(Duration::from_secs(20), rx).await.unwrap().unwrap()
        })
        .join()
        .unwrap();
    assert_eq!(in_task, 7);
}

/// A local runtime's `block_on` runs inside the context too.
#[test]
fn a_local_runtime_runs_tokio_code() {
    let rt = spindle::Builder::new().build_local().unwrap();
    let got = rt.block_on(async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        tokio::spawn(async { 5 }).await.unwrap()
    });
    assert_eq!(got, 5);
    assert!(tokio::runtime::Handle::try_current().is_err(), "the context is left with block_on");
}

/// `Builder::tokio_context(false)`: the workers stay outside tokio's context.
#[test]
fn a_runtime_can_stay_outside_the_context() {
    let rt = spindle::Builder::new().tokio_context(false).build().unwrap();
    assert!(rt.block_on(|| tokio::runtime::Handle::try_current().is_err()));
}
