//! The interposed data calls on sockets: `read`, `write`, `readv`, `writev`, the `recv` and
//! `send` families. On a fiber and a socket the program left blocking, each attempt is made
//! non-blocking (`MSG_DONTWAIT`; `read` and `write` on a socket become `recv` and `send`) and
//! the fiber parks between attempts (module `wait`); on a fiber and a file, `read`, `write`,
//! `readv` and `writev` are module `file`'s; otherwise glibc's call.

use std::os::fd::RawFd;

use libc::{c_int, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

use super::common::{errno, on_fiber, set_errno};
use super::fd::Entry;
use super::file::{file, transfer, transfer_one, Dir, POSITION};
use super::iov::Iovecs;
use super::real::real;
use super::wait::{blocking_socket, blocking_socket_unless, deadline, would_block, Stop, Waiter};
use crate::reactor::io::Direction;
use crate::sched::worker::Worker;

/// A fiber's blocking receive on a socket the program left blocking: `attempt` makes the
/// call non-blocking (`MSG_DONTWAIT`); waits for readability between attempts, for at most
/// `SO_RCVTIMEO` (then `EAGAIN`, as the kernel's).
fn receive(
    worker: &Worker,
    fd: RawFd,
    entry: &'static Entry,
    mut attempt: impl FnMut() -> ssize_t,
) -> ssize_t {
    let deadline = deadline(entry.timeout(libc::SO_RCVTIMEO));
    let mut waiter = Waiter::new(fd, entry);
    loop {
        let seen = waiter.seen(Direction::Read);
        let n = attempt();
        if n >= 0 || !would_block(errno()) {
            return n;
        }
        match waiter.wait(worker, Direction::Read, seen, deadline, "socket read (hooked libc call)") {
            Ok(()) => {}
            Err(Stop::TimedOut) => {
                set_errno(libc::EAGAIN);
                return -1;
            }
            Err(Stop::Failed) => return -1,
        }
    }
}

/// A fiber's blocking send on a socket the program left blocking: `attempt(done)` sends what
/// is left after `done` bytes, non-blocking (`MSG_DONTWAIT`). A stream socket's send returns
/// once all `len` bytes went out, as a blocking one does; when a timeout (`SO_SNDTIMEO`) or
/// an error stops it after some bytes, it returns their count, as the kernel's does.
fn transmit(
    worker: &Worker,
    fd: RawFd,
    entry: &'static Entry,
    stream: bool,
    len: usize,
    mut attempt: impl FnMut(usize) -> ssize_t,
) -> ssize_t {
    let deadline = deadline(entry.timeout(libc::SO_SNDTIMEO));
    let mut waiter = Waiter::new(fd, entry);
    let mut done = 0usize;
    loop {
        let seen = waiter.seen(Direction::Write);
        let n = attempt(done);
        if n >= 0 {
            done += n as usize;
            if !stream || done >= len {
                return done as ssize_t;
            }
            continue;
        }
        if !would_block(errno()) {
            return if done > 0 { done as ssize_t } else { -1 };
        }
        match waiter.wait(worker, Direction::Write, seen, deadline, "socket write (hooked libc call)") {
            Ok(()) => {}
            Err(Stop::TimedOut) if done > 0 => return done as ssize_t,
            Err(Stop::TimedOut) => {
                set_errno(libc::EAGAIN);
                return -1;
            }
            Err(Stop::Failed) => return if done > 0 { done as ssize_t } else { -1 },
        }
    }
}

/// `recvfrom(2)` as a system call (glibc's `recvfrom` is the program's to call).
///
/// # Safety
///
/// The arguments are valid for `recvfrom(2)`.
unsafe fn sys_recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { (real().recvfrom)(fd, buf, len, flags, addr, alen) }
}

/// # Safety
///
/// The arguments are valid for `sendto(2)`.
unsafe fn sys_sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    alen: socklen_t,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { (real().sendto)(fd, buf, len, flags, addr, alen) }
}

/// A receive of `len` bytes into `buf` with `flags`, on a fiber or not.
///
/// # Safety
///
/// As `recvfrom(2)`.
unsafe fn receive_into(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
) -> ssize_t {
    let (Some(worker), Some((entry, _))) = (on_fiber(), blocking_socket_unless(fd, flags)) else {
        // SAFETY: the caller's contract.
        return unsafe { sys_recvfrom(fd, buf, len, flags, addr, alen) };
    };
    if flags & libc::MSG_WAITALL == 0 {
        // SAFETY: the caller's contract; MSG_DONTWAIT only makes the call return at once.
        return receive(worker, fd, entry, || unsafe {
            sys_recvfrom(fd, buf, len, flags | libc::MSG_DONTWAIT, addr, alen)
        });
    }
    // MSG_WAITALL: as the kernel, fill the buffer unless the end, an error or the timeout
    // comes first (then what was received so far, if anything).
    let flags = (flags & !libc::MSG_WAITALL) | libc::MSG_DONTWAIT;
    let mut got = 0usize;
    while got < len {
        // SAFETY: `buf + got .. buf + len` is within the caller's buffer.
        let n = receive(worker, fd, entry, || unsafe {
            sys_recvfrom(fd, buf.cast::<u8>().add(got).cast(), len - got, flags, addr, alen)
        });
        match n {
            0 => break,
            n if n > 0 => got += n as usize,
            _ if got > 0 => break,
            _ => return -1,
        }
    }
    got as ssize_t
}

/// A send of `len` bytes from `buf`, on a fiber or not.
///
/// # Safety
///
/// As `sendto(2)`.
unsafe fn send_from(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    alen: socklen_t,
) -> ssize_t {
    let (Some(worker), Some((entry, stream))) = (on_fiber(), blocking_socket_unless(fd, flags)) else {
        // SAFETY: the caller's contract.
        return unsafe { sys_sendto(fd, buf, len, flags, addr, alen) };
    };
    transmit(worker, fd, entry, stream, len, |done| {
        // SAFETY: `buf + done .. buf + len` is within the caller's buffer.
        unsafe {
            sys_sendto(
                fd,
                buf.cast::<u8>().add(done).cast(),
                len - done,
                flags | libc::MSG_DONTWAIT,
                addr,
                alen,
            )
        }
    })
}

/// `read(2)`: on a fiber and a blocking socket, a receive that parks; otherwise glibc's.
///
/// # Safety
///
/// As `read(2)`.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    if let Some(worker) = on_fiber() {
        if blocking_socket(fd).is_some() {
            // SAFETY: `read` on a socket is `recv` with no flags.
            return unsafe { receive_into(fd, buf, count, 0, std::ptr::null_mut(), std::ptr::null_mut()) };
        }
        if let Some(entry) = file(fd) {
            // SAFETY: the caller's contract.
            return unsafe { transfer_one(worker, fd, entry, buf, count, POSITION, Dir::Read) };
        }
    }
    // SAFETY: the caller's contract.
    unsafe { (real().read)(fd, buf, count) }
}

/// `write(2)`: on a fiber and a blocking socket, a send that parks; otherwise glibc's.
///
/// # Safety
///
/// As `write(2)`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    if let Some(worker) = on_fiber() {
        if blocking_socket(fd).is_some() {
            // SAFETY: `write` on a socket is `send` with no flags (SIGPIPE included).
            return unsafe { send_from(fd, buf, count, 0, std::ptr::null(), 0) };
        }
        if let Some(entry) = file(fd) {
            // SAFETY: the caller's contract (the buffer is only read).
            return unsafe { transfer_one(worker, fd, entry, buf.cast_mut(), count, POSITION, Dir::Write) };
        }
    }
    // SAFETY: the caller's contract.
    unsafe { (real().write)(fd, buf, count) }
}

/// `recv(2)`.
///
/// # Safety
///
/// As `recv(2)`.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t {
    if on_fiber().is_none() {
        // SAFETY: the caller's contract.
        return unsafe { (real().recv)(fd, buf, len, flags) };
    }
    // SAFETY: the caller's contract.
    unsafe { receive_into(fd, buf, len, flags, std::ptr::null_mut(), std::ptr::null_mut()) }
}

/// `recvfrom(2)`.
///
/// # Safety
///
/// As `recvfrom(2)`.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    alen: *mut socklen_t,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { receive_into(fd, buf, len, flags, addr, alen) }
}

/// `send(2)`.
///
/// # Safety
///
/// As `send(2)`.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t {
    if on_fiber().is_none() {
        // SAFETY: the caller's contract.
        return unsafe { (real().send)(fd, buf, len, flags) };
    }
    // SAFETY: the caller's contract.
    unsafe { send_from(fd, buf, len, flags, std::ptr::null(), 0) }
}

/// `sendto(2)`.
///
/// # Safety
///
/// As `sendto(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: size_t,
    flags: c_int,
    addr: *const sockaddr,
    alen: socklen_t,
) -> ssize_t {
    // SAFETY: the caller's contract.
    unsafe { send_from(fd, buf, len, flags, addr, alen) }
}

/// `recvmsg(2)`.
///
/// # Safety
///
/// As `recvmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    let (Some(worker), Some((entry, _))) = (on_fiber(), blocking_socket_unless(fd, flags)) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().recvmsg)(fd, msg, flags) };
    };
    // SAFETY: the caller's contract; MSG_DONTWAIT only makes the call return at once.
    receive(worker, fd, entry, || unsafe { (real().recvmsg)(fd, msg, flags | libc::MSG_DONTWAIT) })
}

/// `readv(2)`: on a fiber and a blocking socket, a `recvmsg` that parks.
///
/// # Safety
///
/// As `readv(2)`.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, iovcnt: c_int) -> ssize_t {
    if let (Some(worker), Some(entry)) = (on_fiber(), file(fd)) {
        // SAFETY: the caller's contract.
        return unsafe { transfer(worker, fd, entry, iov, iovcnt, POSITION, Dir::Read) };
    }
    let (Some(worker), Some((entry, _))) = (on_fiber(), blocking_socket(fd)) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().readv)(fd, iov, iovcnt) };
    };
    // SAFETY: an all-zero msghdr is valid (no address, no control data).
    let mut msg: msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.cast_mut();
    msg.msg_iovlen = iovcnt.max(0) as _;
    // SAFETY: the caller's iovecs, read-only for recvmsg's structure (the kernel writes the
    // buffers they describe, which the caller lent for that).
    receive(worker, fd, entry, || unsafe { (real().recvmsg)(fd, &mut msg, libc::MSG_DONTWAIT) })
}

/// `writev(2)`: on a fiber and a blocking socket, a `sendmsg` that parks.
///
/// # Safety
///
/// As `writev(2)`.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, iovcnt: c_int) -> ssize_t {
    if let (Some(worker), Some(entry)) = (on_fiber(), file(fd)) {
        // SAFETY: the caller's contract.
        return unsafe { transfer(worker, fd, entry, iov, iovcnt, POSITION, Dir::Write) };
    }
    let (Some(worker), Some((entry, stream))) = (on_fiber(), blocking_socket(fd)) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().writev)(fd, iov, iovcnt) };
    };
    // SAFETY: an all-zero msghdr is valid (no address, no control data).
    let mut msg: msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.cast_mut();
    msg.msg_iovlen = iovcnt.max(0) as _;
    // SAFETY: as `sendmsg` below.
    unsafe { send_message(worker, fd, entry, stream, &msg, 0) }
}

/// `sendmsg(2)`.
///
/// # Safety
///
/// As `sendmsg(2)`.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    let (Some(worker), Some((entry, stream))) = (on_fiber(), blocking_socket_unless(fd, flags)) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().sendmsg)(fd, msg, flags) };
    };
    // SAFETY: the caller's contract: `msg` is a valid msghdr.
    unsafe { send_message(worker, fd, entry, stream, &*msg, flags) }
}

/// A fiber's blocking `sendmsg`: a stream socket's message goes out whole (the iovecs
/// advanced past what each attempt sent; the control data, such as passed descriptors, only
/// with the first bytes).
///
/// # Safety
///
/// `msg` describes valid buffers, as for `sendmsg(2)`.
unsafe fn send_message(
    worker: &Worker,
    fd: RawFd,
    entry: &'static Entry,
    stream: bool,
    msg: &msghdr,
    flags: c_int,
) -> ssize_t {
    #[allow(clippy::unnecessary_cast)] // a size_t on glibc, an int elsewhere
    let count = msg.msg_iovlen as usize;
    // SAFETY: the caller's contract: `msg_iov` points to `msg_iovlen` iovecs.
    let mut rest = unsafe { Iovecs::from_raw(msg.msg_iov, count) };
    let len = rest.len();
    let mut sent_before = 0usize;
    transmit(worker, fd, entry, stream, len, |done| {
        rest.advance(done - sent_before);
        sent_before = done;
        let rest = rest.rest();
        let mut part = *msg;
        part.msg_iov = rest.as_mut_ptr();
        part.msg_iovlen = rest.len() as _;
        if done > 0 {
            part.msg_control = std::ptr::null_mut();
            part.msg_controllen = 0;
        }
        // SAFETY: `part` describes the caller's buffers past what was sent.
        unsafe { (real().sendmsg)(fd, &part, flags | libc::MSG_DONTWAIT) }
    })
}
