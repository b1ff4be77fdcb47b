//! Fiber-aware networking: TCP, UDP and Unix-domain sockets whose calls read like blocking
//! code inside a fiber (the fiber parks, the worker runs others) and that implement the async
//! I/O traits of `futures-io` for futures running on spindle.
//!
//! - **Async tasks** use the `*_async` methods ([`TcpStream::connect_async`],
//!   [`UnixStream::connect_async`], [`UdpSocket::recv_from_async`], …) and the `futures-io`
//!   traits (with the `tokio-io` feature, tokio's `AsyncRead`/`AsyncWrite` too, without a
//!   tokio runtime); fibers use the blocking-style calls.
//! - **Names** given to `connect` and `send_to` are resolved by [`dns`] on the runtime's
//!   blocking pool, never on a worker thread (which would stall every fiber on it), with a
//!   small TTL-bounded cache; IP literals need no lookup. `bind` takes std's addresses and
//!   resolves on the calling thread: bind to IP addresses.
//! - **A reader and a writer** in two fibers share a stream through `&TcpStream`,
//!   [`TcpStream::try_clone`] or [`TcpStream::into_split`] (the same for [`UnixStream`]).
//!
//! ```
//! use std::io::{Read, Write};
//! use spindle::net::{TcpListener, TcpStream};
//!
//! let rt = spindle::Runtime::new().unwrap();
//! rt.block_on(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let server = spindle::spawn(move || {
//!         let (mut conn, _) = listener.accept().unwrap();
//!         let mut buf = [0; 5];
//!         conn.read_exact(&mut buf).unwrap();
//!         conn.write_all(&buf).unwrap();
//!     });
//!     let mut client = TcpStream::connect(addr).unwrap();
//!     client.write_all(b"hello").unwrap();
//!     let mut echo = [0; 5];
//!     client.read_exact(&mut echo).unwrap();
//!     assert_eq!(&echo, b"hello");
//!     server.join().unwrap();
//! });
//! ```

mod addr;
pub mod dns;
mod drain;
mod flight;
mod source;
mod split;
mod stream;
mod tcp;
#[cfg(feature = "tokio-io")]
mod tokio_io;
mod udp;
mod unix;

pub use addr::ToSocketAddrs;
pub use dns::{lookup_host, lookup_host_async};
/// For `process`: child pipes and pidfds wait on the reactor as sockets do.
pub(crate) use source::IoSource;
pub use split::{OwnedReadHalf, OwnedWriteHalf, SplitStream};
pub(crate) use stream::impl_as_fd;
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixListener, UnixStream};

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

/// `buf` as a socket read sees it: room to write bytes into (socket2's and the kernel's
/// reads take `MaybeUninit<u8>`).
fn as_uninit(buf: &mut [u8]) -> &mut [std::mem::MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and the reads this is handed to
    // write only initialised bytes, so `buf` stays initialised.
    unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) }
}

/// The future of an asynchronous connect or lookup
/// ([`TcpStream::connect_async`], [`lookup_host_async`], …). It is boxed so that it is
/// `Send + 'static` whatever address type started it (a `&str` included): spawn it, or
/// bound it with [`time::timeout`](crate::time::timeout).
#[must_use = "futures do nothing unless polled"]
pub struct IoFuture<T> {
    inner: Pin<Box<dyn Future<Output = io::Result<T>> + Send>>,
}

impl<T> IoFuture<T> {
    pub(crate) fn new(future: impl Future<Output = io::Result<T>> + Send + 'static) -> IoFuture<T> {
        IoFuture { inner: Box::pin(future) }
    }
}

impl<T> Future for IoFuture<T> {
    type Output = io::Result<T>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T> fmt::Debug for IoFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoFuture").finish_non_exhaustive()
    }
}

/// Resolves `addr` with std (on the calling thread: used only by `bind`, whose addresses are
/// local) and runs `f` on each address until one succeeds (like std's `each_addr`).
fn each_addr<A: std::net::ToSocketAddrs, T>(
    addr: A,
    mut f: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last_err = None;
    for addr in addr.to_socket_addrs()? {
        match f(addr) {
            Ok(v) => return Ok(v),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any addresses")))
}
