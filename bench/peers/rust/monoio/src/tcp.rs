//! tcp suite, competitor `monoio`: monoio 0.2 (thread-per-core, completion-based I/O) on its
//! io_uring driver (`RuntimeBuilder::<IoUringDriver>`, timer enabled, other settings default:
//! 1,024 ring entries), one runtime on the main thread, one task per unit: an accept task, an
//! echo task (64 B, TCP_NODELAY both ends), one task per idle connection parked in `read`.
//! Cases: accept_connect, pingpong and idle_conns (bind and bind_concurrent are plain socket
//! syscalls in monoio, not run). monoio's I/O takes owned buffers (`read(buf) -> (res, buf)`),
//! so each unit reuses one `Vec<u8>`. Same structure as the tokio competitor.
//!
//! When io_uring cannot be set up (seccomp, `kernel.io_uring_disabled`, old kernel), the
//! program says so on stderr and exits 1: the tournament shows that as the row's reason.
//!
//! Usage: `monoio-tcp [--quick] [--case NAME]`

#[path = "../../tcp/src/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use harness::*;
use monoio::io::{AsyncReadRent, AsyncReadRentExt, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};
use monoio::{IoUringDriver, RuntimeBuilder};
use tokio::sync::mpsc::unbounded_channel;

async fn accept_connect(o: &Opts, (warm, n): (usize, usize)) {
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    // Accepts exactly the connections of this case, so that it ends and is joined.
    let acceptor = monoio::spawn(async move {
        for _ in 0..warm + n {
            drop(ln.accept().await.expect("accept"));
        }
    });
    let mut b = vec![0u8; 1];
    let op = async |b: Vec<u8>| {
        let mut c = TcpStream::connect_addr(addr).await.expect("connect");
        let (res, b) = c.read(b).await;
        assert_eq!(res.expect("read"), 0, "expected EOF");
        b
    };
    for _ in 0..warm {
        b = op(b).await;
    }
    let t0 = Instant::now();
    for _ in 0..n {
        b = op(b).await;
    }
    emit(o, "accept_connect", "ns_per_op", ns_per_op(t0, n), "ns");
    acceptor.await;
}

async fn pingpong(o: &Opts, (warm, n): (usize, usize)) {
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    let echo = monoio::spawn(async move {
        let (mut s, _) = ln.accept().await.expect("accept");
        s.set_nodelay(true).unwrap();
        let mut buf = vec![0u8; MSG];
        loop {
            let (res, b) = s.read_exact(buf).await;
            if res.is_err() {
                break;
            }
            let (res, b) = s.write_all(b).await;
            if res.is_err() {
                break;
            }
            buf = b;
        }
    });
    let mut c = TcpStream::connect_addr(addr).await.expect("connect");
    c.set_nodelay(true).unwrap();
    let mut msg = message().to_vec();
    let mut buf = vec![0u8; MSG];
    let mut round = async |msg: Vec<u8>, buf: Vec<u8>| {
        let (res, msg) = c.write_all(msg).await;
        res.expect("write");
        let (res, buf) = c.read_exact(buf).await;
        res.expect("read");
        (msg, buf)
    };
    for _ in 0..warm {
        (msg, buf) = round(msg, buf).await;
    }
    let t0 = Instant::now();
    for _ in 0..n {
        (msg, buf) = round(msg, buf).await;
    }
    emit(o, "pingpong", "ns_per_op", ns_per_op(t0, n), "ns");
    assert_eq!(buf, msg, "echoed bytes");
    drop(c);
    echo.await;
}

async fn idle_conns(o: &Opts) {
    let n = idle_count(o);
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    let (ready_tx, mut ready_rx) = unbounded_channel::<()>();
    let (done_tx, mut done_rx) = unbounded_channel::<()>();
    let acceptor = monoio::spawn(async move {
        for _ in 0..n {
            let (mut s, _) = ln.accept().await.expect("accept");
            let (ready, done) = (ready_tx.clone(), done_tx.clone());
            monoio::spawn(async move {
                ready.send(()).unwrap();
                let _ = s.read(vec![0u8; MSG]).await;
                drop(s);
                let _ = done.send(());
            });
        }
    });
    monoio::time::sleep(Duration::from_millis(10)).await;
    let before = rss_bytes();
    let mut clients = Vec::with_capacity(n);
    while clients.len() < n {
        let k = (n - clients.len()).min(100);
        for _ in 0..k {
            clients.push(TcpStream::connect_addr(addr).await.expect("connect"));
        }
        for _ in 0..k {
            ready_rx.recv().await.unwrap();
        }
    }
    monoio::time::sleep(Duration::from_millis(100)).await; // every server task is parked in read
    let after = rss_bytes();
    emit(o, "idle_conns", "bytes_per_conn", (after - before) as f64 / n as f64, "bytes");
    drop(clients);
    for _ in 0..n {
        done_rx.recv().await.unwrap();
    }
    acceptor.await;
}

async fn body(o: &'static Opts) {
    let c = &o.counts;
    if o.want("idle_conns") {
        idle_conns(o).await;
    }
    if o.want("accept_connect") {
        accept_connect(o, c.accept_connect).await;
    }
    if o.want("pingpong") {
        pingpong(o, c.pingpong).await;
    }
}

fn main() {
    let o = opts_from_args("monoio", "monoio-tcp [--quick] [--case NAME]");
    let mut rt = match RuntimeBuilder::<IoUringDriver>::new().enable_timer().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("monoio: io_uring is not available here ({e}); this peer runs on io_uring only");
            std::process::exit(1);
        }
    };
    // The whole body is a spawned task, as in the tokio competitor.
    rt.block_on(async move { monoio::spawn(body(o)).await });
}
