//! The hot system calls (socket reads and writes, `accept4`, `epoll_wait`, the wake-up
//! eventfd's `read` and `write`) without glibc's cancellation wrappers.
//!
//! All of them are POSIX cancellation points. In a
//! process with more than one thread (a spindle process always has some) glibc brackets each
//! call with `__pthread_enable_asynccancel` / `__pthread_disable_asynccancel`: two locked
//! compare-exchanges on the thread's cancel state. Measured on this machine (a C loop of
//! `recv` on an empty non-blocking socket, 2 million calls): 128 ns a call single-threaded,
//! 157 ns with a second thread alive, 137 ns through `syscall(2)`, which is no cancellation
//! point. spindle never uses `pthread_cancel` (a cancelled worker thread would strand its
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

/// `recv(fd, buf, flags)`.
#[inline]
pub(crate) fn recv(fd: RawFd, buf: &mut [MaybeUninit<u8>], flags: libc::c_int) -> io::Result<usize> {
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call (the kernel writes
    // only initialised bytes there); the two null pointers ask for no source address.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd as c_long,
            buf.as_mut_ptr() as c_long,
            buf.len() as c_long,
            flags as c_long,
            0 as c_long,
            0 as c_long,
        )
    } as isize;
    #[cfg(any(spindle_asan, spindle_tsan))]
    // SAFETY: as above.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) };
    count(n)
}

/// `recvmsg(fd, msg, flags)`.
///
/// # Safety
///
/// `msg` is a valid `msghdr` whose buffers are valid for writes of the lengths it gives, for
/// the call.
#[inline]
pub(crate) unsafe fn recvmsg(fd: RawFd, msg: &mut libc::msghdr, flags: libc::c_int) -> io::Result<usize> {
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    // SAFETY: the caller's contract.
    let n = unsafe {
        libc::syscall(libc::SYS_recvmsg, fd as c_long, msg as *mut libc::msghdr as c_long, flags as c_long)
    } as isize;
    #[cfg(any(spindle_asan, spindle_tsan))]
    // SAFETY: the caller's contract.
    let n = unsafe { libc::recvmsg(fd, msg, flags) };
    count(n)
}

/// `send(fd, buf, MSG_NOSIGNAL)`: a write to a closed connection is an `EPIPE` error, not a
/// `SIGPIPE` (as std's and socket2's sends on Linux).
#[inline]
pub(crate) fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call; the null address
    // and zero length send to the connected peer.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd as c_long,
            buf.as_ptr() as c_long,
            buf.len() as c_long,
            libc::MSG_NOSIGNAL as c_long,
            0 as c_long,
            0 as c_long,
        )
    } as isize;
    #[cfg(any(spindle_asan, spindle_tsan))]
    // SAFETY: as above.
    let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    count(n)
}

/// `sendmsg` of `bufs` to the connected peer with `MSG_NOSIGNAL` (see [`send`]).
#[inline]
pub(crate) fn send_vectored(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: msghdr is plain data; all-zero is a valid empty header, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is guaranteed ABI-compatible with `iovec` on Unix; the kernel only reads them.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len().min(libc::c_int::MAX as usize) as _;
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    // SAFETY: `msg` points at `bufs.len()` iovecs, each valid for reads of its length, for
    // the call; no address, no control data.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendmsg,
            fd as c_long,
            &msg as *const libc::msghdr as c_long,
            libc::MSG_NOSIGNAL as c_long,
        )
    } as isize;
    #[cfg(any(spindle_asan, spindle_tsan))]
    // SAFETY: as above.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
    count(n)
}

/// `write(fd, buf)` (the eventfd that wakes a worker).
#[inline]
pub(crate) fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the call.
    let n =
        unsafe { libc::syscall(libc::SYS_write, fd as c_long, buf.as_ptr() as c_long, buf.len() as c_long) }
            as isize;
    #[cfg(any(spindle_asan, spindle_tsan))]
    // SAFETY: as above.
    let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
    count(n)
}

/// `read(fd, buf)` (the eventfd that wakes a worker).
#[inline]
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call.
    let n = unsafe {
        libc::syscall(libc::SYS_read, fd as c_long, buf.as_mut_ptr() as c_long, buf.len() as c_long)
    } as isize;
    #[cfg(any(spindle_asan, spindle_tsan))]
    // SAFETY: as above.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    count(n)
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
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    // SAFETY: the caller's contract.
    let n = unsafe {
        libc::syscall(libc::SYS_accept4, fd as c_long, addr as c_long, len as c_long, flags as c_long)
    } as isize;
    #[cfg(any(spindle_asan, spindle_tsan))]
    // SAFETY: the caller's contract.
    let n = unsafe { libc::accept4(fd, addr, len, flags) } as isize;
    count(n).map(|fd| fd as RawFd)
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
    #[cfg(not(any(spindle_asan, spindle_tsan)))]
    // SAFETY: the caller's contract; a null signal mask (and so no mask size) makes
    // `epoll_pwait` an `epoll_wait`.
    let n = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait,
            epfd as c_long,
            events as c_long,
            max as c_long,
            timeout_ms as c_long,
            0 as c_long,
            0 as c_long,
        )
    } as isize;
    #[cfg(any(spindle_asan, spindle_tsan))]
    // SAFETY: the caller's contract.
    let n = unsafe { libc::epoll_wait(epfd, events, max, timeout_ms) } as isize;
    count(n)
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
