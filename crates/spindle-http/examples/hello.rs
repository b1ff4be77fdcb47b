//! Hello-world server: `cargo run --release -p spindle-http --example hello`, then
//! `curl http://127.0.0.1:8080/` (HTTP/1.1) or `curl --http2-prior-knowledge
//! http://127.0.0.1:8080/` (HTTP/2, h2c). Environment: PORT (default 8080), WORKERS (default 1);
//! built with `--features tls`, TLS_CERT and TLS_KEY (PEM files) serve HTTPS instead.

use spindle_http::header::{HeaderValue, CONTENT_TYPE};
use spindle_http::{Body, Request, Response, Server};

fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(8080);
    let workers: usize = std::env::var("WORKERS").ok().and_then(|w| w.parse().ok()).unwrap_or(1);
    #[allow(unused_mut)]
    let mut builder = Server::builder().workers(workers);
    // HTTPS with `--features tls` and TLS_CERT / TLS_KEY (PEM files): HTTP/2 or HTTP/1.1 by ALPN.
    #[cfg(feature = "tls")]
    if let (Ok(cert), Ok(key)) = (std::env::var("TLS_CERT"), std::env::var("TLS_KEY")) {
        builder = builder.tls(spindle_http::TlsConfig::from_pem_files(cert, key)?);
    }
    let server = builder.serve(("127.0.0.1", port), |_req: Request<Body>| {
        let mut res = Response::new("Hello, World!");
        res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        res
    })?;
    eprintln!("listening on http://{} with {workers} worker(s)", server.local_addr());
    server.wait();
    Ok(())
}
