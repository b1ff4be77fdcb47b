//! The future side of spindle::net from async tasks: TCP and Unix `connect_async`, refused
//! connections, and UDP `send_to_async` / `recv_from_async`.

use std::io;
use std::time::Duration;

use futures_io_util::{read_exact, write_all};
use spindle::net::{TcpListener, TcpStream, UdpSocket, UnixListener, UnixStream};
use spindle::Runtime;

/// Tiny helpers over the `futures-io` traits (the tests avoid a futures-util dependency).
mod futures_io_util {
    use std::future::poll_fn;
    use std::io;
    use std::pin::Pin;

    use futures_io::{AsyncRead, AsyncWrite};

    pub async fn write_all<W: AsyncWrite + Unpin>(w: &mut W, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = poll_fn(|cx| Pin::new(&mut *w).poll_write(cx, buf)).await?;
            buf = &buf[n..];
        }
        Ok(())
    }

    pub async fn read_exact<R: AsyncRead + Unpin>(r: &mut R, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = poll_fn(|cx| Pin::new(&mut *r).poll_read(cx, buf)).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }
}

#[test]
fn tcp_connect_async_from_a_task() {
    let rt = Runtime::new().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let mut buf = [0; 4];
        io::Read::read_exact(&mut &conn, &mut buf).unwrap();
        io::Write::write_all(&mut &conn, &buf).unwrap();
    });
    let echoed = rt
        .spawn_async(async move {
            let mut s =
                spindle::time::timeout(Duration::from_secs(10), TcpStream::connect_async(addr)).await??;
            write_all(&mut s, b"ping").await?;
            let mut buf = [0; 4];
            read_exact(&mut s, &mut buf).await?;
            io::Result::Ok(buf)
        })
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(&echoed, b"ping");
    server.join().unwrap();
}

#[test]
fn tcp_connect_async_to_a_closed_port_is_refused() {
    let rt = Runtime::new().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = rt.spawn_async(TcpStream::connect_async(("127.0.0.1", port))).join().unwrap().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
}

#[test]
fn unix_connect_async_from_a_task() {
    let rt = Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sock");
    let listener = UnixListener::bind(&path).unwrap();
    let server = rt.spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        io::Write::write_all(&mut &conn, b"hi").unwrap();
    });
    let p = path.clone();
    let got = rt
        .spawn_async(async move {
            let mut s = UnixStream::connect_async(&p).await?;
            let mut buf = [0; 2];
            read_exact(&mut s, &mut buf).await?;
            io::Result::Ok(buf)
        })
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(&got, b"hi");
    server.join().unwrap();
    let missing = rt.spawn_async(UnixStream::connect_async(dir.path().join("none"))).join().unwrap();
    assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
}

#[test]
fn udp_round_trips_between_tasks() {
    let rt = Runtime::new().unwrap();
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let server_addr = server.local_addr().unwrap();
    let echo = rt.spawn_async(async move {
        let mut buf = [0; 64];
        for _ in 0..10 {
            let (n, from) = server.recv_from_async(&mut buf).await.unwrap();
            server.send_to_async(&buf[..n], from).await.unwrap();
        }
    });
    let client = rt.spawn_async(async move {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.connect(server_addr).unwrap();
        let mut buf = [0; 64];
        for i in 0..10u8 {
            sock.send_async(&[i; 3]).await.unwrap();
            let n = sock.recv_async(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], &[i; 3]);
        }
    });
    client.join().unwrap();
    echo.join().unwrap();
}
