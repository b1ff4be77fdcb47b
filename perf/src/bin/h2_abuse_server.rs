//! The server that `perf/h2_abuse_probe.py` attacks: spindle-http with its default limits,
//! one blocking handler with a slow route and a large one. Prints its address, then serves
//! until killed. Environment: PORT (default 0: any), WORKERS (default 1).
//!
//! - `/sleep?ms=N`: parks N ms (the attacker resets it at once), then answers.
//! - `/big?bytes=N`: an answer of N bytes, built in memory.
//! - anything else: a short answer.

use std::time::Duration;

use spindle_http::{Body, Request, Response, Server};

fn query(req: &Request<Body>, key: &str) -> Option<u64> {
    let query = req.uri().query()?;
    query.split('&').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(0);
    let workers: usize = std::env::var("WORKERS").ok().and_then(|w| w.parse().ok()).unwrap_or(1);
    let server =
        Server::builder().workers(workers).serve(("127.0.0.1", port), |req: Request<Body>| {
            match req.uri().path() {
                "/sleep" => {
                    spindle::time::sleep(Duration::from_millis(query(&req, "ms").unwrap_or(1000)));
                    Response::new(Body::from("slept\n"))
                }
                "/big" => {
                    let len = query(&req, "bytes").unwrap_or(1 << 20).min(1 << 30) as usize;
                    Response::new(Body::from(vec![b'x'; len]))
                }
                _ => Response::new(Body::from("hello\n")),
            }
        })?;
    println!("listening on {}", server.local_addr());
    server.wait();
    Ok(())
}
