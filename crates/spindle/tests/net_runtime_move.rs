//! A socket used in one runtime and, after that runtime shut down, in another is woken by the
//! new one's reactor (it moves there), never left waiting on a driver nobody polls.

use std::io::{Read, Write};
use std::time::Duration;

use spindle::net::{TcpListener, TcpStream};

fn one_worker() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

/// A connected pair: `(spindle stream, std peer)`; the spindle side has waited once in `rt`.
fn pair_registered_in(rt: &spindle::Runtime) -> (TcpStream, std::net::TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut peer = std::net::TcpStream::connect(addr).unwrap();
    let stream = rt.block_on(move || {
        let (mut stream, _) = listener.accept().unwrap();
        // Wait for data in this runtime, so the socket registers with its reactor.
        let reader = spindle::spawn(move || {
            let mut buf = [0u8; 1];
            stream.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, b"a");
            stream
        });
        spindle::time::sleep(Duration::from_millis(20));
        reader
    });
    peer.write_all(b"a").unwrap();
    (stream.join().unwrap(), peer)
}

#[test]
fn a_fiber_in_a_second_runtime_is_woken_after_the_first_shut_down() {
    let a = one_worker();
    let (mut stream, mut peer) = pair_registered_in(&a);
    drop(a);
    let b = one_worker();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50)); // let the reader park first
        peer.write_all(b"b").unwrap();
        peer
    });
    let got = b.block_on(move || {
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 1];
        // Before the fix this parked on runtime A's dead reactor until the timeout.
        stream.read_exact(&mut buf).map(|_| buf[0])
    });
    assert_eq!(got.unwrap(), b'b');
    drop(writer.join().unwrap());
}

#[test]
fn a_task_in_a_second_runtime_is_woken_after_the_first_shut_down() {
    use futures_io::AsyncRead;
    let a = one_worker();
    let (stream, mut peer) = pair_registered_in(&a);
    drop(a);
    let b = one_worker();
    let reader = b.spawn_async(async move {
        let mut stream = stream;
        let mut buf = [0u8; 1];
        let n = std::future::poll_fn(|cx| std::pin::Pin::new(&mut stream).poll_read(cx, &mut buf)).await;
        n.map(|n| buf[..n].to_vec())
    });
    std::thread::sleep(Duration::from_millis(50));
    peer.write_all(b"c").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(reader.join()));
    let got = rx.recv_timeout(Duration::from_secs(10)).expect("the task was never woken");
    assert_eq!(got.unwrap().unwrap(), b"c");
}

#[test]
fn a_plain_thread_still_reads_after_the_runtime_shut_down() {
    let a = one_worker();
    let (mut stream, mut peer) = pair_registered_in(&a);
    drop(a);
    peer.write_all(b"d").unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 1];
    stream.read_exact(&mut buf).unwrap(); // poll(2) on a plain thread
    assert_eq!(&buf, b"d");
}

/// Reads `want` bytes from `stream` on a plain thread; `None` if that takes over 10 s.
fn read_on_a_thread(mut stream: TcpStream, want: usize) -> Option<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; want];
        stream.read_exact(&mut buf).unwrap();
        let _ = tx.send(buf);
    });
    rx.recv_timeout(Duration::from_secs(10)).ok()
}

/// A read that drained the socket in a runtime leaves a "the next read waits" mark for that
/// runtime's reactor; after the runtime is gone, a plain thread's read waits in poll(2) and
/// must then try the call, not wait for the reactor's sequence number forever.
#[test]
fn a_plain_thread_reads_a_socket_whose_last_read_in_a_dead_runtime_drained_it() {
    let a = one_worker();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut peer = std::net::TcpStream::connect(addr).unwrap();
    let first = std::thread::spawn(move || {
        // After the reader has waited once (so that the socket is registered).
        std::thread::sleep(Duration::from_millis(50));
        peer.write_all(b"xy").unwrap();
        peer
    });
    let stream = a.block_on(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < 2 {
            got += stream.read(&mut buf[got..]).unwrap(); // a short read: drained
        }
        stream
    });
    drop(a);
    let mut peer = first.join().unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        peer.write_all(b"z").unwrap();
        peer
    });
    assert_eq!(read_on_a_thread(stream, 1).as_deref(), Some(&b"z"[..]), "the read never returned");
    drop(writer.join().unwrap());
}

/// The same for a stream connected in a runtime (its first read is marked as waiting).
#[test]
fn a_plain_thread_reads_a_socket_connected_in_a_dead_runtime() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let a = one_worker();
    let stream = a.block_on(move || TcpStream::connect(addr).unwrap());
    drop(a);
    let (mut server, _) = listener.accept().unwrap();
    server.write_all(b"hello").unwrap();
    assert_eq!(read_on_a_thread(stream, 5).as_deref(), Some(&b"hello"[..]), "the read never returned");
}
