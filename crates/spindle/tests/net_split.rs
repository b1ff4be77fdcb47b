//! A reader and a writer on one TCP or Unix-domain connection in two fibers (or tasks) at once:
//! owned halves (`into_split`) and duplicated handles (`try_clone`). The fiber tests push more
//! data through an echo peer than the socket buffers hold, so they finish only if the read and
//! the write really run concurrently.

use std::io::{Read, Write};
use std::net::Shutdown;

use spindle::net::{TcpListener, TcpStream, UnixStream};
use spindle::{Builder, Runtime};

/// Far more than loopback's socket buffers: a writer alone would block forever.
const TOTAL: usize = 8 << 20;

fn runtime() -> Runtime {
    Builder::new().worker_threads(2).build().unwrap()
}

fn echo_once(listener: TcpListener) -> spindle::JoinHandle<()> {
    spindle::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let (mut rd, mut wr) = conn.into_split();
        std::io::copy(&mut rd, &mut wr).unwrap();
        // Dropping the write half sends FIN.
    })
}

fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

fn write_pattern(mut w: impl Write) {
    let mut sent = 0;
    while sent < TOTAL {
        let n = (64 * 1024).min(TOTAL - sent);
        let part: Vec<u8> = (sent..sent + n).map(pattern).collect();
        w.write_all(&part).unwrap();
        sent += n;
    }
}

fn read_pattern(mut r: impl Read) -> usize {
    let mut buf = vec![0u8; 32 * 1024];
    let mut got = 0;
    loop {
        let n = r.read(&mut buf).unwrap();
        if n == 0 {
            return got;
        }
        for (k, b) in buf[..n].iter().enumerate() {
            assert_eq!(*b, pattern(got + k), "byte {} corrupted", got + k);
        }
        got += n;
    }
}

#[test]
fn split_halves_read_and_write_from_two_fibers() {
    let rt = runtime();
    let got = rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = echo_once(listener);
        let (rd, wr) = TcpStream::connect(addr).unwrap().into_split();
        let writer = spindle::spawn(move || {
            let mut wr = wr;
            write_pattern(&mut wr);
            // wr drops here: FIN, so the echo ends.
        });
        let reader = spindle::spawn(move || read_pattern(rd));
        writer.join().unwrap();
        let got = reader.join().unwrap();
        server.join().unwrap();
        got
    });
    assert_eq!(got, TOTAL);
}

#[test]
fn try_clone_gives_a_second_handle_for_another_fiber() {
    let rt = runtime();
    let got = rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = echo_once(listener);
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let writer_handle = stream.try_clone().unwrap();
        assert_eq!(writer_handle.read_timeout().unwrap(), Some(std::time::Duration::from_secs(30)));
        let writer = spindle::spawn(move || {
            write_pattern(&writer_handle);
            writer_handle.shutdown(Shutdown::Write).unwrap();
        });
        let reader = spindle::spawn(move || read_pattern(&stream));
        writer.join().unwrap();
        let got = reader.join().unwrap();
        server.join().unwrap();
        got
    });
    assert_eq!(got, TOTAL);
}

#[test]
fn reunite_gives_back_the_stream_and_rejects_strangers() {
    let rt = runtime();
    rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let a = TcpStream::connect(addr).unwrap();
        let b = TcpStream::connect(addr).unwrap();
        let (mut server_side, _) = listener.accept().unwrap();
        let (ra, wa) = a.into_split();
        let (rb, wb) = b.into_split();
        let (ra, wb) = ra.reunite(wb).unwrap_err();
        let mut a = ra.reunite(wa).unwrap();
        drop((rb, wb));
        // Reuniting did not shut the stream down: it still writes.
        a.write_all(b"ok").unwrap();
        let mut buf = [0; 2];
        server_side.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ok");
    });
}

#[test]
fn unix_try_clone_reads_and_writes_from_two_fibers() {
    let rt = runtime();
    let got = rt.block_on(|| {
        let (a, b) = UnixStream::pair().unwrap();
        let echo = spindle::spawn(move || {
            let mut b2 = b.try_clone().unwrap();
            std::io::copy(&mut &b, &mut b2).unwrap();
            b.shutdown(Shutdown::Write).unwrap();
        });
        let a2 = a.try_clone().unwrap();
        let writer = spindle::spawn(move || {
            write_pattern(&a2);
            a2.shutdown(Shutdown::Write).unwrap();
        });
        let got = read_pattern(&a);
        writer.join().unwrap();
        echo.join().unwrap();
        got
    });
    assert_eq!(got, TOTAL);
}

#[test]
fn unix_split_halves_read_and_write_from_two_fibers() {
    let rt = runtime();
    let got = rt.block_on(|| {
        let (a, b) = UnixStream::pair().unwrap();
        let echo = spindle::spawn(move || {
            let (mut rd, mut wr) = b.into_split();
            std::io::copy(&mut rd, &mut wr).unwrap();
            // wr drops here: FIN, so the reader below sees the end.
        });
        let (rd, wr) = a.into_split();
        let writer = spindle::spawn(move || {
            let mut wr = wr;
            write_pattern(&mut wr);
        });
        let reader = spindle::spawn(move || read_pattern(rd));
        writer.join().unwrap();
        let got = reader.join().unwrap();
        echo.join().unwrap();
        got
    });
    assert_eq!(got, TOTAL);
}

#[test]
fn unix_split_halves_work_from_async_tasks() {
    use std::future::poll_fn;
    use std::pin::Pin;

    use futures_io::{AsyncRead, AsyncWrite};

    let rt = runtime();
    let echoed = rt.block_on(|| {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut rd, mut wr) = a.into_split();
        let writer = spindle::task::spawn_async(async move {
            let mut buf: &[u8] = b"from a task";
            while !buf.is_empty() {
                let n = poll_fn(|cx| Pin::new(&mut wr).poll_write(cx, buf)).await.unwrap();
                buf = &buf[n..];
            }
            poll_fn(|cx| Pin::new(&mut wr).poll_close(cx)).await.unwrap(); // FIN
        });
        let reader = spindle::task::spawn_async(async move {
            let mut echoed = Vec::new();
            let mut buf = [0; 64];
            loop {
                match poll_fn(|cx| Pin::new(&mut rd).poll_read(cx, &mut buf)).await.unwrap() {
                    0 => return echoed,
                    n => echoed.extend_from_slice(&buf[..n]),
                }
            }
        });
        // The peer echoes what the write half sent, then ends its side.
        let mut got = Vec::new();
        (&b).read_to_end(&mut got).unwrap();
        (&b).write_all(&got).unwrap();
        b.shutdown(Shutdown::Write).unwrap();
        writer.join().unwrap();
        reader.join().unwrap()
    });
    assert_eq!(echoed, b"from a task");
}

#[test]
fn unix_reunite_gives_back_the_stream_and_rejects_strangers() {
    let rt = runtime();
    rt.block_on(|| {
        let (a, mut peer) = UnixStream::pair().unwrap();
        let (b, _b_peer) = UnixStream::pair().unwrap();
        let (ra, wa) = a.into_split();
        let (rb, wb) = b.into_split();
        assert!(ra.peer_addr().unwrap().is_unnamed());
        let (ra, wb) = ra.reunite(wb).unwrap_err();
        let mut a = ra.reunite(wa).unwrap();
        drop((rb, wb));
        // Reuniting did not shut the stream down: it still writes.
        a.write_all(b"ok").unwrap();
        let mut buf = [0; 2];
        peer.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ok");
    });
}
