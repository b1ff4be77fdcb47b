//! `spindle`: spindle::net on one spindle runtime (one worker thread, default 256 KiB stacks
//! committed lazily), one fiber per unit. `spindle-mt` (`--workers 0`): the same on spindle's
//! default runtime, one worker per CPU. Same structure as the tokio competitor: the whole
//! body runs as a fiber (`Runtime::block_on`), 100 spawned fibers for bind_concurrent, an
//! accept fiber, an echo fiber. idle_conns: one task per idle connection awaiting a read
//! (`--idle task`, the default: how spindle-http holds its connections, and what the tokio
//! competitor does), or one fiber per idle connection parked in `read` (`--idle fiber`: a
//! parked fiber keeps the touched page of its stack, 4 KiB more per connection).

use super::*;
use spindle::net::{TcpListener, TcpStream};
use spindle::sync::unbounded;

fn bind_loop(n: usize) {
    for _ in 0..n {
        drop(TcpListener::bind(loopback0()).expect("bind"));
    }
}

fn bind_concurrent(total: usize) {
    let units: Vec<_> =
        (0..CONC_UNITS).map(|_| spindle::spawn(move || bind_loop(total / CONC_UNITS))).collect();
    for u in units {
        u.join().unwrap();
    }
}

fn accept_connect(o: &Opts, (warm, n): (usize, usize)) {
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    // Accepts exactly the connections of this case, so that it ends and is joined.
    let acceptor = spindle::spawn(move || {
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
    let echo = spindle::spawn(move || {
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

/// What holds each server end in idle_conns.
#[derive(Clone, Copy, Debug)]
pub enum Idle {
    /// A task awaiting a read (`spindle::task::spawn_async`).
    Task,
    /// A fiber parked in a blocking-style read.
    Fiber,
}

/// The `--idle` choice, set once by [`run`].
static IDLE: std::sync::OnceLock<Idle> = std::sync::OnceLock::new();

fn idle_conns(o: &Opts) {
    let idle = *IDLE.get().expect("fibers::run sets the idle mode");
    let n = idle_count(o);
    let ln = TcpListener::bind(loopback0()).expect("bind");
    let addr = ln.local_addr().unwrap();
    let (ready_tx, ready_rx) = unbounded::<()>();
    let (done_tx, done_rx) = unbounded::<()>();
    let acceptor = spindle::spawn(move || {
        for i in 0..n {
            if i % 100 == 99 {
                // With two workers, connections keep arriving and accept never waits: yield
                // now and then, within the watchdog's budget.
                spindle::yield_now();
            }
            let (mut s, _) = ln.accept().expect("accept");
            let (ready, done) = (ready_tx.clone(), done_tx.clone());
            match idle {
                Idle::Task => drop(spindle::task::spawn_async(async move {
                    let mut buf = [0u8; MSG];
                    ready.send(()).unwrap();
                    let _ = std::future::poll_fn(|cx| {
                        futures_io::AsyncRead::poll_read(std::pin::Pin::new(&mut s), cx, &mut buf)
                    })
                    .await;
                    drop(s);
                    let _ = done.send(());
                })),
                Idle::Fiber => drop(spindle::spawn(move || {
                    let mut buf = [0u8; MSG];
                    ready.send(()).unwrap();
                    let _ = s.read(&mut buf);
                    drop(s);
                    let _ = done.send(());
                })),
            }
        }
    });
    spindle::time::sleep(Duration::from_millis(10));
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
        // Loopback connects complete at once and, with two workers, the readies are already
        // queued: nothing here parks, so yield once a batch (the watchdog's budget).
        spindle::yield_now();
    }
    spindle::time::sleep(Duration::from_millis(100)); // every server end is parked in read
    let after = rss_bytes();
    emit(o, "idle_conns", "bytes_per_conn", (after - before) as f64 / n as f64, "bytes");
    // Closing 10,000 sockets takes longer than spindle's watchdog budget (100 ms without a
    // switch draws a warning): close them in batches, letting the server ends see their EOF.
    while !clients.is_empty() {
        clients.truncate(clients.len().saturating_sub(100));
        spindle::yield_now();
    }
    for _ in 0..n {
        done_rx.recv().unwrap();
    }
    acceptor.join().unwrap();
}

fn body(o: &Opts) {
    run_blocking(o, &BlockingCases { bind_loop, bind_concurrent, accept_connect, pingpong, idle_conns });
}

/// `workers`: worker threads (0: spindle's default, one per CPU); `local`: a
/// `spindle::LocalRuntime` instead (no worker thread: this thread is the one worker);
/// `idle`: what holds an idle connection.
pub fn run(o: &'static Opts, workers: usize, local: bool, idle: Idle) {
    assert!(IDLE.set(idle).is_ok(), "fibers::run runs once");
    let mut builder = spindle::Builder::new();
    if local {
        let rt = builder.build_local().expect("runtime");
        return rt.block_on(move || body(o));
    }
    if workers > 0 {
        builder.worker_threads(workers);
    }
    let rt = builder.build().expect("runtime");
    rt.block_on(move || body(o));
}
