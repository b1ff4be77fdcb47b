//! A server that stops gracefully on SIGTERM or SIGINT: the signal triggers the runtime's
//! shutdown token, the accept loop stops taking connections, requests already in flight
//! finish (each holds an `InFlight` guard), and `Runtime::shutdown_timeout` cancels whatever
//! is left after the deadline.
//!
//! Run: `cargo run -p spindle --example graceful_shutdown` (it plays both sides: a client
//! fiber starts a slow request, then the program sends itself SIGTERM). With `--wait` it
//! serves until you press Ctrl-C.

use std::io::{self, Read, Write};
use std::time::Duration;

use spindle::net::{TcpListener, TcpStream};
use spindle::signal::SignalKind;

fn main() -> io::Result<()> {
    let wait_for_user = std::env::args().any(|a| a == "--wait");
    let rt = spindle::Runtime::new()?;
    let token = rt.shutdown_token();
    token.trigger_on_signals(&[SignalKind::terminate(), SignalKind::interrupt()])?;

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    println!("listening on {addr}");
    rt.spawn(move || {
        let token = spindle::shutdown::token();
        // The accept loop needs no guard: once the requests drain, shutdown cancels it.
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            if token.is_triggered() {
                break; // stop taking new work
            }
            let busy = token.track();
            spindle::spawn(move || {
                let _busy = busy;
                let mut buf = [0u8; 64];
                if let Ok(n) = conn.read(&mut buf) {
                    spindle::time::sleep(Duration::from_millis(200)); // a slow request
                    let _ = conn.write_all(&buf[..n]);
                }
            });
        }
    });

    let client = (!wait_for_user).then(|| {
        rt.spawn(move || -> io::Result<Vec<u8>> {
            let mut conn = TcpStream::connect(addr)?;
            conn.write_all(b"slow request")?;
            spindle::time::sleep(Duration::from_millis(50)); // let the server start on it
                                                             // SAFETY: kill(2) on our own pid; SIGTERM's handler is installed above.
            unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
            let mut reply = Vec::new();
            conn.read_to_end(&mut reply)?;
            Ok(reply)
        })
    });

    // The main thread waits for the signal, then drains for up to 5 seconds.
    token.wait();
    println!("shutdown signal received; draining {} request(s)", token.in_flight());
    let drained = rt.shutdown_timeout(Duration::from_secs(5));
    println!("drained in time: {drained}");
    if let Some(client) = client {
        // The client fiber finished before the runtime stopped, or was cancelled with it.
        match client.join() {
            Ok(reply) => {
                println!("the in-flight request was answered: {:?}", String::from_utf8_lossy(&reply?))
            }
            Err(_) => println!("the client was cancelled"),
        }
    }
    Ok(())
}
