//! Where a socket registers (module `reactor`, "task sockets share one reactor"): a task's
//! with the runtime's shared task reactor, a fiber's with its own worker's driver.

use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::IoSource;
use crate::reactor::io::Direction;
use crate::sched::worker;

/// A socket with nothing to read (its peer stays open), and the peer.
fn quiet_socket() -> (Arc<IoSource>, UnixStream) {
    let (a, peer) = UnixStream::pair().unwrap();
    (Arc::new(IoSource::new(socket2::Socket::from(std::os::fd::OwnedFd::from(a)), false).unwrap()), peer)
}

/// The driver the socket's registration points at.
fn home(source: &IoSource) -> usize {
    source.registration.get().expect("registered").home.load(Ordering::Acquire) as usize
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
    let rt = crate::Builder::new().worker_threads(2).build().unwrap();

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
    let rt = crate::Builder::new().worker_threads(1).build().unwrap();
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
    let rt = crate::Builder::new().worker_threads(2).build().unwrap();
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
        std::io::Write::write_all(&mut peer, &[round]).unwrap();
        let got = done_rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(got, Ok((1, round)), "the read was never woken (round {round})");
    }
}
