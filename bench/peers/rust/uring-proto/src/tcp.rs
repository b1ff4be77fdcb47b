//! The tcp suite's `accept_connect` and `pingpong` cases on the prototype, shaped as the
//! `spindle` competitor's (`tcp/src/fibers.rs`): the body is a fiber on one loop, the
//! acceptor and the echo server are spawned fibers on the same loop, 64-byte messages,
//! TCP_NODELAY on both ends. Counts, warm-ups and JSON lines come from the suite's harness.

#[path = "../../tcp/src/harness.rs"]
mod harness;

use std::time::Instant;

use harness::*;
use uring_proto::net::{TcpListener, TcpStream};
use uring_proto::{block_on, spawn, Backend};

fn accept_connect(o: &Opts, (warm, n): (usize, usize)) {
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    // Accepts exactly the connections of this case, so that it ends and is joined.
    let acceptor = spawn(move || {
        for _ in 0..warm + n {
            drop(ln.accept().expect("accept"));
        }
    });
    let op = || {
        let mut c = TcpStream::connect(addr).expect("connect");
        let mut b = [0u8; 1];
        assert_eq!(c.read(&mut b).expect("read"), 0, "expected EOF");
    };
    (0..warm).for_each(|_| op());
    let t0 = Instant::now();
    (0..n).for_each(|_| op());
    emit(o, "accept_connect", "ns_per_op", ns_per_op(t0, n), "ns");
    acceptor.join();
}

fn pingpong(o: &Opts, (warm, n): (usize, usize)) {
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    let echo = spawn(move || {
        let mut s = ln.accept().expect("accept");
        s.set_nodelay(true).unwrap();
        let mut buf = [0u8; MSG];
        while s.read_exact(&mut buf).is_ok() {
            if s.write_all(&buf).is_err() {
                break;
            }
        }
    });
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_nodelay(true).unwrap();
    let msg = message();
    let mut buf = [0u8; MSG];
    let mut run = |k: usize| {
        for _ in 0..k {
            c.write_all(&msg).unwrap();
            c.read_exact(&mut buf).unwrap();
        }
    };
    run(warm);
    let t0 = Instant::now();
    run(n);
    emit(o, "pingpong", "ns_per_op", ns_per_op(t0, n), "ns");
    assert_eq!(buf, msg, "echoed bytes");
    drop(c);
    echo.join();
}

pub fn main(backend: Backend, competitor: &'static str, args: Vec<String>) {
    let mut quick = false;
    let mut only = None;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--case" => only = Some(it.next().expect("--case NAME")),
            _ => {
                eprintln!("uring-proto tcp: unknown argument {a:?}");
                std::process::exit(2);
            }
        }
    }
    let fd_limit = raise_nofile();
    let o: &'static Opts = Box::leak(Box::new(Opts { competitor, only, counts: counts(quick), fd_limit }));
    let run = block_on(backend, move || {
        if o.want("accept_connect") {
            accept_connect(o, o.counts.accept_connect);
        }
        if o.want("pingpong") {
            pingpong(o, o.counts.pingpong);
        }
    });
    if let Err(e) = run {
        eprintln!("{competitor}: the loop could not be set up ({e})");
        std::process::exit(1);
    }
}
