//! The `ureq` HTTP client (plain `std::net` sockets inside) in many fibers of a two-worker
//! spindle runtime with the `hook` feature, against a spindle-http server in the same process
//! (a runtime of its own) whose handlers wait until the test lets them answer.

mod support;

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle_http::{Body, Request, Response, Server};
use support::{on_runtime, wait_until, InFlight, WORKERS};

/// A server whose handlers count themselves in and answer their path only once released.
struct Held {
    server: Server,
    arrived: Arc<InFlight>,
    release: Arc<AtomicBool>,
}

fn held_server() -> Held {
    let arrived = Arc::new(InFlight::default());
    let release = Arc::new(AtomicBool::new(false));
    let (a, r) = (arrived.clone(), release.clone());
    let server = Server::builder()
        .workers(WORKERS)
        .serve(("127.0.0.1", 0), move |req: Request<Body>| {
            let _here = a.enter();
            wait_until(|| r.load(Ordering::SeqCst));
            Response::new(req.uri().path().to_string())
        })
        .expect("a spindle-http server");
    Held { server, arrived, release }
}

fn agent(timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::config_builder().timeout_recv_response(timeout).build().into()
}

#[test]
fn two_hundred_fibers_wait_in_http_requests_at_once() {
    // 200 fibers, each with its own agent (its own connection), wait for answers the server
    // gives only once all 200 requests have arrived.
    const N: usize = 200;
    let held = held_server();
    let url = format!("http://{}", held.server.local_addr());
    let (arrived, release) = (held.arrived.clone(), held.release.clone());
    let in_flight = Arc::new(InFlight::default());
    let counted = in_flight.clone();
    let bodies = on_runtime(WORKERS, move || {
        let fibers: Vec<_> = (0..N)
            .map(|i| {
                let (url, in_flight) = (url.clone(), counted.clone());
                spindle::spawn(move || {
                    let _call = in_flight.enter();
                    let mut res = agent(None).get(format!("{url}/{i}")).call().expect("GET");
                    res.body_mut().read_to_string().expect("the body")
                })
            })
            .collect();
        wait_until(|| arrived.most() == N);
        release.store(true, Ordering::SeqCst);
        fibers.into_iter().map(|f| f.join().expect("a client fiber panicked")).collect::<Vec<_>>()
    });
    for (i, body) in bodies.iter().enumerate() {
        assert_eq!(body, &format!("/{i}"), "each fiber got its own answer");
    }
    assert_eq!(in_flight.most(), N, "every request was in flight at once");
    held.server.shutdown();
}

#[test]
fn a_timer_fiber_ticks_while_a_hundred_fibers_wait_for_answers() {
    // The ticker counts the ticks it makes while all 100 requests wait, and releases the
    // server's answers after 20 of them.
    const N: usize = 100;
    const TICKS: usize = 20;
    let held = held_server();
    let url = format!("http://{}", held.server.local_addr());
    let release = held.release.clone();
    let ticks = on_runtime(WORKERS, move || {
        let in_flight = Arc::new(InFlight::default());
        let fibers: Vec<_> = (0..N)
            .map(|_| {
                let (url, in_flight) = (url.clone(), in_flight.clone());
                spindle::spawn(move || {
                    let _call = in_flight.enter();
                    let mut res = agent(None).get(format!("{url}/tick")).call().expect("GET");
                    res.body_mut().read_to_string().expect("the body")
                })
            })
            .collect();
        let mut ticks = 0;
        while ticks < TICKS {
            spindle::time::sleep(Duration::from_millis(1));
            if in_flight.now() == N {
                ticks += 1;
            }
        }
        release.store(true, Ordering::SeqCst);
        for f in fibers {
            assert_eq!(f.join().expect("a client fiber panicked"), "/tick");
        }
        ticks
    });
    assert_eq!(ticks, TICKS);
    held.server.shutdown();
}

#[test]
fn a_connection_the_server_closes_gives_the_crates_error() {
    // A server (a plain thread) that reads each request and closes the connection without
    // an answer: every fiber's request fails with ureq's error instead of waiting.
    const N: usize = 50;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let closer = std::thread::spawn(move || {
        for _ in 0..N {
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = [0u8; 1024];
            let _ = conn.read(&mut head);
        }
    });
    let results = on_runtime(WORKERS, move || {
        let fibers: Vec<_> = (0..N)
            .map(|_| spindle::spawn(move || agent(None).get(format!("http://{addr}/")).call().err()))
            .collect();
        fibers.into_iter().map(|f| f.join().expect("a client fiber panicked")).collect::<Vec<_>>()
    });
    closer.join().unwrap();
    for err in results {
        let err = err.expect("a request on a closed connection fails");
        assert!(matches!(err, ureq::Error::Io(_) | ureq::Error::Protocol(_)), "{err:?}");
    }
}

#[test]
fn a_response_timeout_comes_back_as_the_crates_error() {
    // The server holds its answers; each fiber's agent waits 50 ms for one and gets ureq's
    // timeout error.
    const N: usize = 20;
    let held = held_server();
    let url = format!("http://{}", held.server.local_addr());
    let errors = on_runtime(WORKERS, move || {
        let fibers: Vec<_> = (0..N)
            .map(|_| {
                let url = url.clone();
                spindle::spawn(move || {
                    agent(Some(Duration::from_millis(50))).get(format!("{url}/slow")).call().err()
                })
            })
            .collect();
        fibers.into_iter().map(|f| f.join().expect("a client fiber panicked")).collect::<Vec<_>>()
    });
    held.release.store(true, Ordering::SeqCst);
    for err in errors {
        let err = err.expect("no answer within the timeout");
        assert!(matches!(err, ureq::Error::Timeout(_)), "{err:?}");
    }
    held.server.shutdown();
}
