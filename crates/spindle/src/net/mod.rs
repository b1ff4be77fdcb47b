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
//! - **Gathered writes** ([`CoalescedStream`]): a stream for async protocol engines (hyper's
//!   HTTP/2) whose small writes on a worker leave together, once per burst of the worker's work.
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
mod coalesce;
pub mod dns;
mod drain;
mod flight;
mod io_future;
mod source;
mod split;
mod stream;
mod tcp;
#[cfg(feature = "tokio-io")]
mod tokio_io;
mod udp;
mod uninit;
mod unix;

pub use addr::ToSocketAddrs;
pub use coalesce::{CoalescedStream, DIRECT_WRITE, GATHER_LIMIT};
pub use dns::{lookup_host, lookup_host_async};
pub use io_future::IoFuture;
/// For `process`: child pipes and pidfds wait on the reactor as sockets do.
pub(crate) use source::IoSource;
pub use split::{OwnedReadHalf, OwnedWriteHalf, SplitStream};
pub(crate) use stream::impl_as_fd;
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixListener, UnixStream};
