//! TCP listeners and streams.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs as StdToSocketAddrs};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::addr::{each_addr, ToSocketAddrs};
use super::dns;
use super::io_future::IoFuture;
use super::source::IoSource;
use crate::reactor::io::Direction;

/// The backlog of `TcpListener::bind` (the kernel caps it at `net.core.somaxconn`).
const BACKLOG: i32 = 1024;

/// A TCP socket server. `accept` parks the calling fiber until a connection arrives.
#[derive(Debug)]
pub struct TcpListener {
    source: IoSource,
}

/// A TCP connection. `Read`/`Write` park the calling fiber while the socket is not ready.
///
/// A reader and a writer in two fibers can share one stream: through `&TcpStream` (which
/// implements `Read` and `Write`), through [`try_clone`](Self::try_clone), or by splitting
/// it into owned halves with [`into_split`](Self::into_split).
#[derive(Debug)]
pub struct TcpStream {
    pub(super) source: IoSource,
}

fn stream_socket(addr: &SocketAddr) -> io::Result<Socket> {
    // One socket(2) call: non-blocking and close-on-exec are flags of the call itself.
    Socket::new(Domain::for_address(*addr), Type::STREAM.nonblocking().cloexec(), Some(Protocol::TCP))
}

fn to_std_addr(addr: SockAddr) -> io::Result<SocketAddr> {
    addr.as_socket().ok_or_else(|| io::Error::other("not an IP socket address"))
}

impl TcpListener {
    /// Binds to `addr` with `SO_REUSEADDR` (as `std::net::TcpListener::bind` does) and listens.
    /// The system calls are exactly socket, setsockopt, bind, listen.
    pub fn bind(addr: impl StdToSocketAddrs) -> io::Result<TcpListener> {
        each_addr(addr, |a| TcpListener::bind_with(a, false))
    }

    /// Like [`bind`](Self::bind), also setting `SO_REUSEPORT` so that several listeners (one
    /// per worker, say) can share the address and the kernel balances connections.
    pub fn bind_reuseport(addr: impl StdToSocketAddrs) -> io::Result<TcpListener> {
        each_addr(addr, |a| TcpListener::bind_with(a, true))
    }

    fn bind_with(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
        let socket = stream_socket(&addr)?;
        socket.set_reuse_address(true)?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.bind(&addr.into())?;
        socket.listen(BACKLOG)?;
        Ok(TcpListener { source: IoSource::new(socket, true)? })
    }

    /// Takes over a std listener (switching it to non-blocking mode).
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener { source: IoSource::new(Socket::from(listener), false)? })
    }

    /// Waits for a connection and returns it with the peer's address. In a fiber this parks
    /// the fiber. An error such as `EMFILE` (too many open files) is returned as is: the
    /// listener stays usable, and the caller decides whether to log, back off and retry.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (socket, addr) = self.source.blocking(Direction::Read, None, accept4)?;
        Ok((TcpStream { source: IoSource::new(socket, true)? }, to_std_addr(addr)?))
    }

    /// The future-side `accept`.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        match self.source.poll_io(cx, Direction::Read, accept4) {
            Poll::Ready(Ok((socket, addr))) => Poll::Ready(
                IoSource::new(socket, true).and_then(|source| Ok((TcpStream { source }, to_std_addr(addr)?))),
            ),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The accepted connections, endlessly: an `Iterator` for fibers (`accept` in a loop)
    /// and a `futures_core::Stream` for tasks ([`poll_accept`](Self::poll_accept) in a loop).
    ///
    /// ```
    /// use std::pin::pin;
    /// use std::future::poll_fn;
    /// use futures_core::Stream;
    /// use spindle::net::{TcpListener, TcpStream};
    ///
    /// let rt = spindle::Runtime::new().unwrap();
    /// let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let server = rt.spawn_async(async move {
    ///     let mut incoming = pin!(listener.incoming());
    ///     let conn = poll_fn(|cx| incoming.as_mut().poll_next(cx)).await.unwrap().unwrap();
    ///     conn.peer_addr().unwrap()
    /// });
    /// let client = rt.block_on(move || TcpStream::connect(addr).unwrap());
    /// assert_eq!(server.join().unwrap(), client.local_addr().unwrap());
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        to_std_addr(self.source.socket().local_addr()?)
    }

    /// Sets how long `accept` may wait before failing with `TimedOut` (`None`: forever).
    pub fn set_accept_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Read, timeout)
    }

    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.source.socket().take_error()
    }
}

pub(super) fn accept4(socket: &Socket) -> io::Result<(Socket, SockAddr)> {
    // accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC: one system call, no fcntl afterwards.
    // SAFETY: `try_init` hands us valid storage and length pointers for the peer address,
    // and accept4 writes at most `*len` bytes there.
    let (fd, addr) = unsafe {
        SockAddr::try_init(|storage, len| {
            crate::sys::nocancel::accept4(
                socket.as_raw_fd(),
                storage.cast(),
                len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        })
    }?;
    // SAFETY: accept4 returned a new descriptor that nothing else owns.
    let accepted = unsafe { <Socket as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    Ok((accepted, addr))
}

/// Iterator returned by [`TcpListener::incoming`].
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

impl futures_core::Stream for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<TcpStream>>> {
        self.listener.poll_accept(cx).map(|accepted| Some(accepted.map(|(s, _)| s)))
    }
}

impl TcpStream {
    /// Connects to `addr` (trying each resolved address in turn). In a fiber, waiting for the
    /// handshake parks the fiber. A closed port gives `ConnectionRefused`. A host name is
    /// looked up on the blocking pool ([`dns`](super::dns)), never on the worker thread.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        dns::each_resolved(addr, |a| TcpStream::connect_inner(a, None))
    }

    /// The future-side [`connect`](Self::connect), for async tasks: resolves a host name on
    /// the blocking pool, then waits for the handshake on the reactor. Bound it with
    /// [`time::timeout`](crate::time::timeout).
    ///
    /// ```
    /// use spindle::net::{TcpListener, TcpStream};
    ///
    /// let rt = spindle::Runtime::new().unwrap();
    /// let listener = rt.block_on(|| TcpListener::bind("127.0.0.1:0")).unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let task = rt.spawn_async(async move { TcpStream::connect_async(addr).await.map(|s| s.peer_addr()) });
    /// assert_eq!(task.join().unwrap().unwrap().unwrap(), addr);
    /// ```
    pub fn connect_async(addr: impl ToSocketAddrs) -> IoFuture<TcpStream> {
        let target = addr.to_target();
        IoFuture::new(async move {
            let mut last_err = None;
            for a in dns::default_resolver().resolve_async(target?).await? {
                match TcpStream::connect_one_async(a).await {
                    Ok(stream) => return Ok(stream),
                    Err(e) => last_err = Some(e),
                }
            }
            Err(last_err.unwrap_or_else(dns::no_addresses))
        })
    }

    async fn connect_one_async(addr: SocketAddr) -> io::Result<TcpStream> {
        let socket = stream_socket(&addr)?;
        let stream = TcpStream { source: IoSource::new(socket, true)? };
        match stream.source.socket().connect(&addr.into()) {
            Ok(()) => return Ok(stream),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        // As in `connect_inner`: a peer address means done, `SO_ERROR` says why it failed,
        // neither means in progress (reported as `WouldBlock`, so that the reactor wakes the
        // task at the next writability event, which marks the handshake's end).
        std::future::poll_fn(|cx| {
            stream.source.poll_io(cx, Direction::Write, |s| match s.peer_addr() {
                Ok(_) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => match s.take_error()? {
                    Some(err) => Err(err),
                    None => Err(io::ErrorKind::WouldBlock.into()),
                },
                Err(e) => Err(e),
            })
        })
        .await?;
        stream.source.expect_first_read_event();
        Ok(stream)
    }

    /// Like [`connect`](Self::connect) with a limit on the handshake; `TimedOut` past it (a
    /// limit too long for an `Instant`, such as `Duration::MAX`, is no limit).
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        TcpStream::connect_inner(*addr, crate::park::wait::deadline_in(timeout))
    }

    fn connect_inner(addr: SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
        let socket = stream_socket(&addr)?;
        let stream = TcpStream { source: IoSource::new(socket, true)? };
        match stream.source.socket().connect(&addr.into()) {
            Ok(()) => return Ok(stream),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        // A peer address means the handshake succeeded (on loopback it usually has by now, so
        // look before waiting; an error that came after it, such as a reset, is left for the
        // first read, as with std's connect). Otherwise SO_ERROR says why it failed, or, if
        // empty, it is still in progress: wait for writability, which marks its end.
        loop {
            match stream.source.socket().peer_addr() {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
                    if let Some(err) = stream.source.socket().take_error()? {
                        return Err(err);
                    }
                    stream.source.wait_ready(Direction::Write, deadline)?;
                }
                Err(e) => return Err(e),
            }
        }
        stream.source.expect_first_read_event();
        Ok(stream)
    }

    /// Takes over a std stream (switching it to non-blocking mode).
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream { source: IoSource::new(Socket::from(stream), false)? })
    }

    /// A second handle to the same connection (a duplicated descriptor, with this one's read
    /// and write timeouts), for a reader and a writer in two fibers. Closing one handle does
    /// not close the connection; [`shutdown`](Self::shutdown) on either does.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        let clone = TcpStream { source: IoSource::new(self.source.socket().try_clone()?, true)? };
        for dir in [Direction::Read, Direction::Write] {
            clone.source.set_timeout(dir, self.source.timeout(dir))?;
        }
        Ok(clone)
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        to_std_addr(self.source.socket().peer_addr()?)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        to_std_addr(self.source.socket().local_addr()?)
    }

    /// Shuts down the read half, the write half or both (a half-close sends FIN).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.source.socket().shutdown(how)
    }

    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.source.socket().set_tcp_nodelay(nodelay)
    }

    pub fn nodelay(&self) -> io::Result<bool> {
        self.source.socket().tcp_nodelay()
    }

    /// Reads without removing the data from the queue.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.source.blocking(Direction::Read, None, |s| {
            // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout and recv only writes.
            s.peek(unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) })
        })
    }
}

super::stream::impl_as_fd!(TcpStream);
super::stream::impl_timeouts!(TcpStream);

super::stream::impl_as_fd!(TcpListener);

// The I/O traits of TcpStream: blocking-style `std::io` (parks the fiber), `futures-io` and hyper
// 1.x's (feature `hyper`). The work is in `IoSource` (module `net::source`).

impl io::Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.source.read_stream(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.source.read_vectored_stream(bufs)
    }
}

impl io::Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.source.read_stream(buf)
    }
}

impl io::Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.source.write_stream(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.source.write_vectored_stream(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl io::Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.source.write_stream(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl futures_io::AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.source.poll_read_stream(cx, buf)
    }
}

impl futures_io::AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.source.poll_write_stream(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown(Shutdown::Write))
    }
}

#[cfg(feature = "hyper")]
impl hyper::rt::Read for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        self.source.poll_read_hyper(cx, buf)
    }
}

#[cfg(feature = "hyper")]
impl hyper::rt::Write for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.source.poll_write_stream(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.source.poll_write_vectored_stream(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown(Shutdown::Write))
    }
}
