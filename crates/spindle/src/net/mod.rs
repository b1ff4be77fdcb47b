//! Fiber-aware networking: TCP, UDP and Unix-domain sockets whose calls read like blocking
//! code inside a fiber (the fiber parks, the worker runs others) and that implement the async
//! I/O traits of `futures-io` for futures running on spindle.
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

mod source;
mod stream;
mod tcp;
mod udp;
mod unix;

pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixListener, UnixStream};

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

/// Resolves `addr` and runs `f` on each address until one succeeds (like std's `each_addr`).
fn each_addr<A: ToSocketAddrs, T>(addr: A, mut f: impl FnMut(SocketAddr) -> io::Result<T>) -> io::Result<T> {
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
