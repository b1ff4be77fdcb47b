//! The hot system calls (socket reads and writes, `accept4`, `epoll_wait`, the wake-up
//! eventfd's `read` and `write`) without glibc's cancellation wrappers.
//!
//! All of them are POSIX cancellation points. In a
//! process with more than one thread (a spindle process always has some) glibc brackets each
//! call with `__pthread_enable_asynccancel` / `__pthread_disable_asynccancel`: two locked
//! compare-exchanges on the thread's cancel state, a measurable part of a short call
//! (`docs/perf/tcp.md`; `syscall(2)` is no cancellation point). spindle never uses
//! `pthread_cancel` (a cancelled worker thread would strand its
//! fibers), so the wrappers buy nothing here; these functions make the same calls through
//! `libc::syscall`.
//!
//! Each argument is widened to `c_long` before it is passed: `syscall` reads six longs, and
//! a 32-bit `int` passed through C varargs leaves the upper half of its register undefined.
//!
//! Under ASan and TSan (`--cfg spindle_asan` / `spindle_tsan`) the libc functions are called
//! instead: the sanitizers intercept them (TSan models the happens-before edge from a `send`
//! to the `recv` that reads it, which a raw system call would hide, reporting false races).

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;

#[cfg(not(any(spindle_asan, spindle_tsan)))]
use libc::c_long;

/// The result of a system call that returns a count: the count, or the error in `errno`.
#[inline]
fn count(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// System call `nr` through `syscall(2)`, with its arguments widened to longs (unused
/// trailing ones are zero; the kernel ignores the registers a call does not take).
///
/// # Safety
///
/// The arguments are valid for system call `nr`.
#[cfg(not(any(spindle_asan, spindle_tsan)))]
#[inline]
unsafe fn raw(nr: c_long, args: [c_long; 6]) -> io::Result<usize> {
    let [a, b, c, d, e, f] = args;
    // SAFETY: the caller's contract.
    count(unsafe { libc::syscall(nr, a, b, c, d, e, f) } as isize)
}

/// `recv(fd, buf, flags)`.
#[inline]
pub(crate) fn recv(fd: RawFd, buf: &mut [MaybeUninit<u8>], flags: libc::c_int) -> io::Result<usize> {
    let (ptr, len) = (buf.as_mut_ptr(), buf.len());
    // SAFETY: `buf` is valid for writes of `len` bytes for the call (the kernel writes only
    // initialised bytes there); the null address and length ask for no source address.
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    return unsafe {
        raw(libc::SYS_recvfrom, [fd as c_long, ptr as c_long, len as c_long, flags as c_long, 0, 0])
    };
    // SAFETY: as above.
    #[cfg(any(spindle_asan, spindle_tsan))]
    return count(unsafe { libc::recv(fd, ptr.cast(), len, flags) });
}

/// `recvmsg(fd, msg, flags)`.
///
/// # Safety
///
/// `msg` is a valid `msghdr` whose buffers are valid for writes of the lengths it gives, for
/// the call.
#[inline]
pub(crate) unsafe fn recvmsg(fd: RawFd, msg: &mut libc::msghdr, flags: libc::c_int) -> io::Result<usize> {
    let msg: *mut libc::msghdr = msg;
    // SAFETY: the caller's contract.
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    return unsafe { raw(libc::SYS_recvmsg, [fd as c_long, msg as c_long, flags as c_long, 0, 0, 0]) };
    // SAFETY: the caller's contract.
    #[cfg(any(spindle_asan, spindle_tsan))]
    return count(unsafe { libc::recvmsg(fd, msg, flags) });
}

/// `send(fd, buf, MSG_NOSIGNAL)`: a write to a closed connection is an `EPIPE` error, not a
/// `SIGPIPE` (as std's and socket2's sends on Linux).
#[inline]
pub(crate) fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    let (ptr, len, flags) = (buf.as_ptr(), buf.len(), libc::MSG_NOSIGNAL);
    // SAFETY: `buf` is valid for reads of `len` bytes for the call; the null address sends to
    // the connected peer.
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    return unsafe {
        raw(libc::SYS_sendto, [fd as c_long, ptr as c_long, len as c_long, flags as c_long, 0, 0])
    };
    // SAFETY: as above.
    #[cfg(any(spindle_asan, spindle_tsan))]
    return count(unsafe { libc::send(fd, ptr.cast(), len, flags) });
}

/// `sendmsg` of `bufs` to the connected peer with `MSG_NOSIGNAL` (see [`send`]).
#[inline]
pub(crate) fn send_vectored(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: msghdr is plain data; all-zero is a valid empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is guaranteed ABI-compatible with `iovec` on Unix; the kernel only reads them.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(libc::c_int::MAX as usize) as _;
    let (msg, flags): (*const libc::msghdr, _) = (&msg, libc::MSG_NOSIGNAL);
    // SAFETY: `msg` points at `bufs.len()` iovecs, each valid for reads of its length, for
    // the call; no address, no control data.
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    return unsafe { raw(libc::SYS_sendmsg, [fd as c_long, msg as c_long, flags as c_long, 0, 0, 0]) };
    // SAFETY: as above.
    #[cfg(any(spindle_asan, spindle_tsan))]
    return count(unsafe { libc::sendmsg(fd, msg, flags) });
}

/// `write(fd, buf)` (the eventfd that wakes a worker).
#[inline]
pub(crate) fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    let (ptr, len) = (buf.as_ptr(), buf.len());
    // SAFETY: `buf` is valid for reads of `len` bytes for the call.
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    return unsafe { raw(libc::SYS_write, [fd as c_long, ptr as c_long, len as c_long, 0, 0, 0]) };
    // SAFETY: as above.
    #[cfg(any(spindle_asan, spindle_tsan))]
    return count(unsafe { libc::write(fd, ptr.cast(), len) });
}

/// `read(fd, buf)` (the eventfd that wakes a worker).
#[inline]
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    let (ptr, len) = (buf.as_mut_ptr(), buf.len());
    // SAFETY: `buf` is valid for writes of `len` bytes for the call.
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    return unsafe { raw(libc::SYS_read, [fd as c_long, ptr as c_long, len as c_long, 0, 0, 0]) };
    // SAFETY: as above.
    #[cfg(any(spindle_asan, spindle_tsan))]
    return count(unsafe { libc::read(fd, ptr.cast(), len) });
}

/// `accept4(fd, addr, len, flags)`: the new descriptor.
///
/// # Safety
///
/// `addr` and `len` are valid for `accept4` (storage of `*len` bytes, or both null).
#[inline]
pub(crate) unsafe fn accept4(
    fd: RawFd,
    addr: *mut libc::sockaddr,
    len: *mut libc::socklen_t,
    flags: libc::c_int,
) -> io::Result<RawFd> {
    // SAFETY: the caller's contract.
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    let n = unsafe {
        raw(libc::SYS_accept4, [fd as c_long, addr as c_long, len as c_long, flags as c_long, 0, 0])
    };
    // SAFETY: the caller's contract.
    #[cfg(any(spindle_asan, spindle_tsan))]
    let n = count(unsafe { libc::accept4(fd, addr, len, flags) } as isize);
    n.map(|fd| fd as RawFd)
}

/// `epoll_wait(epfd, events, max, timeout_ms)` (as `epoll_pwait` with no signal mask, which
/// is the same call; aarch64 has no `epoll_wait` system call).
///
/// # Safety
///
/// `events` is valid for writes of `max` events for the call.
#[inline]
pub(crate) unsafe fn epoll_wait(
    epfd: RawFd,
    events: *mut libc::epoll_event,
    max: libc::c_int,
    timeout_ms: libc::c_int,
) -> io::Result<usize> {
    // SAFETY: the caller's contract; a null signal mask (and so no mask size) makes
    // `epoll_pwait` an `epoll_wait`.
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    return unsafe {
        raw(
            libc::SYS_epoll_pwait,
            [epfd as c_long, events as c_long, max as c_long, timeout_ms as c_long, 0, 0],
        )
    };
    // SAFETY: the caller's contract.
    #[cfg(any(spindle_asan, spindle_tsan))]
    return count(unsafe { libc::epoll_wait(epfd, events, max, timeout_ms) } as isize);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (server, client)
    }

    #[test]
    fn send_and_recv_move_bytes_and_report_errors() {
        let (server, mut client) = pair();
        assert_eq!(send(server.as_raw_fd(), b"hello").unwrap(), 5);
        let mut got = [0u8; 5];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello");

        client.write_all(b"abc").unwrap();
        let mut buf = [MaybeUninit::<u8>::uninit(); 8];
        let n = recv(server.as_raw_fd(), &mut buf, 0).unwrap();
        assert_eq!(n, 3);
        // SAFETY: recv wrote the first `n` bytes.
        assert_eq!(unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) }, b"abc");

        server.set_nonblocking(true).unwrap();
        let err = recv(server.as_raw_fd(), &mut buf, 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "errno read back: {err}");
        let err = recv(-1, &mut buf, 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn send_vectored_sends_every_slice_in_order() {
        let (server, mut client) = pair();
        let bufs = [io::IoSlice::new(b"ab"), io::IoSlice::new(b""), io::IoSlice::new(b"cde")];
        assert_eq!(send_vectored(server.as_raw_fd(), &bufs).unwrap(), 5);
        let mut got = [0u8; 5];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abcde");
    }

    #[test]
    fn a_send_to_a_closed_peer_is_an_error_not_a_signal() {
        let (server, client) = pair();
        drop(client);
        // The first send may still be accepted (the peer's RST comes back after it); a later
        // one fails with EPIPE or ECONNRESET. (Rust programs ignore SIGPIPE by default, so
        // this cannot show MSG_NOSIGNAL at work; a library cannot count on that default.)
        let mut failed = None;
        for _ in 0..100 {
            if let Err(e) = send(server.as_raw_fd(), b"x") {
                failed = Some(e);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let err = failed.expect("sends to a closed peer kept succeeding");
        assert!(matches!(err.raw_os_error(), Some(libc::EPIPE) | Some(libc::ECONNRESET)), "{err}");
    }
}
