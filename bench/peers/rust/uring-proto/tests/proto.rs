//! The prototype's sockets and loop on every backend: bytes arrive whole and in order, EOF is
//! seen, multishot accept queues connections, a dry buffer ring falls back to single-shot
//! reads, completions for a closed fd never reach the socket that reuses its number, and a
//! loop that ends with fibers parked in I/O cancels them and returns.

use std::net::SocketAddr;

use uring_proto::net::{TcpListener, TcpStream};
use uring_proto::{block_on, nobufs_fallbacks, spawn, Backend};

const BACKENDS: [&str; 5] = ["epoll", "uring", "uring-multi", "uring-defer", "uring-multi-defer"];

/// Runs `test` as the main fiber of a loop on each backend, each on its own thread; a loop
/// that does not end within a minute fails the test instead of hanging it.
fn each_backend(test: fn(Backend)) {
    for name in BACKENDS {
        let b = Backend::parse(name).unwrap();
        let (done, finished) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            block_on(b, move || test(b)).expect("loop set up");
            let _ = done.send(());
        });
        match finished.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(()) => t.join().unwrap(),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                if let Err(p) = t.join() {
                    eprintln!("backend {name} failed");
                    std::panic::resume_unwind(p);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("backend {name}: the loop hung"),
        }
    }
}

fn listener() -> (TcpListener, SocketAddr) {
    let ln = TcpListener::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let addr = ln.local_addr().unwrap();
    (ln, addr)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn echo_keeps_every_byte_in_order() {
    each_backend(|_| {
        let (ln, addr) = listener();
        let echo = spawn(move || {
            let mut s = ln.accept().unwrap();
            let mut buf = [0u8; 1000];
            let mut total = 0;
            loop {
                match s.read(&mut buf).unwrap() {
                    0 => return total,
                    n => {
                        s.write_all(&buf[..n]).unwrap();
                        total += n;
                    }
                }
            }
        });
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_nodelay(true).unwrap();
        // 64 B, then 300 KiB: more than a provided buffer, more than the socket buffers.
        let mut sent = 0;
        for (len, seed) in [(64, 1u8), (300 * 1024, 7)] {
            let msg = pattern(len, seed);
            let mut back = vec![0u8; len];
            // In 16 KiB steps, so that the echo never waits on a full socket buffer.
            for (out, into) in msg.chunks(16 * 1024).zip(back.chunks_mut(16 * 1024)) {
                c.write_all(out).unwrap();
                c.read_exact(into).unwrap();
            }
            assert_eq!(back, msg, "echoed bytes of a {len}-byte message");
            sent += len;
        }
        drop(c);
        assert_eq!(echo.join(), sent);
    });
}

#[test]
fn eof_is_seen_and_stays() {
    each_backend(|_| {
        let (ln, addr) = listener();
        let server = spawn(move || drop(ln.accept().unwrap()));
        let mut c = TcpStream::connect(addr).unwrap();
        let mut b = [0u8; 8];
        assert_eq!(c.read(&mut b).unwrap(), 0, "EOF after the server closed");
        assert_eq!(c.read(&mut b).unwrap(), 0, "EOF again");
        server.join();
    });
}

#[test]
fn many_concurrent_connections_are_each_accepted_once() {
    each_backend(|_| {
        const N: usize = 50;
        let (ln, addr) = listener();
        let server = spawn(move || {
            let mut conns = Vec::new();
            for _ in 0..N {
                let s = ln.accept().unwrap();
                conns.push(spawn(move || {
                    let mut s = s;
                    let mut id = [0u8; 1];
                    s.read_exact(&mut id).unwrap();
                    s.write_all(&[id[0], id[0]]).unwrap();
                    id[0]
                }));
            }
            let mut ids: Vec<u8> = conns.into_iter().map(|h| h.join()).collect();
            ids.sort_unstable();
            ids
        });
        let clients: Vec<_> = (0..N as u8)
            .map(|i| {
                spawn(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    c.write_all(&[i]).unwrap();
                    let mut back = [0u8; 2];
                    c.read_exact(&mut back).unwrap();
                    assert_eq!(back, [i, i]);
                })
            })
            .collect();
        clients.into_iter().for_each(|h| h.join());
        assert_eq!(server.join(), (0..N as u8).collect::<Vec<_>>());
    });
}

#[test]
fn a_dry_buffer_ring_falls_back_to_single_shot_reads() {
    let before = nobufs_fallbacks();
    each_backend(|_| {
        // 600 one-byte sends, each its own segment and its own pass, while the reader waits
        // for the sender to finish: more completions than the ring has buffers (256).
        const N: usize = 600;
        let (ln, addr) = listener();
        let msg = pattern(N, 3);
        let sent = msg.clone();
        let client = spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_nodelay(true).unwrap();
            for b in &sent {
                c.write_all(std::slice::from_ref(b)).unwrap();
            }
            c
        });
        let mut s = ln.accept().unwrap();
        let mut got = vec![0u8; 1];
        s.read_exact(&mut got).unwrap(); // arms the multishot recv
        let c = client.join();
        let mut buf = [0u8; 64];
        while got.len() < N {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "early EOF");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, msg);
        drop(c);
    });
    assert!(nobufs_fallbacks() > before, "the multishot backends ran the ring dry at least once");
}

#[test]
fn a_closed_socket_s_late_data_never_reaches_the_next_one() {
    each_backend(|_| {
        let (ln, addr) = listener();
        // Client A keeps sending after the server closed its end (armed multishot recv).
        let a = spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_nodelay(true).unwrap();
            for _ in 0..200 {
                if c.write_all(b"A").is_err() {
                    break;
                }
            }
        });
        let mut sa = ln.accept().unwrap();
        let mut one = [0u8; 1];
        sa.read_exact(&mut one).unwrap();
        assert_eq!(&one, b"A");
        drop(sa); // multishot still armed: cancelled, its fd number free for reuse
        let b = spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(&pattern(5000, 9)).unwrap();
        });
        let mut sb = ln.accept().unwrap();
        let mut got = vec![0u8; 5000];
        sb.read_exact(&mut got).unwrap();
        assert_eq!(got, pattern(5000, 9), "only B's bytes on B's socket");
        a.join();
        b.join();
    });
}

#[test]
fn a_loop_that_ends_with_fibers_parked_in_io_returns() {
    each_backend(|_| {
        let (ln, addr) = listener();
        let c = TcpStream::connect(addr).unwrap();
        let s = ln.accept().unwrap();
        // Parked in read forever (its peer never writes) and in accept (no more clients):
        // their stack buffers are lent to the kernel until the loop cancels and reaps.
        spawn(move || {
            let mut s = s;
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
            unreachable!("no data and no EOF: the peer is alive until the loop ends");
        });
        spawn(move || {
            let _ = ln.accept();
        });
        // Leave the connection to the dropped fibers: the loop ends with them parked.
        std::mem::forget(c);
    });
}
