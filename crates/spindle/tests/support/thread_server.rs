//! A server of plain `std::net` threads for the broken-server tests (spindle-http's client,
//! spindle-grpc's): each connection handled on a thread of its own by the case's function.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// Accepts connections on a thread, each handled by `serve(stream, n)` (`n`: 0 for the first
/// connection, 1 for the second...) on a thread of its own; the number accepted so far.
pub fn serve(serve: impl Fn(TcpStream, usize) + Send + Sync + 'static) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let n = count.fetch_add(1, SeqCst);
            let serve = serve.clone();
            std::thread::spawn(move || serve(stream, n));
        }
    });
    (addr, accepted)
}
