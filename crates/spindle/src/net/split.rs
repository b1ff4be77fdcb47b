//! Owned halves of a [`TcpStream`]: one for reading, one for writing, each movable to its own
//! fiber or task.
//!
//! # Invariants
//!
//! - Both halves share one `Arc<TcpStream>`, so one descriptor and one reactor registration.
//!   The registration keeps separate waiter lists for reading and writing (`reactor::io`),
//!   so a fiber parked in a read and another parked in a write are each woken by their own
//!   direction's events, on any worker.
//! - The read half only reads and the write half only writes: neither direction is ever
//!   used by two halves at once.
//! - Dropping the write half shuts the connection down for writing (sends FIN), as a
//!   finished writer usually means; the read half can still read what the peer sends.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::TcpStream;
use crate::reactor::io::Direction;

/// The reading half of a [`TcpStream`], from [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf {
    stream: Arc<TcpStream>,
}

/// The writing half of a [`TcpStream`], from [`TcpStream::into_split`]. Dropping it shuts the
/// connection down for writing.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    stream: Arc<TcpStream>,
    /// False once `reunite` takes the stream back (no shutdown then).
    shutdown_on_drop: bool,
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
        let stream = Arc::new(self);
        (OwnedReadHalf { stream: stream.clone() }, OwnedWriteHalf { stream, shutdown_on_drop: true })
    }
}

impl OwnedReadHalf {
    /// The stream both halves share.
    pub fn as_stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Rejoins the halves of one stream; `Err` gives them back if they are not a pair.
    pub fn reunite(self, mut other: OwnedWriteHalf) -> Result<TcpStream, (OwnedReadHalf, OwnedWriteHalf)> {
        if !Arc::ptr_eq(&self.stream, &other.stream) {
            return Err((self, other));
        }
        other.shutdown_on_drop = false;
        drop(other);
        Ok(Arc::try_unwrap(self.stream).expect("the two halves held the only references"))
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }
}

impl OwnedWriteHalf {
    /// The stream both halves share.
    pub fn as_stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            // The peer may have gone already (ENOTCONN): nothing to tell it then.
            let _ = self.stream.shutdown(Shutdown::Write);
        }
    }
}

impl Read for OwnedReadHalf {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.stream).read(buf)
    }
}

impl Write for OwnedWriteHalf {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.stream).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl futures_io::AsyncRead for OwnedReadHalf {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.stream.source.poll_read_stream(cx, buf)
    }
}

impl futures_io::AsyncWrite for OwnedWriteHalf {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.stream.source.poll_io(cx, Direction::Write, |mut s| s.write(buf))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.stream.shutdown(Shutdown::Write))
    }
}
