//! tcp suite, competitor `may`: may::net on may's scheduler (stackful coroutines, may 0.3)
//! with one worker thread (`may::config().set_workers(1)`: the comparable of one spindle
//! worker and tokio's current_thread), other settings default (32 KiB coroutine stacks,
//! workers pinned). Same structure as the spindle competitor: the whole body runs in a
//! coroutine, 100 spawned coroutines for bind_concurrent, an accept coroutine, an echo
//! coroutine, one coroutine per idle connection parked in `read`.
//!
//! Usage: `may-tcp [--quick] [--case NAME]`

#[path = "../../tcp/src/harness.rs"]
mod harness;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use harness::*;
use may::coroutine::JoinHandle;
use may::net::{TcpListener, TcpStream};
use may::sync::mpsc::channel;

/// Spawns a coroutine on may's scheduler.
fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    // SAFETY: may's `spawn` is unsafe because a coroutine that reads thread-local storage may
    // see another thread's values after it migrates; these closures touch no thread-locals
    // (sockets, channels and atomics only), and there is a single worker.
    unsafe { may::coroutine::spawn(f) }
}

fn bind_loop(n: usize) {
    for _ in 0..n {
        drop(TcpListener::bind(loopback0()).expect("bind"));
    }
}

fn bind_concurrent(total: usize) {
    let units: Vec<_> = (0..CONC_UNITS).map(|_| spawn(move || bind_loop(total / CONC_UNITS))).collect();
    for u in units {
        u.join().unwrap();
    }
}

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
    acceptor.join().unwrap();
}

fn pingpong(o: &Opts, (warm, n): (usize, usize)) {
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    let echo = spawn(move || {
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
    drop(c);
    echo.join().unwrap();
}

fn idle_conns(o: &Opts) {
    let n = idle_count(o);
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    let (ready_tx, ready_rx) = channel::<()>();
    let (done_tx, done_rx) = channel::<()>();
    let acceptor = spawn(move || {
        for _ in 0..n {
            let (mut s, _) = ln.accept().expect("accept");
            let (ready, done) = (ready_tx.clone(), done_tx.clone());
            spawn(move || {
                let mut buf = [0u8; MSG];
                ready.send(()).unwrap();
                let _ = s.read(&mut buf);
                drop(s);
                let _ = done.send(());
            });
        }
    });
    may::coroutine::sleep(Duration::from_millis(10));
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
    may::coroutine::sleep(Duration::from_millis(100)); // every server coroutine is parked in read
    let after = rss_bytes();
    emit(o, "idle_conns", "bytes_per_conn", (after - before) as f64 / n as f64, "bytes");
    drop(clients);
    for _ in 0..n {
        done_rx.recv().unwrap();
    }
    acceptor.join().unwrap();
}

fn body(o: &'static Opts) {
    run_blocking(o, &BlockingCases { bind_loop, bind_concurrent, accept_connect, pingpong, idle_conns });
}

fn main() {
    let o = opts_from_args("may", "may-tcp [--quick] [--case NAME]");
    may::config().set_workers(1);
    spawn(move || body(o)).join().expect("benchmark coroutine panicked");
}
