//! Hello-world server: `cargo run --release -p spindle-http --example hello`, then
//! `curl http://127.0.0.1:8080/` (HTTP/1.1) or `curl --http2-prior-knowledge
//! http://127.0.0.1:8080/` (HTTP/2, h2c). Environment: PORT (default 8080), WORKERS (default 1).

use spindle_http::header::{HeaderValue, CONTENT_TYPE};
use spindle_http::{Body, Request, Response, Server};

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(8080);
    let workers: usize = std::env::var("WORKERS").ok().and_then(|w| w.parse().ok()).unwrap_or(1);
    let server = Server::builder().workers(workers).serve(("127.0.0.1", port), |_req: Request<Body>| {
        let mut res = Response::new("Hello, World!");
        res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        res
    })?;
    eprintln!("listening on http://{} with {workers} worker(s)", server.local_addr());
    server.wait();
    Ok(())
}
