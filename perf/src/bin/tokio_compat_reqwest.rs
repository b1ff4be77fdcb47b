//! What running a tokio-only client on spindle costs: reqwest GETs against a local
//! spindle-http server, from C concurrent callers, three ways:
//!
//! - `context`: spindle tasks await reqwest directly (every worker inside the tokio bridge's
//!   context: reqwest's connection tasks and sockets run on the bridge's thread);
//! - `bridge`: spindle tasks await `spindle::compat::spawn(request)` (the whole request runs
//!   on the bridge's thread);
//! - `tokio`: a tokio multi-thread runtime of as many workers, reqwest on it (the floor).
//!
//! Usage: `tokio_compat_reqwest MODE CALLERS REQUESTS` (total requests, spread over the callers);
//! prints one JSON line with the wall time per request and the requests per second. The
//! server runs in the same process, on a spindle-http runtime of one worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("context").to_owned();
    let callers: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let total: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let server = spindle_http::Server::builder()
        .workers(1)
        .serve("127.0.0.1:0", |_req: spindle_http::Request<spindle_http::Body>| {
            spindle_http::Response::new("hello")
        })
        .expect("server");
    let url = Arc::new(format!("http://{}/", server.local_addr()));
    let per_caller = total / callers;
    let workers = 2;
    let elapsed = match mode.as_str() {
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = reqwest::Client::new();
                warm(&client, &url).await;
                let start = Instant::now();
                let tasks: Vec<_> = (0..callers)
                    .map(|_| {
                        let (client, url) = (client.clone(), url.clone());
                        tokio::spawn(async move { calls(&client, &url, per_caller).await })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
                start.elapsed()
            })
        }
        "context" | "bridge" => {
            let rt = spindle::Builder::new().worker_threads(workers).build().unwrap();
            let bridged = mode == "bridge";
            rt.block_on(async move {
                let client = reqwest::Client::new();
                let (c, u) = (client.clone(), url.clone());
                spindle::compat::spawn(async move { warm(&c, &u).await }).await;
                let start = Instant::now();
                let tasks: Vec<_> = (0..callers)
                    .map(|_| {
                        let (client, url) = (client.clone(), url.clone());
                        spindle::task::spawn_async(async move {
                            if bridged {
                                for _ in 0..per_caller {
                                    let (client, url) = (client.clone(), url.clone());
                                    spindle::compat::spawn(async move { call(&client, &url).await }).await;
                                }
                            } else {
                                calls(&client, &url, per_caller).await;
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await.unwrap();
                }
                start.elapsed()
            })
        }
        other => panic!("unknown mode {other}: context, bridge or tokio"),
    };
    let done = per_caller * callers;
    let us = elapsed.as_secs_f64() * 1e6 / done as f64;
    println!(
        "{{\"mode\":\"{mode}\",\"callers\":{callers},\"requests\":{done},\"us_per_request\":{us:.2},\"requests_per_s\":{:.0}}}",
        done as f64 / elapsed.as_secs_f64()
    );
    server.shutdown();
}

async fn call(client: &reqwest::Client, url: &str) {
    let body = client.get(url).timeout(Duration::from_secs(20)).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(&body[..], b"hello");
}

async fn calls(client: &reqwest::Client, url: &str, n: usize) {
    for _ in 0..n {
        call(client, url).await;
    }
}

async fn warm(client: &reqwest::Client, url: &str) {
    for _ in 0..50 {
        call(client, url).await;
    }
}
