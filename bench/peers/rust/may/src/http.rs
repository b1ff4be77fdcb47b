//! http suite, competitor `may-minihttp`: may_minihttp's `HttpServer` (HTTP/1.1 on may's
//! stackful coroutines, one coroutine per connection, pipelined requests answered in one
//! write) with `may::config().set_workers(WORKERS)`, other may settings default (32 KiB
//! stacks, workers pinned to cores). `GET /` (and any other request) gets `200 Ok`,
//! `Content-Type: text/plain`, `Hello, World!`; may_minihttp adds `Server`, `Date` and
//! `Content-Length` and keeps the connection alive.
//!
//! Environment: PORT (listens on 127.0.0.1:$PORT), WORKERS (may worker threads).
//! SIGTERM's default action ends the process.

use std::io;

use may_minihttp::{HttpServer, HttpService, Request, Response};

#[derive(Clone)]
struct Hello;

impl HttpService for Hello {
    fn call(&mut self, _req: Request, rsp: &mut Response) -> io::Result<()> {
        rsp.header("Content-Type: text/plain").body("Hello, World!");
        Ok(())
    }
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let port = env_num("PORT", 8080);
    let workers = env_num("WORKERS", 1).max(1);
    may::config().set_workers(workers);
    let server = HttpServer(Hello).start(("127.0.0.1", port as u16)).expect("bind");
    eprintln!("may-minihttp listening on 127.0.0.1:{port} with {workers} worker(s)");
    // Serves until SIGTERM; the accept coroutine only ends on an error.
    server.join().expect("server coroutine panicked");
}
