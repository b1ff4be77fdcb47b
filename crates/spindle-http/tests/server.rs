//! spindle-http end to end: raw bytes over std sockets against a server on port 0.

mod common;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, get, raw_exchange, read_response, status_line};
use spindle_http::{Body, Request, Response, Server, StatusCode};

fn hello(_req: Request<Body>) -> Response<&'static str> {
    Response::new("Hello, World!")
}

fn local() -> &'static str {
    "127.0.0.1:0"
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let server = Server::builder().serve(local(), hello).unwrap();
    let mut s = connect(server.local_addr());
    let mut buf = Vec::new();
    for _ in 0..5 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let resp = read_response(&mut s, &mut buf).expect("a response");
        assert_eq!(resp.status, 200);
        assert_eq!(resp.text(), "Hello, World!");
    }
    server.shutdown();
}

#[test]
fn pipelined_requests_get_responses_in_order() {
    let server = Server::builder()
        .serve(local(), |req: Request<Body>| Response::new(req.uri().path().to_owned()))
        .unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let a = read_response(&mut s, &mut buf).expect("first response");
    let b = read_response(&mut s, &mut buf).expect("second response");
    assert_eq!((a.status, a.text().as_str()), (200, "/first"));
    assert_eq!((b.status, b.text().as_str()), (200, "/second"));
    server.shutdown();
}

#[test]
fn chunked_request_body_is_echoed() {
    // Blocking read of the whole body, and a streamed echo (chunked response).
    let server = Server::builder()
        .serve(local(), |req: Request<Body>| {
            if req.uri().path() == "/stream" {
                return Response::new(req.into_body());
            }
            let text = req.into_body().text().unwrap();
            Response::new(Body::from(format!("got {text}")))
        })
        .unwrap();
    let request = |path: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
             5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n"
        )
    };
    let mut s = connect(server.local_addr());
    let mut buf = Vec::new();
    s.write_all(request("/collect").as_bytes()).unwrap();
    let resp = read_response(&mut s, &mut buf).unwrap();
    assert_eq!((resp.status, resp.text().as_str()), (200, "got hello world"));
    s.write_all(request("/stream").as_bytes()).unwrap();
    let resp = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("transfer-encoding"), Some("chunked"));
    assert_eq!(resp.text(), "hello world");
    server.shutdown();
}

#[test]
fn garbage_gets_400() {
    let server = Server::builder().serve(local(), hello).unwrap();
    let out = raw_exchange(server.local_addr(), b"this is not http\r\n\r\n");
    assert!(status_line(&out).starts_with("HTTP/1.1 400"), "{out:?}");
    let out = raw_exchange(server.local_addr(), b"GET / HTTP/1.1\r\nBad Header Name: x\r\n\r\n");
    assert!(status_line(&out).starts_with("HTTP/1.1 400"), "{out:?}");
    // The server keeps serving.
    assert_eq!(get(server.local_addr(), "/").status, 200);
    server.shutdown();
}

#[test]
fn oversized_header_gets_431() {
    let server = Server::builder().max_buf_size(16 * 1024).max_headers(20).serve(local(), hello).unwrap();
    let addr = server.local_addr();
    // One huge header value (past the 16 KiB buffer).
    let big = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(64 * 1024));
    let out = raw_exchange(addr, big.as_bytes());
    assert!(status_line(&out).starts_with("HTTP/1.1 431"), "{:?}", status_line(&out));
    // Too many header fields.
    let mut many = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
    for i in 0..50 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let out = raw_exchange(addr, many.as_bytes());
    assert!(status_line(&out).starts_with("HTTP/1.1 431"), "{:?}", status_line(&out));
    assert_eq!(get(addr, "/").status, 200);
    server.shutdown();
}

#[test]
fn after_a_parse_error_the_server_half_closes_and_reads_what_the_client_still_sends() {
    // Lingering close: the answer to a bad request goes out, then a FIN, and the server reads
    // on (so that unread bytes do not turn the close into a reset that can destroy the
    // answer before the client has read it) until the client's FIN.
    let server = Server::builder().serve(local(), hello).unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"GET / HTTP/1.1\r\nBad Header Name: x\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("the answer, then the server's FIN");
    assert!(status_line(&String::from_utf8_lossy(&out)).starts_with("HTTP/1.1 400"), "{out:?}");
    // A socket the server had closed would answer these with a reset, failing the writes
    // that follow it; one the server still reads takes them all.
    for _ in 0..5 {
        s.write_all(&[b'x'; 1024]).expect("the server still reads after its answer");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(s.read(&mut [0u8; 16]).expect("a clean end, no reset"), 0);
    server.shutdown();
}

#[test]
fn oversized_header_gets_431_with_default_limits() {
    let server = Server::builder().serve(local(), hello).unwrap();
    let big = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(256 * 1024));
    let out = raw_exchange(server.local_addr(), big.as_bytes());
    assert!(status_line(&out).starts_with("HTTP/1.1 431"), "{:?}", status_line(&out));
    server.shutdown();
}

#[test]
fn slow_client_is_disconnected_by_the_header_timeout() {
    let server =
        Server::builder().header_read_timeout(Duration::from_millis(300)).serve(local(), hello).unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
    let mut out = Vec::new();
    // EOF (or a reset) means the server closed. The client's read timeout (20 s, set by
    // `connect`) is only a hang guard: hitting it means the server never closed.
    match s.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            panic!("hung: the server did not close the connection within the client's 20 s read timeout")
        }
        Err(e) => panic!("{e:?}"),
    }
    // Whatever it sent is not a success.
    assert!(!String::from_utf8_lossy(&out).starts_with("HTTP/1.1 200"));
    server.shutdown();
}

#[test]
fn idle_keep_alive_connection_is_closed() {
    let server = Server::builder()
        .header_read_timeout(None)
        .idle_timeout(Duration::from_millis(200))
        .serve(local(), hello)
        .unwrap();
    let mut s = connect(server.local_addr());
    let mut buf = Vec::new();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut s, &mut buf).unwrap().status, 200);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).expect("EOF from the idle timeout, before the client's 20 s read timeout");
    server.shutdown();
}

#[test]
fn panicking_handler_answers_500_and_the_server_keeps_serving() {
    let server = Server::builder()
        .serve(local(), |req: Request<Body>| {
            if req.uri().path() == "/panic" {
                panic!("handler panic (expected by the test)");
            }
            Response::new("fine")
        })
        .unwrap();
    let resp = get(server.local_addr(), "/panic");
    assert_eq!(resp.status, 500);
    let resp = get(server.local_addr(), "/");
    assert_eq!((resp.status, resp.text().as_str()), (200, "fine"));
    server.shutdown();
}

#[test]
fn panicking_async_handler_answers_500() {
    let server = Server::builder()
        .serve_async(local(), |req: Request<Body>| async move {
            spindle::time::sleep_future(Duration::from_millis(1)).await;
            if req.uri().path() == "/panic" {
                panic!("async handler panic (expected by the test)");
            }
            Response::new("fine")
        })
        .unwrap();
    assert_eq!(get(server.local_addr(), "/panic").status, 500);
    assert_eq!(get(server.local_addr(), "/").text(), "fine");
    server.shutdown();
}

#[test]
fn async_handler_reads_the_body() {
    use http_body_util::BodyExt;
    let server = Server::builder()
        .serve_async(local(), |req: Request<Body>| async move {
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let mut res = Response::new(Body::from(body.len().to_string()));
            *res.status_mut() = StatusCode::CREATED;
            res
        })
        .unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world").unwrap();
    let resp = read_response(&mut s, &mut Vec::new()).unwrap();
    assert_eq!((resp.status, resp.text().as_str()), (201, "11"));
    server.shutdown();
}

#[test]
fn blocking_handler_parks_only_its_fiber() {
    // /slow sleeps 300 ms (parking its handler fiber); /fast on another connection is
    // answered meanwhile, on the same single worker.
    let fast_done = Arc::new(AtomicUsize::new(0));
    let seen = fast_done.clone();
    let server = Server::builder()
        .serve(local(), move |req: Request<Body>| {
            if req.uri().path() == "/slow" {
                spindle::time::sleep(Duration::from_millis(300));
                // The fast request was served while this one slept.
                return Response::new(seen.load(Ordering::SeqCst).to_string());
            }
            seen.fetch_add(1, Ordering::SeqCst);
            Response::new("fast".to_owned())
        })
        .unwrap();
    let addr = server.local_addr();
    let slow = std::thread::spawn(move || get(addr, "/slow"));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(get(addr, "/fast").text(), "fast");
    let slow = slow.join().unwrap();
    assert_eq!(slow.text(), "1", "the fast request was served while the slow handler slept");
    server.shutdown();
}

#[test]
fn blocking_handler_uses_spindle_channels() {
    let server = Server::builder()
        .serve(local(), |_req: Request<Body>| {
            let (tx, rx) = spindle::sync::channel(1);
            spindle::spawn(move || {
                spindle::time::sleep(Duration::from_millis(5));
                tx.send(42u32).unwrap();
            });
            Response::new(rx.recv().unwrap().to_string())
        })
        .unwrap();
    assert_eq!(get(server.local_addr(), "/").text(), "42");
    server.shutdown();
}

#[test]
fn graceful_shutdown_lets_an_in_flight_request_finish() {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let started_tx = std::sync::Mutex::new(started_tx);
    let server = Server::builder()
        .serve(local(), move |_req: Request<Body>| {
            started_tx.lock().unwrap().send(()).unwrap();
            spindle::time::sleep(Duration::from_millis(300));
            Response::new("finished")
        })
        .unwrap();
    let addr = server.local_addr();
    // An idle keep-alive connection, which shutdown closes.
    let mut idle = connect(addr);
    let client = std::thread::spawn(move || {
        let mut s = connect(addr);
        s.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let resp = read_response(&mut s, &mut Vec::new()).expect("the in-flight response");
        // Then the server closes the connection.
        let mut rest = Vec::new();
        assert!(matches!(s.read_to_end(&mut rest), Ok(0)));
        resp
    });
    started_rx.recv().unwrap();
    let report = server.shutdown_timeout(Duration::from_secs(20));
    assert_eq!(report.cancelled_connections, 0);
    let resp = client.join().unwrap();
    assert_eq!((resp.status, resp.text().as_str()), (200, "finished"));
    let mut rest = Vec::new();
    assert!(matches!(idle.read_to_end(&mut rest), Ok(0)));
    // The listener is closed.
    assert!(std::net::TcpStream::connect(addr).is_err());
}

#[test]
fn shutdown_past_its_deadline_cancels_the_rest() {
    let server = Server::builder()
        .serve(local(), |_req: Request<Body>| {
            spindle::time::sleep(Duration::from_secs(60));
            Response::new("late")
        })
        .unwrap();
    let addr = server.local_addr();
    let client = std::thread::spawn(move || {
        let mut s = connect(addr);
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    });
    std::thread::sleep(Duration::from_millis(100));
    let report = server.shutdown_timeout(Duration::from_millis(100));
    assert_eq!(report.cancelled_connections, 1);
    assert!(client.join().unwrap().is_empty());
}

#[test]
fn shutdown_handle_from_a_handler_ends_wait() {
    let slot: Arc<std::sync::OnceLock<spindle_http::ShutdownHandle>> = Arc::default();
    let slot2 = slot.clone();
    let server = Server::builder()
        .serve(local(), move |_req: Request<Body>| {
            slot2.get().unwrap().trigger();
            Response::new("bye")
        })
        .unwrap();
    slot.set(server.shutdown_handle()).unwrap();
    let addr = server.local_addr();
    let client = std::thread::spawn(move || get(addr, "/quit"));
    let report = server.wait();
    assert_eq!(report.cancelled_connections, 0);
    assert_eq!(client.join().unwrap().text(), "bye");
}

#[test]
fn thousand_concurrent_connections() {
    const N: usize = 1000;
    let server = Server::builder().serve(local(), hello).unwrap();
    let addr = server.local_addr();
    let mut conns: Vec<_> = (0..N).map(|_| connect(addr)).collect();
    for s in &mut conns {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    }
    for s in &mut conns {
        let resp = read_response(s, &mut Vec::new()).expect("a response");
        assert_eq!((resp.status, resp.text().as_str()), (200, "Hello, World!"));
    }
    // All still open (keep-alive): one more round on each.
    for s in &mut conns {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    }
    for s in &mut conns {
        assert_eq!(read_response(s, &mut Vec::new()).unwrap().status, 200);
    }
    server.shutdown();
}

#[test]
fn several_workers_share_the_port() {
    for accept in
        [spindle_http::Accept::RoundRobin, spindle_http::Accept::ReusePort, spindle_http::Accept::Runtimes]
    {
        let server = Server::builder().workers(3).accept(accept).serve(local(), hello).unwrap();
        let addr = server.local_addr();
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(move || (0..50).all(|_| get(addr, "/").status == 200)))
            .collect();
        assert!(threads.into_iter().all(|t| t.join().unwrap()), "{accept:?}");
        assert_eq!(server.shutdown().cancelled_connections, 0, "{accept:?}");
    }
}

#[test]
fn round_robin_deals_connections_to_every_worker() {
    // Connections are tasks that any free worker serves: 3 requests whose
    // handlers compute (never parking) until all 3 run at once can only finish if 3 workers
    // serve them. Each reports its thread (or that it gave up waiting for the others).
    let running = Arc::new(AtomicUsize::new(0));
    let r = running.clone();
    let server = Server::builder()
        .workers(3)
        .serve(local(), move |_req: Request<Body>| {
            r.fetch_add(1, Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(10);
            while r.load(Ordering::SeqCst) < 3 {
                if Instant::now() > deadline {
                    return Response::new("gave up".to_owned());
                }
                std::hint::spin_loop();
            }
            Response::new(format!("{:?}", std::thread::current().id()))
        })
        .unwrap();
    let addr = server.local_addr();
    let mut conns: Vec<_> = (0..3).map(|_| connect(addr)).collect();
    for s in &mut conns {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    }
    let threads: std::collections::HashSet<_> =
        conns.iter_mut().map(|s| read_response(s, &mut Vec::new()).unwrap().text()).collect();
    assert_eq!(threads.len(), 3, "connections on every worker: {threads:?}");
    assert!(!threads.contains("gave up"), "{threads:?}");
    drop(conns);
    server.shutdown();
}
