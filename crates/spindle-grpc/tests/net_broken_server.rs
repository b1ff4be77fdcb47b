//! spindle-grpc's network client against broken servers written with plain sockets: a server
//! that never speaks, one that hangs up at once, one that sends garbage, one that hangs up on
//! the first request, one that never answers a stream, a backlog nobody accepts, one that
//! resets every connection after the handshake, and one that hangs up right after its
//! SETTINGS (also while many fresh channels connect and call). `Endpoint::connect`, a lazy
//! channel's first call and a call with a deadline each end with an error (the code the
//! client's docs promise), never a hang; dropping the channel stops its manager fiber; a
//! failing server does not make the client open more connections than it has calls.
//!
//! Each case runs under a watchdog that aborts the test binary with "hung: ..." after 30 s, so
//! that a regression fails instead of stalling CI. Nothing here asserts how long anything took.

mod net;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use net::wait_until;
use spindle_grpc::{Endpoint, RemoteChannel};
use spindle_grpc_interop::pb::test_service_client::TestServiceClient;
use spindle_grpc_interop::pb::*;
use tonic::Code;

#[path = "../../spindle/tests/support/watchdog.rs"]
mod watchdog;
use watchdog::Watchdog;

#[path = "../../spindle/tests/support/thread_server.rs"]
mod thread_server;
use thread_server::serve;

/// The server's side of the HTTP/2 preface: an empty SETTINGS frame.
const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
/// The client's connection preface.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(2).build().unwrap()
}

/// An endpoint with small timeouts: 200 ms to connect, retries 10 to 40 ms apart.
fn endpoint(rt: &spindle::Runtime, addr: SocketAddr) -> Endpoint {
    Endpoint::new(format!("http://{addr}"))
        .unwrap()
        .handle(rt.handle())
        .connect_timeout(Duration::from_millis(200))
        .backoff(Duration::from_millis(10), Duration::from_millis(40))
}

/// `Endpoint::connect`, in a fiber.
fn connect(rt: &spindle::Runtime, addr: SocketAddr) -> std::io::Result<RemoteChannel> {
    let endpoint = endpoint(rt, addr);
    rt.block_on(move || spindle::task::block_on(endpoint.connect()))
}

/// A lazy channel (no attempt before its first call).
fn lazy(rt: &spindle::Runtime, addr: SocketAddr) -> RemoteChannel {
    endpoint(rt, addr).connect_lazy().unwrap()
}

/// An `EmptyCall` in a fiber, with a deadline if given; the status it ends with (`OK` if it
/// succeeds).
fn call(rt: &spindle::Runtime, channel: &RemoteChannel, deadline: Option<Duration>) -> tonic::Status {
    let channel = channel.clone();
    let result = rt.block_on(move || {
        spindle::task::block_on(async move {
            let mut request = tonic::Request::new(Empty {});
            if let Some(d) = deadline {
                request.set_timeout(d);
            }
            TestServiceClient::new(channel).empty_call(request).await
        })
    });
    result.map_or_else(|status| status, |_| tonic::Status::ok(""))
}

/// Asserts that `status` has code `code` and says why.
#[track_caller]
fn assert_code(status: tonic::Status, code: Code) {
    assert_eq!(status.code(), code, "{status:?}");
    assert!(!status.message().is_empty(), "a status without a message: {status:?}");
}

/// The checks of a server the client cannot connect to: `connect` fails (its error naming
/// `what`), a lazy channel's first call and a call with a (long) deadline are UNAVAILABLE, and
/// with `silent`, a call whose deadline passes before the connect timeout is DEADLINE_EXCEEDED.
fn cannot_connect(addr: SocketAddr, what: &str, silent: bool) {
    let rt = runtime();
    let err = connect(&rt, addr).expect_err("connected to a broken server");
    assert!(err.to_string().contains(what), "{err}");
    let channel = lazy(&rt, addr);
    assert_code(call(&rt, &channel, None), Code::Unavailable);
    assert_code(call(&rt, &lazy(&rt, addr), Some(Duration::from_secs(10))), Code::Unavailable);
    if silent {
        // The call's deadline comes before the attempt's: the deadline ends it.
        let status = call(&rt, &lazy(&rt, addr), Some(Duration::from_millis(50)));
        assert_code(status, Code::DeadlineExceeded);
    }
    assert_eq!(channel.in_flight(), 0);
}

/// Reads the client's preface (false if the connection ends first).
fn read_preface(stream: &mut TcpStream) -> bool {
    let mut preface = [0; 24];
    stream.read_exact(&mut preface).is_ok() && &preface == PREFACE
}

/// Reads the client's frames until one of type `kind` with `flags` set (true), or the end of
/// the connection (false).
fn read_until_frame(stream: &mut TcpStream, kind: u8, flags: u8) -> bool {
    let mut header = [0; 9];
    loop {
        if stream.read_exact(&mut header).is_err() {
            return false;
        }
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as u64;
        let skipped = std::io::copy(&mut (&mut *stream).take(len), &mut std::io::sink());
        if skipped.map_or(true, |n| n != len) {
            return false;
        }
        if header[3] == kind && header[4] & flags == flags {
            return true;
        }
    }
}

/// Reads until the client closes the connection.
fn drain(mut stream: TcpStream) {
    let _ = std::io::copy(&mut stream, &mut std::io::sink());
}

/// Case 1: the server accepts and never sends anything.
#[test]
fn a_server_that_accepts_and_says_nothing() {
    let _watchdog = Watchdog::arm("case 1 (accepts, says nothing)");
    let (addr, _) = serve(|s, _| drain(s));
    cannot_connect(addr, "SETTINGS", true);
}

/// Case 2: the server accepts and closes at once.
#[test]
fn a_server_that_closes_at_once() {
    let _watchdog = Watchdog::arm("case 2 (closes at once)");
    let (addr, _) = serve(|s, _| drop(s));
    // Closed (or reset: the client's preface was left unread).
    cannot_connect(addr, "SETTINGS", false);
}

/// Case 3: the server reads the client's preface and answers with bytes that are no HTTP/2.
#[test]
fn a_server_that_answers_garbage() {
    let _watchdog = Watchdog::arm("case 3 (garbage)");
    let (addr, _) = serve(|mut stream, _| {
        if read_preface(&mut stream) {
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            let _ = stream.write_all(&[0xff; 64]);
            drain(stream);
        }
    });
    cannot_connect(addr, "SETTINGS", false);
}

/// Case 4: a valid SETTINGS frame, then the server closes as soon as it sees the first
/// request's HEADERS: the call fails (UNAVAILABLE), it does not hang.
#[test]
fn a_server_that_hangs_up_on_the_first_request() {
    let _watchdog = Watchdog::arm("case 4 (closes after the first HEADERS)");
    let (addr, accepted) = serve(|mut stream, _| {
        if read_preface(&mut stream) && stream.write_all(&SETTINGS).is_ok() {
            read_until_frame(&mut stream, 1, 0);
        }
    });
    let rt = runtime();
    let channel = connect(&rt, addr).expect("the server's SETTINGS are valid");
    assert_code(call(&rt, &channel, None), Code::Unavailable);
    // The next call reconnects, and fails the same way.
    assert_code(call(&rt, &channel, Some(Duration::from_secs(10))), Code::Unavailable);
    let lazy = lazy(&rt, addr);
    assert_code(call(&rt, &lazy, None), Code::Unavailable);
    assert_code(call(&rt, &lazy, Some(Duration::from_secs(10))), Code::Unavailable);
    assert_eq!(channel.in_flight() + lazy.in_flight(), 0);
    // One connection per call (or connect) at most.
    let opened = accepted.load(SeqCst);
    assert!(opened <= 5, "{opened} connections for a connect and 4 calls");
}

/// Started, unfinished fibers of the runtime.
fn fibers(rt: &spindle::Runtime) -> usize {
    rt.dump_fibers().len()
}

/// Case 5: SETTINGS, then no stream is ever answered. A call with a deadline ends with
/// DEADLINE_EXCEEDED; one without may wait, but once it is given up and the channel dropped,
/// the channel's manager fiber ends.
#[test]
fn a_server_that_never_answers_a_stream() {
    let _watchdog = Watchdog::arm("case 5 (never answers)");
    let (addr, _) = serve(|mut stream, _| {
        if read_preface(&mut stream) && stream.write_all(&SETTINGS).is_ok() {
            drain(stream);
        }
    });
    let rt = runtime();
    let before = fibers(&rt);
    for eager in [true, false] {
        let channel = if eager {
            connect(&rt, addr).expect("the server's SETTINGS are valid")
        } else {
            lazy(&rt, addr)
        };
        assert_code(call(&rt, &channel, Some(Duration::from_millis(100))), Code::DeadlineExceeded);
        // Without a deadline the call waits; its caller gives up on it (drops it).
        let c = channel.clone();
        let given_up = rt.block_on(move || {
            spindle::task::block_on(spindle::time::timeout(
                Duration::from_millis(100),
                TestServiceClient::new(c).empty_call(Empty {}),
            ))
        });
        assert!(given_up.is_err(), "a server that never answers answered: {given_up:?}");
        assert!(wait_until(Duration::from_secs(10), || channel.in_flight() == 0));
        assert!(fibers(&rt) > before, "no manager fiber while the channel lives");
        drop(channel);
        assert!(
            wait_until(Duration::from_secs(10), || fibers(&rt) == before),
            "the manager fiber outlived its channel: {:?}",
            rt.dump_fibers()
        );
    }
}

/// Case 6: the listener's backlog is never accepted: the TCP handshake completes (the kernel
/// does it), nothing is ever read or sent.
#[test]
fn a_backlog_nobody_accepts() {
    let _watchdog = Watchdog::arm("case 6 (backlog never accepted)");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    cannot_connect(listener.local_addr().unwrap(), "SETTINGS", true);
    drop(listener);
}

/// Case 7: every connection gets a complete handshake (SETTINGS both ways, acknowledged), then
/// a reset. Every call fails with UNAVAILABLE, and the client opens at most one connection
/// per call: none while no call waits.
#[test]
fn a_server_that_resets_every_connection() {
    let _watchdog = Watchdog::arm("case 7 (resets after the handshake)");
    let (addr, accepted) = serve(|mut stream, _| {
        if !read_preface(&mut stream) || stream.write_all(&SETTINGS).is_err() {
            return;
        }
        // The client's SETTINGS ACK: it has the server's SETTINGS.
        if !read_until_frame(&mut stream, 4, 1) {
            return;
        }
        // A PING, whose ACK is left unread: closing a socket with unread data resets it.
        let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        if stream.write_all(&ping).is_ok() {
            let _ = stream.peek(&mut [0]);
        }
    });
    let rt = runtime();
    let calls = 20;
    let channel = lazy(&rt, addr);
    for i in 0..calls {
        let deadline = (i % 2 == 1).then_some(Duration::from_secs(10));
        assert_code(call(&rt, &channel, deadline), Code::Unavailable);
        let opened = accepted.load(SeqCst);
        assert!(opened <= i + 1, "{opened} connections for {} calls", i + 1);
    }
    // No call waits now: no reconnection either.
    std::thread::sleep(Duration::from_millis(300));
    let opened = accepted.load(SeqCst);
    assert!(opened <= calls, "{opened} connections for {calls} calls");
    assert_eq!(channel.in_flight(), 0);
}

/// Sends SETTINGS and hangs up.
fn settings_then_hang_up(mut stream: TcpStream) {
    if read_preface(&mut stream) {
        let _ = stream.write_all(&SETTINGS);
    }
}

/// Case 8: SETTINGS, then the server hangs up at once, on every connection. `connect` returns
/// (the connection may be gone before it sees it: then with an error), calls fail with
/// UNAVAILABLE, and the client opens at most one connection per call (or connect).
#[test]
fn a_server_that_hangs_up_after_its_settings() {
    let _watchdog = Watchdog::arm("case 8 (closes right after its SETTINGS)");
    let (addr, accepted) = serve(|s, _| settings_then_hang_up(s));
    let rt = runtime();
    let calls = 20;
    // The reset may overtake the SETTINGS: that attempt fails, and a failed attempt is retried
    // after the backoff even while no call waits. A backoff longer than the test keeps those
    // retries out of the count.
    let endpoint = endpoint(&rt, addr).backoff(Duration::from_secs(60), Duration::from_secs(60));
    let eager = endpoint.clone();
    let channel = match rt.block_on(move || spindle::task::block_on(eager.connect())) {
        Ok(channel) => channel,
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("closed") || e.contains("SETTINGS"), "{e}");
            endpoint.connect_lazy().unwrap()
        }
    };
    for i in 0..calls {
        let deadline = (i % 2 == 1).then_some(Duration::from_secs(10));
        assert_code(call(&rt, &channel, deadline), Code::Unavailable);
        let opened = accepted.load(SeqCst);
        assert!(opened <= i + 2, "{opened} connections for a connect and {} calls", i + 1);
    }
    std::thread::sleep(Duration::from_millis(300));
    let opened = accepted.load(SeqCst);
    assert!(opened <= calls + 1, "{opened} connections for a connect and {calls} calls");
    assert_eq!(channel.in_flight(), 0);
}

/// Case 8 again, on many fresh channels, each used from a fiber that a plain thread spawns:
/// `connect`, then a call (every other one with a deadline). The connection comes and goes
/// while they wait for it, at any moment: each returns, none waits for a manager that waits
/// for it (a lost wake-up once hung `connect` here, one round in a few hundred).
#[test]
fn connect_and_call_while_the_connection_comes_and_goes() {
    let _watchdog = Watchdog::arm("case 8b (connect and call, many channels)");
    let (addr, accepted) = serve(|s, _| settings_then_hang_up(s));
    let rt = runtime();
    let rounds = 300;
    for round in 0..rounds {
        let endpoint = endpoint(&rt, addr);
        let handle = rt.handle();
        let client = move || {
            let channel = match spindle::task::block_on(endpoint.connect()) {
                Ok(channel) => channel,
                Err(e) => return tonic::Status::unavailable(e.to_string()),
            };
            let mut request = tonic::Request::new(Empty {});
            if round % 2 == 1 {
                request.set_timeout(Duration::from_secs(20));
            }
            let result = spindle::task::block_on(TestServiceClient::new(channel).empty_call(request));
            result.map_or_else(|status| status, |_| tonic::Status::ok(""))
        };
        let status = std::thread::spawn(move || handle.spawn(client).join().unwrap()).join().unwrap();
        assert_code(status, Code::Unavailable);
    }
    let opened = accepted.load(SeqCst);
    assert!(opened <= 2 * rounds, "{opened} connections for {rounds} connects and calls");
}
