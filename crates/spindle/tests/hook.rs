//! The `hook` feature: std's blocking calls, and libc's, park the calling fiber with the
//! semantics the caller asked for, and behave as without spindle off a fiber.
//!
//! "Parks the fiber, not the worker" is shown by order, never by time: on a runtime of one
//! worker, a fiber's call waits on something only another fiber of that worker can bring
//! about. Were the worker blocked, that fiber could never run; the test then fails at a
//! generous deadline instead of hanging.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[path = "support/hang_guard.rs"]
mod hang_guard;

/// Runs `f` on a fresh runtime of `workers` workers, under the hang guard (a blocked worker
/// fails the test as hung instead of hanging it).
fn on_runtime<T: Send + 'static>(workers: usize, f: impl FnOnce() -> T + Send + 'static) -> T {
    hang_guard::returns_within_hang_limit("the test's runtime", move || {
        let rt = spindle::Builder::new().worker_threads(workers).build().unwrap();
        let out = rt.block_on(f);
        rt.shutdown_timeout(Duration::from_secs(5));
        out
    })
}

/// A std listener on 127.0.0.1 with a listen queue of 4,096.
fn wide_listener() -> TcpListener {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    socket.listen(4096).unwrap();
    socket.into()
}

fn o_nonblock(fd: i32) -> bool {
    // SAFETY: F_GETFL reads the descriptor's flags.
    unsafe { libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK != 0 }
}

#[test]
fn std_sockets_park_the_fiber_not_the_worker() {
    // 20 clients on one worker, each connecting with std::net and waiting for its answer; the
    // server (fibers of the same worker, std::net too) answers only once all 20 have sent.
    let answered = on_runtime(1, || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        const N: usize = 20;
        let server = spindle::spawn(move || {
            let mut conns = Vec::new();
            for _ in 0..N {
                let (mut s, _) = listener.accept().unwrap();
                let mut b = [0u8; 5];
                s.read_exact(&mut b).unwrap();
                conns.push(s);
            }
            for mut s in conns {
                s.write_all(b"world").unwrap();
            }
        });
        let clients: Vec<_> = (0..N)
            .map(|_| {
                spindle::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.write_all(b"hello").unwrap();
                    let mut b = [0u8; 5];
                    s.read_exact(&mut b).unwrap();
                    assert!(!o_nonblock(s.as_raw_fd()), "the socket stays as the program made it");
                    b == *b"world"
                })
            })
            .collect();
        let ok = clients.into_iter().map(|c| c.join().unwrap()).filter(|&b| b).count();
        server.join().unwrap();
        ok
    });
    assert_eq!(answered, 20);
}

#[test]
fn thread_sleep_parks_the_fiber() {
    let (slept_through, other_ran) = on_runtime(1, || {
        let woke = Arc::new(AtomicBool::new(false));
        let w = woke.clone();
        let sleeper = spindle::spawn(move || {
            std::thread::sleep(Duration::from_secs(3600));
            // Cancelled, the sleep returns as if it had slept; spindle's next park unwinds.
            spindle::yield_now();
            w.store(true, Ordering::SeqCst);
        });
        // Runs only if the sleeper parked (one worker).
        let other = spindle::spawn(|| 42).join().unwrap();
        sleeper.cancel();
        let cancelled = sleeper.join().unwrap_err().is_cancelled();
        (cancelled && !woke.load(Ordering::SeqCst), other == 42)
    });
    assert!(other_ran && slept_through, "the hour-long sleep parked and was cancelled");
}

#[test]
fn many_fibers_sleep_at_once() {
    let done = on_runtime(2, || {
        let count = Arc::new(AtomicUsize::new(0));
        let fibers: Vec<_> = (0..1000)
            .map(|_| {
                let c = count.clone();
                spindle::spawn(move || {
                    std::thread::sleep(Duration::from_millis(100));
                    c.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        fibers.into_iter().for_each(|f| f.join().unwrap());
        count.load(Ordering::SeqCst)
    });
    assert_eq!(done, 1000);
}

#[test]
fn a_read_timeout_fires_as_the_kernels_would() {
    let (kind, other_ran) = on_runtime(1, || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let reader = spindle::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let mut b = [0u8; 1];
            s.read(&mut b).unwrap_err().kind()
        });
        let (_quiet, _) = listener.accept().unwrap(); // never writes
        spindle::spawn(move || r.store(true, Ordering::SeqCst)).join().unwrap();
        (reader.join().unwrap(), ran.load(Ordering::SeqCst))
    });
    assert_eq!(kind, ErrorKind::WouldBlock, "EAGAIN, as the kernel's SO_RCVTIMEO");
    assert!(other_ran);
}

#[test]
fn a_socket_the_program_made_non_blocking_gets_eagain() {
    let kind = on_runtime(1, || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        spindle::spawn(move || {
            let s = TcpStream::connect(addr).unwrap();
            let (_peer, _) = listener.accept().unwrap();
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            (&s).read(&mut b).unwrap_err().kind()
        })
        .join()
        .unwrap()
    });
    assert_eq!(kind, ErrorKind::WouldBlock);
}

#[test]
fn a_plain_thread_blocks_as_usual_on_a_socket_a_fiber_used() {
    // A fiber connects and waits on the socket (parking), then hands it to a plain thread,
    // whose read must block in the kernel until data comes, not fail with EAGAIN.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(b"1").unwrap();
        std::thread::sleep(Duration::from_millis(300));
        s.write_all(b"2").unwrap();
        s
    });
    let stream = on_runtime(1, move || {
        spindle::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"1");
            s
        })
        .join()
        .unwrap()
    });
    assert!(!o_nonblock(stream.as_raw_fd()));
    let mut b = [0u8; 1];
    (&stream).read_exact(&mut b).unwrap();
    assert_eq!(&b, b"2");
    drop(server.join().unwrap());
}

#[test]
fn a_child_process_inherits_the_socket_as_the_program_left_it() {
    // The fiber's socket, blocking as far as the program knows, becomes a child's stdin: the
    // child's read must block until the peer writes (a non-blocking stdin would make `head`
    // fail at once with EAGAIN).
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let output = on_runtime(1, move || {
        spindle::spawn(move || {
            let client = TcpStream::connect(addr).unwrap();
            let (mut peer, _) = listener.accept().unwrap();
            let mut probe = [0u8; 1];
            client.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let _ = (&client).read(&mut probe); // a wait that times out: the fiber parked
            client.set_read_timeout(None).unwrap();
            let child = std::process::Command::new("head")
                .args(["-c", "5"])
                .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(client)))
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            spindle::time::sleep(Duration::from_millis(200));
            peer.write_all(b"child").unwrap();
            child.wait_with_output().unwrap()
        })
        .join()
        .unwrap()
    });
    assert!(output.status.success(), "{output:?}");
    assert_eq!(output.stdout, b"child");
}

#[test]
fn a_cancelled_fiber_parked_in_a_hooked_read_gets_ecanceled_then_unwinds() {
    let (errno, cancelled) = on_runtime(1, || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(AtomicUsize::new(0));
        let s2 = seen.clone();
        let reader = spindle::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let mut b = [0u8; 1];
            let err = s.read(&mut b).unwrap_err();
            s2.store(err.raw_os_error().unwrap_or(0) as usize, Ordering::SeqCst);
            spindle::yield_now(); // spindle's own park: the cancellation unwinds here
            unreachable!("a cancelled fiber unwinds at its next park");
        });
        let (_quiet, _) = listener.accept().unwrap();
        spindle::time::sleep(Duration::from_millis(50));
        reader.cancel();
        let cancelled = reader.join().unwrap_err().is_cancelled();
        (seen.load(Ordering::SeqCst) as i32, cancelled)
    });
    assert_eq!(errno, libc::ECANCELED);
    assert!(cancelled);
}

#[test]
fn poll_select_and_epoll_wait_park_on_any_descriptor() {
    // A pipe (not a socket) and an eventfd inside an epoll instance: each wait is ended by
    // another fiber of the same worker.
    on_runtime(1, || {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two ends.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let [rd, wr] = fds;
        let writer = spindle::spawn(move || {
            spindle::yield_now();
            // SAFETY: a valid pipe end and a one-byte buffer.
            assert_eq!(unsafe { libc::write(wr, b"x".as_ptr().cast(), 1) }, 1);
        });
        let mut pfd = libc::pollfd { fd: rd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, -1) }, 1);
        assert!(pfd.revents & libc::POLLIN != 0);
        writer.join().unwrap();
        let mut b = [0u8; 1];
        // SAFETY: a valid pipe end and buffer.
        assert_eq!(unsafe { libc::read(rd, b.as_mut_ptr().cast(), 1) }, 1);

        // select on the same pipe, with a timeout that expires: 0 ready.
        // SAFETY: an fd_set is plain data; FD_ZERO/FD_SET write within it.
        let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `rd` < FD_SETSIZE.
        unsafe { libc::FD_SET(rd, &mut set) };
        let mut tv = libc::timeval { tv_sec: 0, tv_usec: 50_000 };
        // SAFETY: valid set and timeout.
        let n =
            unsafe { libc::select(rd + 1, &mut set, std::ptr::null_mut(), std::ptr::null_mut(), &mut tv) };
        assert_eq!(n, 0);
        let writer = spindle::spawn(move || {
            spindle::yield_now();
            // SAFETY: as above.
            unsafe { libc::write(wr, b"y".as_ptr().cast(), 1) };
        });
        // SAFETY: as above.
        unsafe { libc::FD_SET(rd, &mut set) };
        // SAFETY: a valid set, no timeout.
        let n = unsafe {
            libc::select(rd + 1, &mut set, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut())
        };
        // SAFETY: as above.
        assert!(n == 1 && unsafe { libc::FD_ISSET(rd, &set) });
        writer.join().unwrap();

        // SAFETY: plain system calls on descriptors made here.
        unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let ev = libc::eventfd(0, libc::EFD_CLOEXEC);
            let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 7 };
            assert_eq!(libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, ev, &mut event), 0);
            let poster = spindle::spawn(move || {
                spindle::yield_now();
                let one: u64 = 1;
                libc::write(ev, (&raw const one).cast(), 8);
            });
            let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
            assert_eq!(libc::epoll_wait(ep, out.as_mut_ptr(), 4, -1), 1);
            let data = out[0].u64;
            assert_eq!(data, 7);
            poster.join().unwrap();
            libc::close(ep);
            libc::close(ev);
            libc::close(rd);
            libc::close(wr);
        }
    });
}

#[test]
fn off_a_fiber_every_call_is_the_c_librarys() {
    // A plain thread: std's sleep, connect, read and write behave as always.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        std::thread::sleep(Duration::from_millis(10));
        s.write_all(b"ping").unwrap();
        let mut b = [0u8; 4];
        s.read_exact(&mut b).unwrap();
        b
    });
    let (mut s, _) = listener.accept().unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    s.write_all(b"pong").unwrap();
    assert_eq!(&t.join().unwrap(), b"pong");
}

#[test]
fn thousands_of_fibers_echo_over_hooked_std_sockets() {
    const CLIENTS: usize = 2000;
    let total = on_runtime(2, || {
        // A listen queue for all of them: std's (128) would overflow, and the kernel's SYN
        // cookies then reset a connection now and then, hook or no hook.
        let listener = wide_listener();
        let addr = listener.local_addr().unwrap();
        let server = spindle::spawn(move || {
            for _ in 0..CLIENTS {
                let (mut s, _) = listener.accept().unwrap();
                spindle::spawn(move || {
                    let mut buf = [0u8; 64];
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => s.write_all(&buf[..n]).unwrap(),
                        }
                    }
                });
            }
        });
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                spindle::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let msg = format!("message {i:06}");
                    s.write_all(msg.as_bytes()).unwrap();
                    let mut back = vec![0u8; msg.len()];
                    s.read_exact(&mut back).unwrap();
                    assert_eq!(back, msg.as_bytes());
                    back.len()
                })
            })
            .collect();
        let total: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
        server.join().unwrap();
        total
    });
    assert_eq!(total, CLIENTS * "message 000000".len());
}

#[test]
fn a_send_to_a_full_socket_parks_until_the_peer_reads() {
    // 4 MiB through one connection on one worker: far more than the socket buffers hold, so
    // the writer must park for the reader (another fiber of the same worker) to run.
    let received = on_runtime(1, || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = spindle::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let payload = vec![7u8; 4 << 20];
            s.write_all(&payload).unwrap(); // a stream send returns once every byte went out
        });
        let (mut peer, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        peer.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        got.len()
    });
    assert_eq!(received, 4 << 20);
}

#[test]
fn a_duplicated_socket_waits_and_a_reused_number_is_learned_anew() {
    // Descriptor 900 (far above what the other tests use) is first a duplicate of a socket,
    // then, once closed, a pipe's read end: its entry must follow.
    const HIGH: i32 = 900;
    on_runtime(1, || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let s = TcpStream::connect(addr).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        // SAFETY: duplicating an open descriptor onto a number no one uses.
        assert_eq!(unsafe { libc::dup2(s.as_raw_fd(), HIGH) }, HIGH);
        let reader = spindle::spawn(move || {
            let mut b = [0u8; 3];
            // SAFETY: a valid descriptor and buffer.
            let n = unsafe { libc::read(HIGH, b.as_mut_ptr().cast(), 3) };
            (n, b)
        });
        spindle::spawn(move || peer.write_all(b"dup").unwrap()).join().unwrap();
        assert_eq!(reader.join().unwrap(), (3, *b"dup"), "the duplicate waited, parked");
        let mut fds = [0; 2];
        // SAFETY: closing our duplicate, making a pipe, and moving its read end to HIGH.
        unsafe {
            assert_eq!(libc::close(HIGH), 0);
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            assert_eq!(libc::dup2(fds[0], HIGH), HIGH);
            libc::close(fds[0]);
        }
        // A pipe now: its read is the C library's (as a socket's it would fail with ENOTSOCK).
        // SAFETY: valid pipe ends and buffers.
        unsafe {
            assert_eq!(libc::write(fds[1], b"p".as_ptr().cast(), 1), 1);
            let mut c = [0u8; 1];
            assert_eq!(libc::read(HIGH, c.as_mut_ptr().cast(), 1), 1);
            assert_eq!(&c, b"p");
            libc::close(HIGH);
            libc::close(fds[1]);
        }
        drop(s);
    });
}
