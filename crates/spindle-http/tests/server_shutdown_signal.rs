//! spindle-http on spindle's shutdown token: a real SIGUSR1 sent to this test process
//! triggers a token that the server watches (`Builder::shutdown_on`); `Server::wait` returns
//! after the in-flight request finished.

mod common;

use std::io::Write;
use std::time::Duration;

use common::{connect, read_response};
use spindle::shutdown::ShutdownToken;
use spindle::signal::SignalKind;
use spindle_http::{Body, Request, Response, Server};

#[test]
fn a_signal_shuts_the_server_down_gracefully() {
    let token = ShutdownToken::new();
    token.trigger_on_signals(&[SignalKind::user_defined1()]).unwrap();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let started_tx = std::sync::Mutex::new(started_tx);
    let server = Server::builder()
        .shutdown_on(token.clone())
        .serve("127.0.0.1:0", move |_req: Request<Body>| {
            started_tx.lock().unwrap().send(()).unwrap();
            spindle::time::sleep(Duration::from_millis(200));
            Response::new("finished")
        })
        .unwrap();
    let addr = server.local_addr();
    let client = std::thread::spawn(move || {
        let mut s = connect(addr);
        s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        read_response(&mut s, &mut Vec::new()).expect("the in-flight response")
    });
    started_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    // The crate forbids unsafe code, so the signal comes from kill(1), as from an operator.
    let status =
        std::process::Command::new("kill").args(["-USR1", &std::process::id().to_string()]).status().unwrap();
    assert!(status.success());
    let report = server.wait();
    assert!(token.is_triggered());
    assert_eq!(report.cancelled_connections, 0);
    let resp = client.join().unwrap();
    assert_eq!((resp.status, resp.text().as_str()), (200, "finished"));
}
