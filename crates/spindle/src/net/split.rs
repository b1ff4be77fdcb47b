//! Owned halves of a byte stream ([`TcpStream`] or [`UnixStream`]): one for reading, one for
//! writing, each movable to its own fiber or task. The halves are generic over the stream
//! ([`SplitStream`], sealed); `OwnedReadHalf` alone means a TCP half.
//!
//! # Invariants
//!
//! - Both halves share one `Arc` of the stream, so one descriptor and one reactor registration.
//!   The registration keeps separate waiter lists for reading and writing (`reactor::io`),
//!   so a fiber parked in a read and another parked in a write are each woken by their own
//!   direction's events, on any worker.
//! - The read half only reads and the write half only writes: neither direction is ever
//!   used by two halves at once.
//! - Dropping the write half shuts the connection down for writing (sends FIN), as a
//!   finished writer usually means; the read half can still read what the peer sends.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::tcp::TcpStream;
use super::unix::UnixStream;
use crate::reactor::io::Direction;

/// A byte stream that can be split into owned halves: [`TcpStream`] and [`UnixStream`]. Sealed:
/// spindle implements it, other crates cannot.
pub trait SplitStream: sealed::Sealed {}

mod sealed {
    use std::io;
    use std::net::Shutdown;
    use std::task::{Context, Poll};

    /// What the halves need of their stream, beyond `Read`/`Write` on `&S`.
    pub trait Sealed: std::fmt::Debug {
        fn poll_read_half(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;
        fn poll_write_half(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;
        fn shutdown_half(&self, how: Shutdown) -> io::Result<()>;
    }
}

/// Implements [`SplitStream`] for stream types with a `source: IoSource` field and a
/// `shutdown` method.
macro_rules! impl_split_stream {
    ($($ty:ty),+) => {$(
        impl sealed::Sealed for $ty {
            fn poll_read_half(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
                self.source.poll_read_stream(cx, buf)
            }
            fn poll_write_half(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                self.source.poll_io(cx, Direction::Write, |s| crate::sys::nocancel::send(s.as_raw_fd(), buf))
            }
            fn shutdown_half(&self, how: Shutdown) -> io::Result<()> {
                self.shutdown(how)
            }
        }

        impl SplitStream for $ty {}
    )+};
}

impl_split_stream!(TcpStream, UnixStream);

/// The reading half of a stream, from [`TcpStream::into_split`] or [`UnixStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf<S: SplitStream = TcpStream> {
    stream: Arc<S>,
}

/// The writing half of a stream, from [`TcpStream::into_split`] or [`UnixStream::into_split`].
/// Dropping it shuts the connection down for writing.
#[derive(Debug)]
pub struct OwnedWriteHalf<S: SplitStream = TcpStream> {
    stream: Arc<S>,
    /// False once `reunite` takes the stream back (no shutdown then).
    shutdown_on_drop: bool,
}

fn split<S: SplitStream>(stream: S) -> (OwnedReadHalf<S>, OwnedWriteHalf<S>) {
    let stream = Arc::new(stream);
    (OwnedReadHalf { stream: stream.clone() }, OwnedWriteHalf { stream, shutdown_on_drop: true })
}

impl TcpStream {
    /// Splits the stream into a read half and a write half that can move to two fibers (or
    /// tasks) and be used at the same time.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use spindle::net::{TcpListener, TcpStream};
    ///
    /// let rt = spindle::Runtime::new().unwrap();
    /// rt.block_on(|| {
    ///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    ///     let addr = listener.local_addr().unwrap();
    ///     let echo = spindle::spawn(move || {
    ///         let (conn, _) = listener.accept().unwrap();
    ///         let (mut rd, mut wr) = conn.into_split();
    ///         std::io::copy(&mut rd, &mut wr).unwrap();
    ///     });
    ///     let (mut rd, mut wr) = TcpStream::connect(addr).unwrap().into_split();
    ///     let writer = spindle::spawn(move || wr.write_all(b"ping").unwrap()); // then FIN
    ///     let mut echoed = Vec::new();
    ///     rd.read_to_end(&mut echoed).unwrap();
    ///     assert_eq!(echoed, b"ping");
    ///     writer.join().unwrap();
    ///     echo.join().unwrap();
    /// });
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        split(self)
    }
}

impl UnixStream {
    /// Splits the stream into a read half and a write half that can move to two fibers (or
    /// tasks) and be used at the same time, as [`TcpStream::into_split`] does.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use spindle::net::UnixStream;
    ///
    /// let rt = spindle::Runtime::new().unwrap();
    /// rt.block_on(|| {
    ///     let (a, b) = UnixStream::pair().unwrap();
    ///     let (mut rd, mut wr) = a.into_split();
    ///     let writer = spindle::spawn(move || wr.write_all(b"ping").unwrap()); // then FIN
    ///     let mut got = Vec::new();
    ///     (&b).read_to_end(&mut got).unwrap();
    ///     assert_eq!(got, b"ping");
    ///     (&b).write_all(b"pong").unwrap();
    ///     let mut buf = [0; 4];
    ///     rd.read_exact(&mut buf).unwrap();
    ///     assert_eq!(&buf, b"pong");
    ///     writer.join().unwrap();
    /// });
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf<UnixStream>, OwnedWriteHalf<UnixStream>) {
        split(self)
    }
}

impl<S: SplitStream> OwnedReadHalf<S> {
    /// The stream both halves share.
    pub fn as_stream(&self) -> &S {
        &self.stream
    }

    /// Rejoins the halves of one stream; `Err` gives them back if they are not a pair.
    pub fn reunite(self, mut other: OwnedWriteHalf<S>) -> Result<S, (OwnedReadHalf<S>, OwnedWriteHalf<S>)> {
        if !Arc::ptr_eq(&self.stream, &other.stream) {
            return Err((self, other));
        }
        other.shutdown_on_drop = false;
        drop(other);
        Ok(Arc::try_unwrap(self.stream).expect("the two halves held the only references"))
    }
}

impl<S: SplitStream> OwnedWriteHalf<S> {
    /// The stream both halves share.
    pub fn as_stream(&self) -> &S {
        &self.stream
    }
}

/// `peer_addr` and `local_addr` on both halves of a stream type whose addresses are `$addr`.
macro_rules! impl_half_addrs {
    ($($ty:ty => $addr:ty),+) => {$(
        impl OwnedReadHalf<$ty> {
            pub fn peer_addr(&self) -> io::Result<$addr> {
                self.stream.peer_addr()
            }

            pub fn local_addr(&self) -> io::Result<$addr> {
                self.stream.local_addr()
            }
        }

        impl OwnedWriteHalf<$ty> {
            pub fn peer_addr(&self) -> io::Result<$addr> {
                self.stream.peer_addr()
            }

            pub fn local_addr(&self) -> io::Result<$addr> {
                self.stream.local_addr()
            }
        }
    )+};
}

impl_half_addrs!(TcpStream => SocketAddr, UnixStream => std::os::unix::net::SocketAddr);

impl<S: SplitStream> Drop for OwnedWriteHalf<S> {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // The peer may have gone already (ENOTCONN): nothing to tell it then.
            let _ = self.stream.shutdown_half(Shutdown::Write);
        }
    }
}

impl<S: SplitStream> Read for OwnedReadHalf<S>
where
    for<'a> &'a S: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.stream).read(buf)
    }
}

impl<S: SplitStream> Write for OwnedWriteHalf<S>
where
    for<'a> &'a S: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.stream).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<S: SplitStream> futures_io::AsyncRead for OwnedReadHalf<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.stream.poll_read_half(cx, buf)
    }
}

impl<S: SplitStream> futures_io::AsyncWrite for OwnedWriteHalf<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stream.poll_write_half(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.stream.shutdown_half(Shutdown::Write))
    }
}
