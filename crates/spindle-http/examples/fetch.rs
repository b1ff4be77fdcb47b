//! `fetch [--http2] URL`: one GET with spindle-http's client; prints the status line and the
//! body length. `--http2` speaks HTTP/2 to an `http://` URL by prior knowledge (h2c).
//! `https://` URLs need `--features tls`; they trust the system's root certificates, or only
//! those of FETCH_CA=<PEM file> when it is set.
//!
//! ```text
//! cargo run -p spindle-http --example hello &
//! cargo run -p spindle-http --example fetch -- --http2 http://127.0.0.1:8080/
//! HTTP/2.0 200 OK
//! body: 13 bytes
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let http2 = args.iter().any(|a| a == "--http2");
    args.retain(|a| a != "--http2");
    let [url] = args.as_slice() else {
        eprintln!("usage: fetch [--http2] URL");
        return ExitCode::from(2);
    };
    #[allow(unused_mut)]
    let mut builder = spindle_http::Client::builder().http2_prior_knowledge(http2);
    #[cfg(feature = "tls")]
    if let Ok(ca) = std::env::var("FETCH_CA") {
        let pem = match std::fs::read(&ca) {
            Ok(pem) => pem,
            Err(e) => {
                eprintln!("fetch: reading {ca}: {e}");
                return ExitCode::FAILURE;
            }
        };
        builder = match builder.root_certificates_pem(&pem) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("fetch: {ca}: {e}");
                return ExitCode::FAILURE;
            }
        };
    }
    let client = builder.build();
    let rt = spindle::Runtime::new().expect("a spindle runtime");
    let url = url.clone();
    rt.block_on(move || match client.get(&url) {
        Ok(res) => {
            println!("{:?} {}", res.version(), res.status());
            match res.into_body().bytes() {
                Ok(body) => {
                    println!("body: {} bytes", body.len());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("fetch: reading the body: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            eprintln!("fetch: {e}");
            ExitCode::FAILURE
        }
    })
}
