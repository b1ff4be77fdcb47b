//! Handler fibers carry names that say which client and which request they serve, so that
//! `Server::dump_fibers` and a stack overflow report name them; `Builder::stack_size` sets
//! their stack. Connections are tasks, not fibers: they
//! have no stack to name, and `Server::open_connections` counts them.

mod common;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, get, read_response};
use spindle_http::{Body, Request, Response, Server};

#[test]
fn dump_names_connection_and_handler_fibers() {
    // /upload has a body, so its blocking handler runs on a fiber of its own; it waits
    // (parked in spindle sleeps, bounded by 10 s) until the test has looked.
    let release = Arc::new(AtomicBool::new(false));
    let released = release.clone();
    let server = Server::builder()
        .serve("127.0.0.1:0", move |_req: Request<Body>| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !released.load(Ordering::SeqCst) && Instant::now() < deadline {
                spindle::time::sleep(Duration::from_millis(5));
            }
            Response::new("done")
        })
        .unwrap();
    let addr = server.local_addr();
    let mut s = connect(addr);
    let me = s.local_addr().unwrap();
    s.write_all(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi").unwrap();
    // Poll the fiber list until the handler fiber shows (bounded: 5 s).
    let deadline = Instant::now() + Duration::from_secs(5);
    let names = loop {
        let names: Vec<String> = server.dump_fibers().into_iter().filter_map(|f| f.name).collect();
        if names.iter().any(|n| n.contains("POST")) || Instant::now() > deadline {
            break names;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(names.contains(&format!("spindle-http {me} POST /upload")), "{names:?}");
    // The connection is a task: no fiber of its own, but counted.
    assert!(!names.contains(&format!("spindle-http {me}")), "{names:?}");
    assert_eq!(server.open_connections(), 1);
    release.store(true, Ordering::SeqCst);
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().text(), "done");
    server.shutdown();
}

const CHILD_ENV: &str = "SPINDLE_HTTP_TEST_OVERFLOW_CHILD";

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut local = [0u8; 1024];
    local[(depth % 1024) as usize] = depth as u8;
    std::hint::black_box(&mut local);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + std::hint::black_box(local[1]) as u64
}

/// The child's body: a handler that overflows its 64 KiB stack.
#[test]
fn overflow_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful when re-executed by the test below
    }
    let server = Server::builder()
        .stack_size(64 * 1024)
        .serve("127.0.0.1:0", |_req: Request<Body>| Response::new(recurse(0).to_string()))
        .unwrap();
    let _ = get(server.local_addr(), "/deep");
    unreachable!("the overflow must abort the process");
}

#[test]
fn handler_overflow_report_names_the_connection() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "overflow_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(6), "expected SIGABRT; status {:?}, stderr:\n{stderr}", out.status);
    assert!(
        stderr.contains("fiber 'spindle-http 127.0.0.1:") && stderr.contains("has overflowed its stack"),
        "the report names the connection; stderr:\n{stderr}"
    );
    assert!(stderr.contains("64 KiB"), "the report gives the configured stack size; stderr:\n{stderr}");
}
