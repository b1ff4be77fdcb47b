//! A stream read that also says whether it drained the socket, so that the next read can
//! wait for a readiness event instead of paying for an `EAGAIN` first.
//!
//! With edge-triggered epoll a read must go on until the kernel says `EAGAIN`, unless the
//! reader knows the receive queue is empty. Two things tell it so:
//!
//! - **A short read drains.** A stream read that returns less than it was offered (but not
//!   end of stream) emptied the receive queue at that moment (tokio's rule too).
//! - **A full read asks the kernel.** A read that fills its buffer exactly (a protocol that
//!   reads fixed-size records, `read_exact`) says nothing by its length. On TCP, after the
//!   first such read the socket turns on `TCP_INQ` (one `setsockopt`, once), and from then on
//!   reads with `recvmsg`, whose `TCP_CM_INQ` control message is the number of bytes still
//!   queued after the read (computed after the socket's backlog was processed; a received
//!   FIN counts as one byte). Zero means drained. A socket that refuses the option (a Unix
//!   socket) is never asked again.
//!
//! # Invariants
//!
//! - **Drained is a fact at one instant.** The caller records "blocked" against the readiness
//!   sequence number it read *before* the system call (module `reactor::io`); data that
//!   arrives after the kernel measured the queue raises a new edge-triggered event, which
//!   moves that number, so a recorded "drained" never hides data.
//! - **The option only adds.** `TCP_INQ` changes nothing but the control message; a
//!   duplicated descriptor (`try_clone`) that shares the socket and reads with plain `recv`
//!   passes no control buffer and sees no difference.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU8, Ordering};

use socket2::Socket;

use crate::sys::nocancel;

/// `TCP_INQ` not tried yet: reads use plain `recv`.
const UNTRIED: u8 = 0;
/// `TCP_INQ` on: reads use `recvmsg` and learn what stays queued.
const ON: u8 = 1;
/// The socket refused `TCP_INQ` (not TCP): plain `recv` for good.
const REFUSED: u8 = 2;

/// Per-socket state of the full-read rule ("a full read asks the kernel").
#[derive(Debug, Default)]
pub(crate) struct Drain(AtomicU8);

/// Room for one `TCP_CM_INQ` control message (`CMSG_SPACE(sizeof(int))` is 24 on 64-bit
/// Linux, 16 on 32-bit), aligned for `cmsghdr`.
type ControlBuf = [u64; 4];

impl Drain {
    /// Reads once into `buf`: the byte count, and whether the read left the receive queue
    /// empty (see the module's two rules; never true at end of stream).
    pub(crate) fn recv(&self, socket: &Socket, buf: &mut [MaybeUninit<u8>]) -> io::Result<(usize, bool)> {
        let len = buf.len();
        if self.0.load(Ordering::Relaxed) == ON {
            let (n, queued) = recv_inq(socket, buf)?;
            return Ok((n, n > 0 && (n < len || queued == Some(0))));
        }
        let n = nocancel::recv(socket.as_raw_fd(), buf, 0)?;
        if n == len && n > 0 && self.0.load(Ordering::Relaxed) == UNTRIED {
            self.turn_on(socket);
        }
        Ok((n, n > 0 && n < len))
    }

    /// Asks the kernel to report the queue after every read; remembers a refusal.
    #[cold]
    fn turn_on(&self, socket: &Socket) {
        let one: libc::c_int = 1;
        // SAFETY: `one` is a valid c_int for the option's length; the descriptor is open
        // (the socket is borrowed).
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_TCP,
                libc::TCP_INQ,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        self.0.store(if rc == 0 { ON } else { REFUSED }, Ordering::Relaxed);
    }

    /// Whether reads ask the kernel what stays queued (for tests).
    #[cfg(test)]
    pub(crate) fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed) == ON
    }
}

/// `recvmsg` into `buf` with room for the `TCP_CM_INQ` control message: the byte count and
/// the bytes still queued, if the kernel said.
fn recv_inq(socket: &Socket, buf: &mut [MaybeUninit<u8>]) -> io::Result<(usize, Option<i32>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control: ControlBuf = [0; 4];
    // SAFETY: msghdr is plain data; all-zero is a valid empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of::<ControlBuf>() as _;
    // SAFETY: `msg` points at one iovec covering `buf` (writable, `buf.len()` bytes; the
    // kernel writes only initialised bytes there) and at `control`, both alive for the call.
    let n = unsafe { nocancel::recvmsg(socket.as_raw_fd(), &mut msg, 0) }?;
    let mut queued = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, within the
    // length it set in `msg.msg_controllen`; each header they return lies inside `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_TCP && (*cmsg).cmsg_type == libc::TCP_CM_INQ {
                queued = Some(std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>()));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n, queued))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::uninit::as_uninit;
    use std::io::Write;

    fn pair() -> (Socket, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (Socket::from(server), client)
    }

    /// Waits until `socket` has at least `n` bytes queued (loopback delivery is quick but not
    /// synchronous with the peer's write).
    fn wait_queued(socket: &Socket, n: usize) {
        let mut buf = vec![0u8; n];
        for _ in 0..10_000 {
            // SAFETY: a peek into a buffer of `n` bytes.
            let got = unsafe {
                libc::recv(
                    socket.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    n,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            if got >= n as isize {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("{n} bytes never arrived");
    }

    /// Waits until `socket` has received its peer's FIN.
    fn wait_fin(socket: &Socket) {
        let mut pfd = libc::pollfd { fd: socket.as_raw_fd(), events: libc::POLLRDHUP, revents: 0 };
        // SAFETY: one valid pollfd for an open descriptor.
        let rc = unsafe { libc::poll(&mut pfd, 1, 10_000) };
        assert!(rc == 1 && pfd.revents & libc::POLLRDHUP != 0, "no FIN arrived");
    }

    #[test]
    fn a_full_read_turns_the_option_on_and_then_tells_a_drained_queue_from_a_full_one() {
        let (server, mut client) = pair();
        let drain = Drain::default();
        let mut buf = [0u8; 4];

        client.write_all(b"abcd").unwrap();
        wait_queued(&server, 4);
        // The first full read cannot tell; it turns the option on.
        assert_eq!(drain.recv(&server, as_uninit(&mut buf)).unwrap(), (4, false));
        assert!(drain.is_on());

        // Exactly one record queued: the full read drained it.
        client.write_all(b"efgh").unwrap();
        wait_queued(&server, 4);
        assert_eq!(drain.recv(&server, as_uninit(&mut buf)).unwrap(), (4, true));
        assert_eq!(&buf, b"efgh");

        // Two records queued: the first full read did not drain, the second did.
        client.write_all(b"ijklmnop").unwrap();
        wait_queued(&server, 8);
        assert_eq!(drain.recv(&server, as_uninit(&mut buf)).unwrap(), (4, false));
        assert_eq!(drain.recv(&server, as_uninit(&mut buf)).unwrap(), (4, true));
        assert_eq!(&buf, b"mnop");

        // A short read drains; end of stream never counts as drained.
        client.write_all(b"q").unwrap();
        wait_queued(&server, 1);
        assert_eq!(drain.recv(&server, as_uninit(&mut buf)).unwrap(), (1, true));
        drop(client);
        let mut end = false;
        for _ in 0..10_000 {
            match drain.recv(&server, as_uninit(&mut buf)) {
                Ok((0, drained)) => {
                    assert!(!drained);
                    end = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(end, "end of stream never seen");
    }

    #[test]
    fn a_full_record_with_the_fin_behind_it_is_not_drained() {
        let (server, mut client) = pair();
        server.set_nonblocking(true).unwrap();
        let drain = Drain::default();
        let mut buf = [0u8; 2];
        client.write_all(b"ab").unwrap();
        wait_queued(&server, 2);
        drain.recv(&server, as_uninit(&mut buf)).unwrap();
        assert!(drain.is_on());
        client.write_all(b"cd").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        wait_queued(&server, 2);
        wait_fin(&server);
        // The kernel counts a received FIN as one queued byte: the reader must read again.
        assert_eq!(drain.recv(&server, as_uninit(&mut buf)).unwrap(), (2, false));
        assert_eq!(drain.recv(&server, as_uninit(&mut buf)).unwrap(), (0, false));
    }

    #[test]
    fn a_unix_socket_refuses_the_option_once_and_keeps_reading() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let a = Socket::from(std::os::fd::OwnedFd::from(a));
        let drain = Drain::default();
        let mut buf = [0u8; 3];
        b.write_all(b"xyzxyz").unwrap();
        assert_eq!(drain.recv(&a, as_uninit(&mut buf)).unwrap(), (3, false));
        assert_eq!(drain.0.load(Ordering::Relaxed), REFUSED);
        assert_eq!(drain.recv(&a, as_uninit(&mut buf)).unwrap(), (3, false));
        assert_eq!(&buf, b"xyz");
    }
}
