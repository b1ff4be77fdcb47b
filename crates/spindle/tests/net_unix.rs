//! Unix-domain sockets: an echo server with many client fibers, pairs and half-close,
//! refused and missing paths, abstract addresses, datagrams, timeouts, plain threads and
//! futures-io.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::linux::net::SocketAddrExt;
use std::time::Duration;

use spindle::net::{UnixDatagram, UnixListener, UnixStream};
use spindle::Runtime;

#[test]
fn echo_server_with_two_hundred_client_fibers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("echo.sock");
    let rt = Runtime::new().unwrap();
    let total = rt.block_on(move || {
        let listener = UnixListener::bind(&path).unwrap();
        assert_eq!(listener.local_addr().unwrap().as_pathname(), Some(path.as_path()));
        let server = spindle::spawn(move || {
            let mut conns = Vec::new();
            for _ in 0..200 {
                let (mut conn, peer) = listener.accept().unwrap();
                assert!(peer.is_unnamed(), "a client that did not bind has an unnamed address");
                conns.push(spindle::spawn(move || {
                    let mut buf = [0u8; 256];
                    loop {
                        match conn.read(&mut buf).unwrap() {
                            0 => break,
                            n => conn.write_all(&buf[..n]).unwrap(),
                        }
                    }
                }));
            }
            conns.into_iter().for_each(|c| c.join().unwrap());
        });
        let clients: Vec<_> = (0..200u32)
            .map(|i| {
                let path = path.clone();
                spindle::spawn(move || {
                    let mut s = UnixStream::connect(&path).unwrap();
                    let mut sum = 0usize;
                    for round in 0..10u32 {
                        let msg = format!("client {i} round {round}");
                        s.write_all(msg.as_bytes()).unwrap();
                        let mut back = vec![0u8; msg.len()];
                        s.read_exact(&mut back).unwrap();
                        assert_eq!(back, msg.as_bytes());
                        sum += back.len();
                    }
                    sum
                })
            })
            .collect();
        let total: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
        server.join().unwrap();
        total
    });
    let expected: usize =
        (0..200u32).flat_map(|i| (0..10u32).map(move |r| format!("client {i} round {r}").len())).sum();
    assert_eq!(total, expected);
}

#[test]
fn a_pair_half_closes_and_the_other_direction_still_works() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let reader = spindle::spawn(move || {
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap(); // ends at a's half-close
            b.write_all(b"after eof").unwrap();
            got
        });
        a.write_all(b"one way").unwrap();
        a.shutdown(Shutdown::Write).unwrap();
        assert_eq!(reader.join().unwrap(), b"one way");
        let mut back = [0u8; 9];
        a.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"after eof");
    });
}

#[test]
fn missing_paths_and_dead_sockets_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new().unwrap();
    let (missing, dead, in_use) = rt.block_on(move || {
        let missing = UnixStream::connect(dir.path().join("nobody-here")).unwrap_err().kind();
        // A socket file whose listener is gone: the file stays, nobody accepts.
        let path = dir.path().join("dead.sock");
        drop(UnixListener::bind(&path).unwrap());
        let dead = UnixStream::connect(&path).unwrap_err().kind();
        let in_use = UnixListener::bind(&path).unwrap_err().kind();
        (missing, dead, in_use)
    });
    assert_eq!(missing, io::ErrorKind::NotFound);
    assert_eq!(dead, io::ErrorKind::ConnectionRefused);
    assert_eq!(in_use, io::ErrorKind::AddrInUse);
}

#[test]
fn abstract_addresses_connect_without_a_file() {
    let name = format!("spindle-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let rt = Runtime::new().unwrap();
    rt.block_on(move || {
        let listener = UnixListener::bind_addr(&addr).unwrap();
        assert_eq!(listener.local_addr().unwrap().as_abstract_name(), Some(name.as_bytes()));
        let server = spindle::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            c.write_all(b"abstract").unwrap();
        });
        let mut s = UnixStream::connect_addr(&addr).unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        assert_eq!(buf, b"abstract");
        server.join().unwrap();
    });
}

#[test]
fn read_and_accept_timeouts_fire() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::new().unwrap();
    rt.block_on(move || {
        let listener = UnixListener::bind(dir.path().join("t.sock")).unwrap();
        listener.set_accept_timeout(Some(Duration::from_millis(30))).unwrap();
        assert_eq!(listener.accept().unwrap_err().kind(), io::ErrorKind::TimedOut);
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
        assert_eq!(a.read(&mut [0u8; 4]).unwrap_err().kind(), io::ErrorKind::TimedOut);
        b.write_all(b"late").unwrap();
        let mut buf = [0u8; 4];
        a.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"late");
    });
}

#[test]
fn datagrams_between_fibers_carry_the_sender_address() {
    let dir = tempfile::tempdir().unwrap();
    let (server_path, client_path) = (dir.path().join("server.sock"), dir.path().join("client.sock"));
    let rt = Runtime::new().unwrap();
    rt.block_on(move || {
        let server = UnixDatagram::bind(&server_path).unwrap();
        let echo = spindle::spawn(move || {
            let mut buf = [0u8; 64];
            for _ in 0..100 {
                let (n, from) = server.recv_from(&mut buf).unwrap();
                server.send_to(&buf[..n], from.as_pathname().unwrap()).unwrap();
            }
        });
        let client = UnixDatagram::bind(&client_path).unwrap();
        for i in 0..100u32 {
            client.send_to(&i.to_le_bytes(), &server_path).unwrap();
            let mut buf = [0u8; 64];
            let (n, from) = client.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], &i.to_le_bytes());
            assert_eq!(from.as_pathname(), Some(server_path.as_path()));
        }
        echo.join().unwrap();
        let (a, b) = UnixDatagram::pair().unwrap();
        a.send(b"paired").unwrap();
        let mut buf = [0u8; 16];
        let n = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"paired");
    });
}

#[test]
fn unix_sockets_work_from_plain_threads_and_futures() {
    use std::future::poll_fn;
    use std::pin::Pin;
    // Plain threads: waits use poll(2).
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        b.write_all(b"thread").unwrap();
    });
    let mut buf = [0u8; 6];
    a.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"thread");
    t.join().unwrap();
    // futures-io from a fiber's block_on.
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let writer = spindle::spawn(move || {
            spindle::time::sleep(Duration::from_millis(20)); // the future must wait
            b.write_all(b"async").unwrap();
        });
        let mut buf = [0u8; 5];
        let n = spindle::task::block_on(poll_fn(|cx| {
            futures_io::AsyncRead::poll_read(Pin::new(&mut a), cx, &mut buf)
        }))
        .unwrap();
        assert_eq!(&buf[..n], &b"async"[..n]);
        writer.join().unwrap();
    });
}

#[test]
fn connect_waits_while_the_listener_backlog_is_full() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.sock");
    let rt = Runtime::new().unwrap();
    let served = rt.block_on(move || {
        let listener = UnixListener::bind(&path).unwrap();
        // SAFETY: listen(2) on the listener's own open descriptor, shrinking its backlog to
        // one pending connection.
        assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
        // These connects fill the queue; the later ones get EAGAIN from the kernel and must
        // wait (not fail) until the acceptor below makes room.
        let clients: Vec<_> = (0..4u8)
            .map(|i| {
                let path = path.clone();
                spindle::spawn(move || {
                    let mut s = UnixStream::connect(&path).unwrap();
                    s.write_all(&[i]).unwrap();
                })
            })
            .collect();
        spindle::time::sleep(Duration::from_millis(30));
        let mut seen = Vec::new();
        for _ in 0..4 {
            let (mut c, _) = listener.accept().unwrap();
            let mut b = [0u8; 1];
            c.read_exact(&mut b).unwrap();
            seen.push(b[0]);
        }
        clients.into_iter().for_each(|c| c.join().unwrap());
        seen.sort();
        seen
    });
    assert_eq!(served, vec![0, 1, 2, 3]);
}
