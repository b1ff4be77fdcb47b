//! What spindle-http's request spans cost per request: the tournament's hello server (one
//! blocking handler per request, the same answer) under a chosen `tracing` subscriber.
//!
//! ```text
//! http_tracing none|info|spans|debug     (env PORT, default 8080; WORKERS, default 1)
//! ```
//!
//! - `none`: no subscriber is ever set (the feature compiled in, nothing listening);
//! - `info`: tracing-subscriber's `Registry` with a `fmt` layer writing to a sink, at
//!   `INFO`: the request spans (at `DEBUG`) are disabled by the filter;
//! - `spans`: tracing-subscriber's `Registry` alone: every span is enabled and kept in its
//!   slab (entered, recorded, closed), no layer formats anything;
//! - `debug`: the `fmt` layer at `DEBUG`: every request opens, enters, records and closes its span
//!   and formats its `finished processing request` event (written to the sink).
//!
//! Built with and without the `tracing` feature of this package, the `none` mode gives the
//! feature's cost with nothing listening; `scripts/http-callgrind.sh` counts the instructions
//! per request of each (docs/perf/tracing.md).

use bytes::Bytes;
use spindle_http::{Body, Server};

const BODY: &[u8] = b"Hello, World!";

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "none".into());
    #[cfg(feature = "tracing")]
    {
        use tracing_subscriber::layer::SubscriberExt;
        let level = match mode.as_str() {
            "none" => None,
            "info" => Some(tracing::level_filters::LevelFilter::INFO),
            "debug" => Some(tracing::level_filters::LevelFilter::DEBUG),
            "spans" => None,
            other => panic!("unknown mode {other}: none, info, spans or debug"),
        };
        if mode == "spans" {
            tracing::subscriber::set_global_default(tracing_subscriber::registry())
                .expect("the only global subscriber");
        } else if let Some(level) = level {
            let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::sink).with_filter(level);
            use tracing_subscriber::Layer as _;
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(fmt))
                .expect("the only global subscriber");
        }
    }
    #[cfg(not(feature = "tracing"))]
    assert_eq!(mode, "none", "built without the `tracing` feature: only `none`");

    let port: u16 = std::env::var("PORT").ok().and_then(|v| v.parse().ok()).unwrap_or(8080);
    let workers: usize = std::env::var("WORKERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let server = Server::builder()
        .workers(workers)
        .header_read_timeout(None)
        .serve(std::net::SocketAddr::from(([127, 0, 0, 1], port)), |_req: http::Request<Body>| {
            let mut res = http::Response::new(Body::from(Bytes::from_static(BODY)));
            res.headers_mut()
                .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
            res
        })
        .expect("spindle-http server");
    server.wait();
}
