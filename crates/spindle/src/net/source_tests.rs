//! Where a socket registers (module `reactor`, "task sockets share one reactor"): a task's
//! with the runtime's shared task reactor, a fiber's with its own worker's driver. And when a
//! read waits without trying the system call first (module `net::drain`,
//! `IoSource::expect_first_read_event`): never while data is there to read.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::IoSource;
use crate::net::tcp::{TcpListener, TcpStream};
use crate::reactor::io::Direction;
use crate::sched::worker;

/// A socket with nothing to read (its peer stays open), and the peer.
fn quiet_socket() -> (Arc<IoSource>, UnixStream) {
    let (a, peer) = UnixStream::pair().unwrap();
    (Arc::new(IoSource::new(socket2::Socket::from(std::os::fd::OwnedFd::from(a)), false).unwrap()), peer)
}

/// The driver the socket's registration points at.
fn home(source: &IoSource) -> usize {
    source.registration.get().expect("registered").home_addr()
}

/// Polls a read of `source` once from the calling task: nothing to read, so the poll
/// registers the socket and returns Pending.
async fn register_from_task(source: &IoSource) {
    std::future::poll_fn(|cx| {
        let mut buf = [0u8; 1];
        assert!(source.poll_read_stream(cx, &mut buf).is_pending());
        Poll::Ready(())
    })
    .await;
}

#[test]
fn a_task_socket_registers_with_the_shared_reactor_and_a_fiber_socket_with_its_worker() {
    let rt = crate::runtime::Builder::new().worker_threads(2).build().unwrap();

    let (task_socket, _peer) = quiet_socket();
    let source = task_socket.clone();
    let shared = rt
        .block_on(rt.spawn_async(async move {
            register_from_task(&source).await;
            let w = worker::current().expect("a task runs on a worker");
            Arc::as_ptr(&w.rt.io.as_ref().expect("2 workers have a shared task reactor").driver) as usize
        }))
        .unwrap();
    assert_eq!(home(&task_socket), shared);

    let (fiber_socket, _peer) = quiet_socket();
    let source = fiber_socket.clone();
    let own = rt.block_on(move || {
        let waited = source.wait_ready(Direction::Read, Some(Instant::now() + Duration::from_millis(20)));
        assert_eq!(waited.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        Arc::as_ptr(&worker::current().expect("a fiber runs on a worker").shared.driver) as usize
    });
    assert_eq!(home(&fiber_socket), own);
    assert_ne!(own, shared);
}

#[test]
fn one_worker_has_no_shared_reactor_and_its_task_sockets_stay_with_it() {
    let rt = crate::runtime::Builder::new().worker_threads(1).build().unwrap();
    let (socket, _peer) = quiet_socket();
    let source = socket.clone();
    let own = rt.block_on(rt.spawn_async(async move {
        register_from_task(&source).await;
        let w = worker::current().expect("a task runs on a worker");
        assert!(w.rt.io.is_none());
        Arc::as_ptr(&w.shared.driver) as usize
    }));
    assert_eq!(home(&socket), own.unwrap());
}

/// With every worker asleep, one of them watches the shared task reactor: a task waiting on
/// a socket is woken when data arrives (module `reactor::shared_io`, "one watcher"). With no
/// watcher armed, nothing would ever read the event (no worker is awake to be rescued).
#[test]
fn a_task_socket_event_wakes_a_sleeping_worker() {
    let rt = crate::runtime::Builder::new().worker_threads(2).build().unwrap();
    for round in 0..5u8 {
        let (socket, mut peer) = quiet_socket();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        drop(rt.spawn_async(async move {
            let mut buf = [0u8; 1];
            let n = std::future::poll_fn(|cx| socket.poll_read_stream(cx, &mut buf)).await.unwrap();
            done_tx.send((n, buf[0])).unwrap();
        }));
        // Let both workers go to sleep with the task waiting.
        std::thread::sleep(Duration::from_millis(30));
        peer.write_all(&[round]).unwrap();
        let got = done_rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(got, Ok((1, round)), "the read was never woken (round {round})");
    }
}

/// A fiber-connected stream is registered at once and its first read waits for an event
/// instead of trying `recv` (`expect_first_read_event`); data the server wrote before that
/// read is still read, whether or not its event was dispatched before the read.
#[test]
fn a_connected_stream_waits_for_its_first_read_event_and_still_reads_what_came_first() {
    let rt = crate::runtime::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = crate::fiber::spawn(move || {
            for greeting in [b"first", b"again"] {
                let (mut s, _) = listener.accept().unwrap();
                s.write_all(greeting).unwrap();
            }
        });
        for (greeting, pause) in [(b"first", false), (b"again", true)] {
            let mut c = TcpStream::connect(addr).unwrap();
            let blocked = c.source.read_blocked.load(Ordering::Relaxed);
            assert!(c.source.registration.get().is_some(), "registered at connect");
            assert_eq!(blocked, super::BLOCKED, "the first read is known to wait");
            if pause {
                // Let the server's greeting arrive and its event be dispatched first.
                crate::time::sleep(Duration::from_millis(20));
            }
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf).unwrap();
            assert_eq!(&buf, greeting);
        }
        server.join().unwrap();
    });
}

/// Fixed-size records read with `read_exact`: a full read that leaves another record queued
/// must not be taken for a drained socket (the next read would wait for an event that never
/// comes); one that leaves nothing queued is, after the first (module `net::drain`).
#[test]
fn full_reads_wait_only_when_the_kernel_says_nothing_is_queued() {
    let rt = crate::runtime::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (go_tx, go_rx) = crate::sync::channel::channel::<usize>(1);
        let writer = crate::fiber::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_nodelay(true).unwrap();
            // Each message: a number of 8-byte records written in one call.
            while let Ok(records) = go_rx.recv() {
                let batch: Vec<u8> = (0..records * 8).map(|i| i as u8).collect();
                c.write_all(&batch).unwrap();
            }
        });
        let (mut s, _) = listener.accept().unwrap();
        // A wrong "drained" would wait forever: fail instead.
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for records in [1, 2, 1, 3, 1, 1, 4] {
            go_tx.send(records).unwrap();
            for r in 0..records {
                let mut buf = [0u8; 8];
                s.read_exact(&mut buf).unwrap();
                assert_eq!(buf[0], (r * 8) as u8, "records arrive whole and in order");
            }
        }
        assert!(s.source.drain.is_on(), "full reads turned TCP_INQ on");
        let seq = s.source.registration.get().unwrap().io.seq(Direction::Read);
        assert_eq!(
            s.source.read_blocked.load(Ordering::Relaxed),
            super::BLOCKED | seq,
            "the last full read drained the socket and the next read will wait"
        );
        drop(go_tx);
        writer.join().unwrap();
    });
}
