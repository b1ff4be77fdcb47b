//! Connections move between workers: a connection is a `Send` task whose
//! socket any worker's reactor may deliver, so a handler that computes without parking holds
//! up its own request only. With connections pinned to workers (the design before), the
//! connections on the computing worker, and the accept loop when it ran there, waited until
//! the computation ended, while the other worker sat idle.

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, get, read_response};
use spindle_http::{Body, Request, Response, Server};

/// How long the spinning handler waits at most for the test to release it: only reached
/// when the other requests are held up (the failure this test catches).
const SPIN_LIMIT: Duration = Duration::from_secs(10);

#[test]
fn cpu_heavy_handler_does_not_hold_up_other_connections() {
    let spinning = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let (spinning2, release2) = (spinning.clone(), release.clone());
    let server = Server::builder()
        .workers(2)
        .serve("127.0.0.1:0", move |req: Request<Body>| {
            if req.uri().path() != "/spin" {
                return Response::new("fast");
            }
            // Computes (a busy loop, never parking) until the test has had every other
            // request answered, or SPIN_LIMIT passes.
            spinning2.store(true, Ordering::SeqCst);
            let deadline = Instant::now() + SPIN_LIMIT;
            while !release2.load(Ordering::SeqCst) {
                if Instant::now() > deadline {
                    return Response::new("held up");
                }
                std::hint::spin_loop();
            }
            Response::new("released")
        })
        .unwrap();
    let addr = server.local_addr();
    // Keep-alive connections that served a request before the computation started.
    let mut kept: Vec<_> = (0..4).map(|_| connect(addr)).collect();
    for s in &mut kept {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(read_response(s, &mut Vec::new()).unwrap().text(), "fast");
    }
    let spin = std::thread::spawn(move || get(addr, "/spin"));
    while !spinning.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    // While one worker computes: the kept connections and fresh ones are all answered.
    for s in &mut kept {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(read_response(s, &mut Vec::new()).unwrap().text(), "fast");
    }
    for _ in 0..8 {
        assert_eq!(get(addr, "/").text(), "fast");
    }
    release.store(true, Ordering::SeqCst);
    let spun = spin.join().unwrap();
    assert_eq!(spun.text(), "released", "the other requests were answered while the handler computed");
    server.shutdown();
}
