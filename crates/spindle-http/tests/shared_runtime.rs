//! Other services on the server's runtime (`Server::handle`): they run on the server's
//! worker threads, beside its connections, and the runtime ends with the server.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{connect, get};
use spindle_http::{Accept, Body, Request, Response, Server};

fn hello(_req: Request<Body>) -> Response<&'static str> {
    Response::new("Hello, World!")
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_owned()
}

#[test]
fn a_service_spawned_through_the_handle_runs_on_the_servers_workers() {
    let server = Server::builder().workers(2).serve("127.0.0.1:0", hello).unwrap();
    let handle = server.handle();
    let name = handle.spawn(thread_name).join().unwrap();
    assert!(name.starts_with("spindle-http"), "ran on thread {name:?}");

    // An echo listener served by a fiber of the server's runtime, beside the HTTP listener.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let echo_addr = listener.local_addr().unwrap();
    let listener = spindle::net::TcpListener::from_std(listener).unwrap();
    let echo = handle.spawn(move || -> std::io::Result<String> {
        let (mut stream, _) = listener.accept()?;
        let mut reader = stream.try_clone()?;
        std::io::copy(&mut reader, &mut stream)?;
        Ok(thread_name())
    });
    let mut client = connect(echo_addr);
    client.write_all(b"ping").unwrap();
    let mut back = [0u8; 4];
    client.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"ping");
    // The HTTP side answers meanwhile.
    assert_eq!(get(server.local_addr(), "/").text(), "Hello, World!");
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let echo_thread = echo.join().unwrap().unwrap();
    assert!(echo_thread.starts_with("spindle-http"), "echo served on thread {echo_thread:?}");
    let report = server.shutdown();
    assert_eq!(report.cancelled_connections, 0);
}

#[test]
fn the_handle_refuses_work_once_the_server_has_shut_down() {
    let server = Server::builder().serve("127.0.0.1:0", hello).unwrap();
    let handle = server.handle();
    assert_eq!(handle.spawn(|| 7).join().unwrap(), 7);
    // A fiber of another service still parked when the server stops is cancelled with it.
    let parked = handle.spawn(|| spindle::time::sleep(Duration::from_secs(3600)));
    server.shutdown_timeout(Duration::from_secs(5));
    assert!(parked.join().is_err(), "the parked fiber was cancelled with the runtime");
    assert!(handle.try_spawn(|| 7).is_err(), "the runtime ended with the server");
}

#[test]
fn with_one_runtime_per_worker_the_handle_is_the_first_workers() {
    let server = Server::builder().workers(2).accept(Accept::Runtimes).serve("127.0.0.1:0", hello).unwrap();
    let name = server.handle().spawn(thread_name).join().unwrap();
    assert_eq!(name, "spindle-http-0-0", "the first runtime's one worker");
    assert_eq!(get(server.local_addr(), "/").text(), "Hello, World!");
}
