//! What std's blocking calls cost in fibers with spindle's `hook` feature, against spindle's
//! own types doing the same, in one run (the figures are for `docs/perf/hook.md`):
//!
//! - `connect50`: 50 fibers on 2 workers each connect to a server that answers after 100 ms
//!   and read its answer, with `std::net::TcpStream` (hooked) and `spindle::net::TcpStream`;
//!   the wall time of the whole batch.
//! - `sleep1000`: 1,000 fibers on 2 workers each `std::thread::sleep(100 ms)`, and the same
//!   with `spindle::time::sleep`.
//!
//! `cargo run --release -p spindle-perf --features hook --bin hook_blocking [runs]` prints one
//! line per case and kind: the median and the range over the runs (default 7).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(2).build().unwrap()
}

/// A server (plain threads) that answers each connection's byte after 100 ms.
fn slow_server() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut b = [0u8; 1];
                if conn.read_exact(&mut b).is_ok() {
                    std::thread::sleep(Duration::from_millis(100));
                    let _ = conn.write_all(b"k");
                }
            });
        }
    });
    addr
}

fn connect50(addr: std::net::SocketAddr, std_net: bool) -> Duration {
    let rt = runtime();
    let took = rt.block_on(move || {
        let start = Instant::now();
        let fibers: Vec<_> = (0..50)
            .map(|_| {
                spindle::spawn(move || {
                    let mut b = [0u8; 1];
                    if std_net {
                        let mut s = std::net::TcpStream::connect(addr).unwrap();
                        s.write_all(b"q").unwrap();
                        s.read_exact(&mut b).unwrap();
                    } else {
                        let mut s = spindle::net::TcpStream::connect(addr).unwrap();
                        s.write_all(b"q").unwrap();
                        s.read_exact(&mut b).unwrap();
                    }
                })
            })
            .collect();
        fibers.into_iter().for_each(|f| f.join().unwrap());
        start.elapsed()
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    took
}

fn sleep1000(std_sleep: bool) -> Duration {
    let rt = runtime();
    let took = rt.block_on(move || {
        let start = Instant::now();
        let fibers: Vec<_> = (0..1000)
            .map(|_| {
                spindle::spawn(move || {
                    if std_sleep {
                        std::thread::sleep(Duration::from_millis(100));
                    } else {
                        spindle::time::sleep(Duration::from_millis(100));
                    }
                })
            })
            .collect();
        fibers.into_iter().for_each(|f| f.join().unwrap());
        start.elapsed()
    });
    rt.shutdown_timeout(Duration::from_secs(1));
    took
}

fn report(case: &str, kind: &str, mut runs: Vec<Duration>) {
    runs.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{case:10} {kind:16} median {:8.1} ms  range {:.1}..{:.1} ms  ({} runs)",
        ms(runs[runs.len() / 2]),
        ms(runs[0]),
        ms(runs[runs.len() - 1]),
        runs.len()
    );
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(7);
    let addr = slow_server();
    // Warm-up, then the kinds interleaved run by run.
    connect50(addr, true);
    connect50(addr, false);
    let (mut std_net, mut spindle_net, mut std_sleep, mut spindle_sleep) = (vec![], vec![], vec![], vec![]);
    for _ in 0..n {
        std_net.push(connect50(addr, true));
        spindle_net.push(connect50(addr, false));
        std_sleep.push(sleep1000(true));
        spindle_sleep.push(sleep1000(false));
    }
    report("connect50", "std::net (hook)", std_net);
    report("connect50", "spindle::net", spindle_net);
    report("sleep1000", "std (hook)", std_sleep);
    report("sleep1000", "spindle", spindle_sleep);
}
