//! Fiber-aware sockets: an echo server under 1,000 concurrent clients, half-close, resets,
//! refused connections, timeouts, EMFILE on accept, UDP, and futures-io.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle::net::{TcpListener, TcpStream, UdpSocket};
use spindle::Runtime;

#[path = "support/hang_guard.rs"]
mod hang_guard;
use hang_guard::returns_within_hang_limit;

/// Raises the soft descriptor limit to the hard one (the tests open a few thousand sockets).
fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit on a valid rlimit struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max.min(16_384);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

fn echo_server(listener: TcpListener) -> spindle::JoinHandle<usize> {
    spindle::spawn(move || {
        let mut served = 0;
        loop {
            let (mut conn, _) = match listener.accept() {
                Ok(c) => c,
                Err(e) => panic!("accept failed: {e}"),
            };
            served += 1;
            spindle::spawn(move || {
                let mut buf = [0u8; 1024];
                loop {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if conn.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
            });
            if served == usize::MAX {
                return served;
            }
        }
    })
}

#[test]
fn echo_server_with_a_thousand_concurrent_clients() {
    raise_fd_limit();
    let rt = Runtime::new().unwrap();
    let echoed = rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _server = echo_server(listener);
        let clients: Vec<_> = (0..1000u32)
            .map(|i| {
                spindle::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.set_nodelay(true).unwrap();
                    let mut total = 0;
                    for round in 0..5u32 {
                        let msg = format!("client {i} round {round}");
                        s.write_all(msg.as_bytes()).unwrap();
                        let mut back = vec![0; msg.len()];
                        s.read_exact(&mut back).unwrap();
                        assert_eq!(back, msg.as_bytes());
                        total += back.len();
                    }
                    total
                })
            })
            .collect();
        clients.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
    });
    assert!(echoed > 1000 * 5 * 15);
}

#[test]
fn half_close_delivers_eof_and_the_other_half_still_works() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = spindle::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut all = Vec::new();
            conn.read_to_end(&mut all).unwrap(); // ends at the client's FIN
            conn.write_all(format!("got {} bytes", all.len()).as_bytes()).unwrap();
        });
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(&[7u8; 100_000]).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut reply = String::new();
        client.read_to_string(&mut reply).unwrap();
        assert_eq!(reply, "got 100000 bytes");
        server.join().unwrap();
    });
}

#[test]
fn a_peer_reset_is_an_error_not_a_hang() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = spindle::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            // SO_LINGER 0 then close: the kernel sends RST instead of FIN.
            let sock = socket2::SockRef::from(&conn);
            sock.set_linger(Some(Duration::ZERO)).unwrap();
            drop(conn);
        });
        let mut client = TcpStream::connect(addr).unwrap();
        server.join().unwrap();
        let mut buf = [0u8; 16];
        let err = loop {
            match client.read(&mut buf) {
                Ok(0) => break None,
                Ok(_) => continue,
                Err(e) => break Some(e),
            }
        };
        let err = err.expect("a reset must surface as an error");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{err}");
    });
}

#[test]
fn connecting_to_a_closed_port_is_refused() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
    });
}

#[test]
fn read_and_accept_timeouts_fire_and_the_fiber_stays_usable() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_accept_timeout(Some(Duration::from_millis(30))).unwrap();
        let t0 = Instant::now();
        assert_eq!(listener.accept().unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() >= Duration::from_millis(30), "never early");
        let client = spindle::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            spindle::time::sleep(Duration::from_millis(80));
            s.write_all(b"late").unwrap();
            s
        });
        listener.set_accept_timeout(None).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(conn.read(&mut buf).unwrap_err().kind(), io::ErrorKind::TimedOut);
        conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        conn.read_exact(&mut buf).unwrap(); // the long timeout is cancelled by the data
        assert_eq!(&buf, b"late");
        drop(client.join().unwrap());
        assert!(conn.set_read_timeout(Some(Duration::ZERO)).is_err(), "zero timeouts are invalid");
    });
}

/// Timeouts too long for an `Instant` mean "no limit": a connect, an accept and a read with
/// such a timeout wait for their event, with no overflow panic.
#[test]
fn timeouts_too_long_for_an_instant_wait_for_the_event() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // The handshake completes in the listener's backlog, before any accept.
        let mut client = TcpStream::connect_timeout(&addr, Duration::MAX).unwrap();
        listener.set_accept_timeout(Some(Duration::MAX)).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let writer = spindle::spawn(move || {
            spindle::time::sleep(Duration::from_millis(5));
            client.write_all(b"late").unwrap();
            client
        });
        conn.set_read_timeout(Some(Duration::MAX)).unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"late");
        drop(writer.join().unwrap());
    });
}

#[test]
fn accept_under_fd_exhaustion_returns_emfile_and_recovers() {
    // Runs in a child process: it lowers its own descriptor limit.
    if std::env::var_os("SPINDLE_EMFILE_CHILD").is_none() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "accept_under_fd_exhaustion_returns_emfile_and_recovers", "--nocapture"])
            .env("SPINDLE_EMFILE_CHILD", "1")
            .output()
            .unwrap();
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "child failed:\n{all}");
        assert!(all.contains("EMFILE seen and recovered"), "{all}");
        return;
    }
    // Nothing frees a descriptor before the first accept returns, so an accept that retried
    // until it worked (spinning, or waiting for readiness again) would never return: a hang,
    // guarded as one.
    returns_within_hang_limit("accept with the descriptor table full (or once one is freed)", || {
        // One worker: a second fiber there runs only when the accepting fiber suspends.
        let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
        rt.block_on(accept_under_fd_exhaustion_child)
    });
}

/// The child's body of `accept_under_fd_exhaustion_returns_emfile_and_recovers`, in a fiber.
fn accept_under_fd_exhaustion_child() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Connect from a thread (its sockets are made before the limit drops).
    let clients = std::thread::spawn(move || {
        (0..3).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    // Opened before the witness exists: with the `hook` feature a fiber's `open` parks while
    // the file pool runs it. The table is filled with duplicates of it, which never park.
    let null = std::fs::File::open("/dev/null").unwrap();
    // A fiber queued behind this one on the worker: it runs only once this fiber suspends.
    let witness_ran = Arc::new(AtomicUsize::new(0));
    let witness = {
        let witness_ran = witness_ran.clone();
        spindle::spawn(move || witness_ran.fetch_add(1, Ordering::SeqCst))
    };
    // Fill the descriptor table up to a low limit.
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: valid rlimit struct.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    let mut hogs = Vec::new();
    let used = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let low = libc::rlimit { rlim_cur: used + 4, rlim_max: lim.rlim_max };
    // SAFETY: valid rlimit struct.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) };
    while let Ok(f) = null.try_clone() {
        hogs.push(f);
    }
    let err = listener.accept().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EMFILE), "{err}");
    // One attempt, its error returned as is: the fiber never suspended to retry (a retry
    // after a yield or a readiness wait would have let the witness run first).
    assert_eq!(witness_ran.load(Ordering::SeqCst), 0, "accept suspended before returning EMFILE");
    // The failed attempt left the pending connection queued: the next accept takes it.
    drop(hogs.pop());
    let (conn, _) = listener.accept().expect("accept works again once a descriptor is free");
    drop(conn);
    println!("EMFILE seen and recovered");
    drop(clients);
    witness.join().unwrap();
}

#[test]
fn udp_send_to_and_recv_from_between_fibers() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b_addr = b.local_addr().unwrap();
        let a_addr = a.local_addr().unwrap();
        let receiver = spindle::spawn(move || {
            let mut buf = [0u8; 64];
            let mut got = Vec::new();
            for _ in 0..10 {
                let (n, from) = b.recv_from(&mut buf).unwrap();
                assert_eq!(from, a_addr);
                got.push(buf[..n].to_vec());
            }
            got
        });
        spindle::yield_now(); // the receiver parks on an empty socket first
        for i in 0..10u8 {
            a.send_to(&[i; 3], b_addr).unwrap();
        }
        let got = receiver.join().unwrap();
        assert_eq!(got.len(), 10);
        assert!(got.iter().enumerate().all(|(i, d)| d == &vec![i as u8; 3]));
    });
}

#[test]
fn sockets_work_from_plain_threads_too() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.write_all(b"hi").unwrap();
    });
    let mut s = TcpStream::connect(addr).unwrap();
    let mut buf = [0u8; 2];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hi");
    t.join().unwrap();
}

#[test]
fn futures_io_traits_drive_the_socket_from_a_future() {
    use std::future::poll_fn;
    use std::pin::Pin;
    let rt = Runtime::new().unwrap();
    let n = rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = spindle::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            spindle::time::sleep(Duration::from_millis(20)); // the future must wait
            conn.write_all(b"async!").unwrap();
        });
        let mut client = TcpStream::connect(addr).unwrap();
        let mut buf = [0u8; 6];
        let n = spindle::task::block_on(poll_fn(|cx| {
            futures_io::AsyncRead::poll_read(Pin::new(&mut client), cx, &mut buf)
        }))
        .unwrap();
        server.join().unwrap();
        assert_eq!(&buf[..n], &b"async!"[..n]);
        n
    });
    assert!(n > 0);
}

#[test]
fn a_future_woken_from_another_thread_resumes_its_fiber() {
    use std::future::poll_fn;
    use std::sync::Mutex;
    use std::task::{Poll, Waker};
    let rt = Runtime::new().unwrap();
    let slot: Arc<Mutex<(bool, Option<Waker>)>> = Arc::default();
    let polls = Arc::new(AtomicUsize::new(0));
    let (slot2, polls2) = (slot.clone(), polls.clone());
    let h = rt.spawn(move || {
        spindle::task::block_on(poll_fn(|cx| {
            polls2.fetch_add(1, Ordering::SeqCst);
            let mut s = slot2.lock().unwrap();
            if s.0 {
                Poll::Ready(42)
            } else {
                s.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }))
    });
    while slot.lock().unwrap().1.is_none() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let waker = {
        let mut s = slot.lock().unwrap();
        s.0 = true;
        s.1.take().unwrap()
    };
    std::thread::spawn(move || waker.wake()).join().unwrap();
    assert_eq!(h.join().unwrap(), 42);
    assert!(polls.load(Ordering::SeqCst) >= 2);
}
