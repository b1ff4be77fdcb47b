//! Unix-domain sockets: stream listeners and connections, and datagram sockets, with the same
//! fiber-parking behaviour as the TCP and UDP types. Addresses are std's
//! [`std::os::unix::net::SocketAddr`] (pathname, abstract or unnamed).

use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::{Domain, SockAddr, Socket, Type};

use super::io_future::IoFuture;
use super::source::IoSource;
use super::tcp::accept4;
use super::uninit::as_uninit;
use crate::reactor::io::Direction;

/// A Unix-domain stream listener. `accept` parks the calling fiber until a connection arrives.
///
/// The socket file that [`bind`](Self::bind) creates is not removed on drop (as with std):
/// remove it yourself when done.
#[derive(Debug)]
pub struct UnixListener {
    source: IoSource,
}

/// A Unix-domain stream connection. `Read`/`Write` park the calling fiber while not ready.
///
/// A reader and a writer in two fibers can share one stream: through `&UnixStream`, through
/// [`try_clone`](Self::try_clone), or by splitting it into owned halves with
/// [`into_split`](Self::into_split).
#[derive(Debug)]
pub struct UnixStream {
    pub(super) source: IoSource,
}

/// A Unix-domain datagram socket. `recv_from` and `send_to` park the calling fiber while not
/// ready.
#[derive(Debug)]
pub struct UnixDatagram {
    source: IoSource,
}

/// The backlog of `UnixListener::bind` (the kernel caps it at `net.core.somaxconn`).
const BACKLOG: i32 = 1024;

fn unix_socket(ty: Type) -> io::Result<Socket> {
    Socket::new(Domain::UNIX, ty.nonblocking().cloexec(), None)
}

/// Converts socket2's address to std's: pathname, abstract name, or unnamed (the address of
/// a peer that did not bind, which std cannot build directly: it is taken once from an
/// unbound socket).
fn to_std_addr(addr: &SockAddr) -> io::Result<SocketAddr> {
    if let Some(path) = addr.as_pathname() {
        return SocketAddr::from_pathname(path);
    }
    if let Some(name) = addr.as_abstract_namespace() {
        return <SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name);
    }
    if addr.is_unnamed() {
        static UNNAMED: OnceLock<SocketAddr> = OnceLock::new();
        if let Some(unnamed) = UNNAMED.get() {
            return Ok(unnamed.clone());
        }
        let unnamed = std::os::unix::net::UnixDatagram::unbound()?.local_addr()?;
        return Ok(UNNAMED.get_or_init(|| unnamed).clone());
    }
    Err(io::Error::other("not a Unix-domain socket address"))
}

/// Converts std's address to socket2's, for `bind`/`connect` to an abstract address.
fn to_sock_addr(addr: &SocketAddr) -> io::Result<SockAddr> {
    if let Some(path) = addr.as_pathname() {
        return SockAddr::unix(path);
    }
    if let Some(name) = std::os::linux::net::SocketAddrExt::as_abstract_name(addr) {
        // socket2 takes an abstract name as a path whose first byte is NUL.
        let mut bytes = Vec::with_capacity(name.len() + 1);
        bytes.push(0);
        bytes.extend_from_slice(name);
        return SockAddr::unix(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&bytes));
    }
    Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot bind or connect to an unnamed address"))
}

impl UnixListener {
    /// Creates the socket file at `path` and listens on it. The system calls are socket,
    /// bind, listen. An existing file at `path` gives `AddrInUse`.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        UnixListener::bind_sock_addr(&SockAddr::unix(path)?)
    }

    /// Binds to `addr`: a pathname or (Linux) an abstract address made with
    /// `std::os::linux::net::SocketAddrExt::from_abstract_name`.
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        UnixListener::bind_sock_addr(&to_sock_addr(addr)?)
    }

    fn bind_sock_addr(addr: &SockAddr) -> io::Result<UnixListener> {
        let socket = unix_socket(Type::STREAM)?;
        socket.bind(addr)?;
        socket.listen(BACKLOG)?;
        Ok(UnixListener { source: IoSource::new(socket, true)? })
    }

    /// Takes over a std listener (switching it to non-blocking mode).
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        Ok(UnixListener { source: IoSource::new(Socket::from(listener), false)? })
    }

    /// Waits for a connection and returns it with the peer's address (usually unnamed). In a
    /// fiber this parks the fiber. Errors such as `EMFILE` are returned as they are; the
    /// listener stays usable.
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (socket, addr) = self.source.blocking(Direction::Read, None, accept4)?;
        Ok((UnixStream { source: IoSource::new(socket, true)? }, to_std_addr(&addr)?))
    }

    /// The future-side `accept`.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(UnixStream, SocketAddr)>> {
        self.source.poll_io(cx, Direction::Read, accept4).map(|accepted| {
            let (socket, addr) = accepted?;
            Ok((UnixStream { source: IoSource::new(socket, true)? }, to_std_addr(&addr)?))
        })
    }

    /// An endless iterator over accepted connections (`accept` in a loop).
    pub fn incoming(&self) -> impl Iterator<Item = io::Result<UnixStream>> + '_ {
        std::iter::repeat_with(move || self.accept().map(|(s, _)| s))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        to_std_addr(&self.source.socket().local_addr()?)
    }

    /// Sets how long `accept` may wait before failing with `TimedOut` (`None`: forever).
    pub fn set_accept_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.source.set_timeout(Direction::Read, timeout)
    }

    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.source.socket().take_error()
    }
}

impl UnixStream {
    /// Connects to the socket at `path`. A missing file gives `NotFound`, a file nobody
    /// listens on `ConnectionRefused`. When the listener's backlog is full the kernel refuses
    /// a non-blocking connect with `EAGAIN` and offers no readiness event for it, so the call
    /// retries with a growing pause (1 ms up to 64 ms; a parked fiber in a fiber), as a
    /// blocking connect would wait.
    pub fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        UnixStream::connect_sock_addr(&SockAddr::unix(path)?)
    }

    /// Connects to `addr`: a pathname or (Linux) an abstract address.
    pub fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        UnixStream::connect_sock_addr(&to_sock_addr(addr)?)
    }

    fn connect_sock_addr(addr: &SockAddr) -> io::Result<UnixStream> {
        let socket = unix_socket(Type::STREAM)?;
        let mut pause = Duration::from_millis(1);
        loop {
            match socket.connect(addr) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    crate::time::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(64));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(UnixStream { source: IoSource::new(socket, true)? })
    }

    /// The future-side [`connect`](Self::connect), for async tasks. A full backlog is retried
    /// with the same growing pause, as a timer future.
    pub fn connect_async(path: impl AsRef<Path>) -> IoFuture<UnixStream> {
        let addr = SockAddr::unix(path);
        IoFuture::new(async move {
            let addr = addr?;
            let socket = unix_socket(Type::STREAM)?;
            let mut pause = Duration::from_millis(1);
            loop {
                match socket.connect(&addr) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        crate::time::sleep_future(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(64));
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(UnixStream { source: IoSource::new(socket, true)? })
        })
    }

    /// A second handle to the same connection (a duplicated descriptor, with this one's
    /// timeouts), for a reader and a writer in two fibers.
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        let clone = UnixStream { source: IoSource::new(self.source.socket().try_clone()?, true)? };
        for dir in [Direction::Read, Direction::Write] {
            clone.source.set_timeout(dir, self.source.timeout(dir))?;
        }
        Ok(clone)
    }

    /// A connected pair of streams (socketpair(2)).
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM.nonblocking().cloexec(), None)?;
        Ok((UnixStream { source: IoSource::new(a, true)? }, UnixStream { source: IoSource::new(b, true)? }))
    }

    /// Takes over a std stream (switching it to non-blocking mode).
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream { source: IoSource::new(Socket::from(stream), false)? })
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        to_std_addr(&self.source.socket().peer_addr()?)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        to_std_addr(&self.source.socket().local_addr()?)
    }

    /// Shuts down the read half, the write half or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.source.socket().shutdown(how)
    }
}

super::stream::impl_as_fd!(UnixStream);
super::stream::impl_timeouts!(UnixStream, UnixDatagram);

impl UnixDatagram {
    /// Creates a datagram socket bound to the socket file at `path`.
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixDatagram> {
        let socket = unix_socket(Type::DGRAM)?;
        socket.bind(&SockAddr::unix(path)?)?;
        Ok(UnixDatagram { source: IoSource::new(socket, true)? })
    }

    /// Binds to `addr`: a pathname or (Linux) an abstract address.
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixDatagram> {
        let socket = unix_socket(Type::DGRAM)?;
        socket.bind(&to_sock_addr(addr)?)?;
        Ok(UnixDatagram { source: IoSource::new(socket, true)? })
    }

    /// A socket bound to no address (it can send, and receive replies once connected).
    pub fn unbound() -> io::Result<UnixDatagram> {
        Ok(UnixDatagram { source: IoSource::new(unix_socket(Type::DGRAM)?, true)? })
    }

    /// A connected pair of datagram sockets (socketpair(2)).
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = Socket::pair(Domain::UNIX, Type::DGRAM.nonblocking().cloexec(), None)?;
        Ok((
            UnixDatagram { source: IoSource::new(a, true)? },
            UnixDatagram { source: IoSource::new(b, true)? },
        ))
    }

    /// Takes over a std datagram socket (switching it to non-blocking mode).
    pub fn from_std(socket: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram { source: IoSource::new(Socket::from(socket), false)? })
    }

    /// Sets the default peer for `send`/`recv` (and receives only from it).
    pub fn connect(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.source.socket().connect(&SockAddr::unix(path)?)
    }

    /// Sends one datagram to the socket at `path`; waits while the peer's queue is full.
    pub fn send_to(&self, buf: &[u8], path: impl AsRef<Path>) -> io::Result<usize> {
        let addr = SockAddr::unix(path)?;
        self.source.blocking(Direction::Write, None, |s| s.send_to(buf, &addr))
    }

    /// Receives one datagram and the address of its sender (unnamed if it did not bind).
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, addr) = self.source.blocking(Direction::Read, None, |s| s.recv_from(as_uninit(buf)))?;
        Ok((n, to_std_addr(&addr)?))
    }

    /// Sends one datagram to the connected peer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.source.blocking(Direction::Write, None, |s| s.send(buf))
    }

    /// Receives one datagram from the connected peer.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.source.blocking(Direction::Read, None, |s| s.recv(as_uninit(buf)))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        to_std_addr(&self.source.socket().local_addr()?)
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        to_std_addr(&self.source.socket().peer_addr()?)
    }

    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.source.socket().shutdown(how)
    }
}

super::stream::impl_as_fd!(UnixListener, UnixDatagram);

// The I/O traits of UnixStream: blocking-style `std::io` (parks the fiber), `futures-io` and hyper
// 1.x's (feature `hyper`). The work is in `IoSource` (module `net::source`).

impl io::Read for UnixStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.source.read_stream(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.source.read_vectored_stream(bufs)
    }
}

impl io::Read for &UnixStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.source.read_stream(buf)
    }
}

impl io::Write for UnixStream {
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

impl io::Write for &UnixStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.source.write_stream(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl futures_io::AsyncRead for UnixStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.source.poll_read_stream(cx, buf)
    }
}

impl futures_io::AsyncWrite for UnixStream {
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
impl hyper::rt::Read for UnixStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        self.source.poll_read_hyper(cx, buf)
    }
}

#[cfg(feature = "hyper")]
impl hyper::rt::Write for UnixStream {
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
