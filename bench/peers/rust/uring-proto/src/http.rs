//! A hello-world HTTP/1.1 server on the prototype, shaped as the `monoio` http competitor:
//! WORKERS threads, each with its own loop and its own SO_REUSEPORT listener on
//! 127.0.0.1:$PORT, one fiber per connection (TCP_NODELAY), the monoio competitor's responder
//! (`monoio/src/responder.rs`: same parsing, same response bytes), pipelined requests
//! answered with one write per read. SIGTERM's default action ends the process.

#[path = "../../monoio/src/responder.rs"]
mod responder;

use std::net::SocketAddr;

use responder::{parse, push_error, push_hello, Parsed};
use uring_proto::net::{TcpListener, TcpStream};
use uring_proto::{block_on, spawn, Backend};

const READ_BUF: usize = 4096;

fn serve(mut stream: TcpStream) {
    let mut pending: Vec<u8> = Vec::with_capacity(READ_BUF);
    let mut rbuf = [0u8; READ_BUF];
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUF);
    loop {
        // Answer every whole request in the buffer (pipelining), in order.
        let mut used = 0;
        let mut close = false;
        while used < pending.len() {
            match parse(&pending[used..]) {
                Parsed::Request { len, head_only, close: c } => {
                    push_hello(&mut out, head_only, c);
                    used += len;
                    if c {
                        close = true;
                        break;
                    }
                }
                Parsed::Incomplete => break,
                Parsed::Reject(status) => {
                    push_error(&mut out, status);
                    close = true;
                    break;
                }
            }
        }
        pending.drain(..used);
        if !out.is_empty() {
            let res = stream.write_all(&out);
            out.clear();
            if res.is_err() {
                return;
            }
        }
        if close {
            return;
        }
        match stream.read(&mut rbuf) {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&rbuf[..n]),
        }
    }
}

fn accept_loop(addr: SocketAddr, backend: Backend) {
    let listener = TcpListener::bind(addr).expect("bind");
    eprintln!("uring-proto http: a thread listens on {addr} ({backend:?})");
    loop {
        match listener.accept() {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                spawn(move || serve(stream));
            }
            Err(e) => {
                // E.g. EMFILE. The prototype has no timers: give up rather than spin.
                eprintln!("accept: {e}");
                std::process::exit(1);
            }
        }
    }
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn worker(addr: SocketAddr, backend: Backend) {
    if let Err(e) = block_on(backend, move || accept_loop(addr, backend)) {
        eprintln!("uring-proto: the loop could not be set up ({e})");
        std::process::exit(1);
    }
}

pub fn main(backend: Backend) {
    let port = env_num("PORT", 8080) as u16;
    let workers = env_num("WORKERS", 1).max(1);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let threads: Vec<_> = (1..workers).map(|_| std::thread::spawn(move || worker(addr, backend))).collect();
    worker(addr, backend);
    for t in threads {
        let _ = t.join();
    }
}
