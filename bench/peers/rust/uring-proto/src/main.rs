//! `uring-proto`: the prototype's benchmark programs (not tournament peers; run through the
//! tournament with `--peers-dir bench/peers/rust/uring-proto/ab`, see docs/ARCHITECTURE.md).
//!
//! Usage:
//! - `uring-proto tcp --backend B [--quick] [--case NAME]`: the tcp suite's `accept_connect`
//!   and `pingpong` cases, as the `spindle` competitor runs them (client and server fibers on
//!   one loop), JSON lines with competitor `proto-B`.
//! - `uring-proto http --backend B`: a hello-world HTTP/1.1 server on PORT with WORKERS threads
//!   (each its own loop and SO_REUSEPORT listener, as the `monoio` competitor), answering
//!   with the monoio competitor's responder.
//!
//! Backends: epoll, uring, uring-multi, uring-defer, uring-multi-defer.

mod http;
mod tcp;

use uring_proto::Backend;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: uring-proto tcp|http --backend epoll|uring|uring-multi|uring-defer|uring-multi-defer [--quick] [--case NAME]";
    let Some(i) = args.iter().position(|a| a == "--backend") else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let name = args.get(i + 1).cloned().unwrap_or_default();
    let Some(backend) = Backend::parse(&name) else {
        eprintln!("unknown backend {name:?}; {usage}");
        std::process::exit(2);
    };
    args.drain(i..i + 2);
    let mode = if args.is_empty() { String::new() } else { args.remove(0) };
    let competitor: &'static str = Box::leak(format!("proto-{name}").into_boxed_str());
    match mode.as_str() {
        "tcp" => tcp::main(backend, competitor, args),
        "http" => http::main(backend),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
