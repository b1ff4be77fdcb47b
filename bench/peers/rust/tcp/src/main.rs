//! tcp suite, competitors `rust-thread` (std::net, blocking, one OS thread per unit),
//! `tokio` (tokio::net on a tokio runtime, one task per unit) and `spindle` (spindle::net on
//! a spindle runtime, one fiber per unit, idle connections as tasks; see `fibers.rs`).
//!
//!   bind            TcpListener::bind(127.0.0.1:0), then drop
//!   bind_concurrent the same from 100 threads / tasks, each doing 1/100 of the ops
//!   accept_connect  one listener; an accept thread / task accepts and drops each connection;
//!                   per op the client connects, reads EOF, drops
//!   pingpong        one connection (TCP_NODELAY), echo thread / task, 64-byte round trips
//!   idle_conns      N connections, each server end held by its own thread (64 KiB stack) /
//!                   task blocked in read; runs first so the baseline is the fresh process
//!
//! Usage: tcp-peer --mode thread|tokio|spindle [--flavor current|multi|local] [--workers N]
//!                 [--idle task|fiber] [--quick] [--case NAME]
//!
//! `--flavor` picks tokio's runtime flavour; for spindle, `local` runs a
//! `spindle::LocalRuntime` (this thread the one worker, no worker thread).

mod fibers;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

mod harness;

use harness::*;

// ---------------------------------------------------------------- std threads

mod threads {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;
    use std::thread;

    fn bind_loop(n: usize) {
        for _ in 0..n {
            drop(TcpListener::bind(loopback0()).expect("bind"));
        }
    }

    fn bind_concurrent(total: usize) {
        thread::scope(|s| {
            for _ in 0..CONC_UNITS {
                s.spawn(|| bind_loop(total / CONC_UNITS));
            }
        });
    }

    fn accept_connect(o: &Opts, (warm, n): (usize, usize)) {
        let ln = TcpListener::bind(loopback0()).expect("bind");
        let addr = ln.local_addr().unwrap();
        thread::spawn(move || {
            for s in ln.incoming() {
                drop(s.expect("accept"));
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
    }

    fn pingpong(o: &Opts, (warm, n): (usize, usize)) {
        let ln = TcpListener::bind(loopback0()).expect("bind");
        let addr = ln.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = ln.accept().expect("accept");
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
    }

    fn idle_conns(o: &Opts) {
        let n = idle_count(o);
        let ln = TcpListener::bind(loopback0()).expect("bind");
        let addr = ln.local_addr().unwrap();
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        thread::spawn(move || {
            for s in ln.incoming() {
                let mut s = s.expect("accept");
                let (ready, done) = (ready_tx.clone(), done_tx.clone());
                thread::Builder::new()
                    .stack_size(IDLE_STACK)
                    .spawn(move || {
                        let mut buf = [0u8; MSG];
                        ready.send(()).unwrap();
                        let _ = s.read(&mut buf);
                        drop(s);
                        let _ = done.send(());
                    })
                    .expect("spawn");
            }
        });
        thread::sleep(Duration::from_millis(10));
        let before = rss_bytes();
        let mut clients = Vec::with_capacity(n);
        while clients.len() < n {
            let k = (n - clients.len()).min(100);
            for _ in 0..k {
                clients.push(TcpStream::connect(addr).expect("connect"));
            }
            for _ in 0..k {
                ready_rx.recv().unwrap();
            }
        }
        thread::sleep(Duration::from_millis(100)); // every server thread is blocked in read
        let after = rss_bytes();
        emit(o, "idle_conns", "bytes_per_conn", (after - before) as f64 / n as f64, "bytes");
        drop(clients);
        for _ in 0..n {
            done_rx.recv().unwrap();
        }
    }

    pub fn run(o: &Opts) {
        run_blocking(o, &BlockingCases { bind_loop, bind_concurrent, accept_connect, pingpong, idle_conns });
    }
}

// ---------------------------------------------------------------- tokio

mod tasks {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;

    async fn bind_loop(n: usize) {
        for _ in 0..n {
            drop(TcpListener::bind(loopback0()).await.expect("bind"));
        }
    }

    async fn bind_concurrent(total: usize) {
        let units: Vec<_> = (0..CONC_UNITS).map(|_| tokio::spawn(bind_loop(total / CONC_UNITS))).collect();
        for u in units {
            u.await.unwrap();
        }
    }

    async fn accept_connect(o: &Opts, (warm, n): (usize, usize)) {
        let ln = TcpListener::bind(loopback0()).await.expect("bind");
        let addr = ln.local_addr().unwrap();
        let acceptor = tokio::spawn(async move {
            loop {
                drop(ln.accept().await.expect("accept"));
            }
        });
        let op = || async move {
            let mut c = TcpStream::connect(addr).await.expect("connect");
            let mut b = [0u8; 1];
            assert_eq!(c.read(&mut b).await.expect("read"), 0, "expected EOF");
        };
        for _ in 0..warm {
            op().await;
        }
        let t0 = Instant::now();
        for _ in 0..n {
            op().await;
        }
        emit(o, "accept_connect", "ns_per_op", ns_per_op(t0, n), "ns");
        acceptor.abort();
    }

    async fn pingpong(o: &Opts, (warm, n): (usize, usize)) {
        let ln = TcpListener::bind(loopback0()).await.expect("bind");
        let addr = ln.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = ln.accept().await.expect("accept");
            s.set_nodelay(true).unwrap();
            let mut buf = [0u8; MSG];
            while s.read_exact(&mut buf).await.is_ok() {
                if s.write_all(&buf).await.is_err() {
                    break;
                }
            }
        });
        let mut c = TcpStream::connect(addr).await.expect("connect");
        c.set_nodelay(true).unwrap();
        let msg = message();
        let mut buf = [0u8; MSG];
        for _ in 0..warm {
            c.write_all(&msg).await.unwrap();
            c.read_exact(&mut buf).await.unwrap();
        }
        let t0 = Instant::now();
        for _ in 0..n {
            c.write_all(&msg).await.unwrap();
            c.read_exact(&mut buf).await.unwrap();
        }
        emit(o, "pingpong", "ns_per_op", ns_per_op(t0, n), "ns");
    }

    async fn idle_conns(o: &Opts) {
        let n = idle_count(o);
        let ln = TcpListener::bind(loopback0()).await.expect("bind");
        let addr = ln.local_addr().unwrap();
        let (ready_tx, mut ready_rx) = mpsc::unbounded_channel::<()>();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<()>();
        let acceptor = tokio::spawn(async move {
            loop {
                let (mut s, _) = ln.accept().await.expect("accept");
                let (ready, done) = (ready_tx.clone(), done_tx.clone());
                tokio::spawn(async move {
                    let mut buf = [0u8; MSG];
                    ready.send(()).unwrap();
                    let _ = s.read(&mut buf).await;
                    drop(s);
                    let _ = done.send(());
                });
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let before = rss_bytes();
        let mut clients = Vec::with_capacity(n);
        while clients.len() < n {
            let k = (n - clients.len()).min(100);
            for _ in 0..k {
                clients.push(TcpStream::connect(addr).await.expect("connect"));
            }
            for _ in 0..k {
                ready_rx.recv().await.unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await; // every server task is parked in read
        let after = rss_bytes();
        emit(o, "idle_conns", "bytes_per_conn", (after - before) as f64 / n as f64, "bytes");
        drop(clients);
        for _ in 0..n {
            done_rx.recv().await.unwrap();
        }
        acceptor.abort();
    }

    async fn body(o: &'static Opts) {
        let c = &o.counts;
        if o.want("idle_conns") {
            idle_conns(o).await;
        }
        if o.want("bind") {
            let (warm, n) = c.bind;
            bind_loop(warm).await;
            let t0 = Instant::now();
            bind_loop(n).await;
            emit(o, "bind", "ns_per_op", ns_per_op(t0, n), "ns");
        }
        if o.want("bind_concurrent") {
            let (warm, n) = c.bind_concurrent;
            let n = n / CONC_UNITS * CONC_UNITS;
            bind_concurrent(warm).await;
            let t0 = Instant::now();
            bind_concurrent(n).await;
            emit(o, "bind_concurrent", "ns_per_op", ns_per_op(t0, n), "ns");
        }
        if o.want("accept_connect") {
            accept_connect(o, c.accept_connect).await;
        }
        if o.want("pingpong") {
            pingpong(o, c.pingpong).await;
        }
    }

    pub fn run(o: &'static Opts, multi: bool) {
        let rt = if multi {
            tokio::runtime::Builder::new_multi_thread().enable_all().build()
        } else {
            tokio::runtime::Builder::new_current_thread().enable_all().build()
        }
        .expect("runtime");
        // The whole body is a spawned task, so that it runs on a worker in both flavors.
        rt.block_on(async { tokio::spawn(body(o)).await.unwrap() });
    }
}

fn main() {
    let mut mode = String::from("thread");
    let mut flavor = String::from("current");
    let mut workers = 1usize;
    let mut quick = false;
    let mut only = None;
    let mut idle = fibers::Idle::Task;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mode" => mode = args.next().expect("--mode VALUE"),
            "--flavor" => flavor = args.next().expect("--flavor VALUE"),
            "--workers" => {
                workers = args.next().and_then(|w| w.parse().ok()).expect("--workers N (0: one per CPU)")
            }
            "--quick" => quick = true,
            "--case" => only = Some(args.next().expect("--case NAME")),
            "--idle" => {
                idle = match args.next().as_deref() {
                    Some("task") => fibers::Idle::Task,
                    Some("fiber") => fibers::Idle::Fiber,
                    _ => panic!("--idle task|fiber"),
                }
            }
            _ => {
                eprintln!(
                    "usage: tcp-peer --mode thread|tokio|spindle [--flavor current|multi|local] [--workers N] [--idle task|fiber] [--quick] [--case NAME]"
                );
                std::process::exit(2);
            }
        }
    }
    let counts = counts(quick);
    let fd_limit = raise_nofile();
    let competitor = match mode.as_str() {
        "thread" => "rust-thread",
        "tokio" => "tokio",
        "spindle" if workers == 1 => "spindle",
        "spindle" => "spindle-mt",
        m => panic!("unknown mode {m}"),
    };
    let opts: &'static Opts = Box::leak(Box::new(Opts { competitor, only, counts, fd_limit }));
    match mode.as_str() {
        "thread" => threads::run(opts),
        "spindle" => fibers::run(opts, workers, flavor == "local", idle),
        _ => tasks::run(opts, flavor == "multi"),
    }
}
