//! The interposed socket calls: on a fiber, a socket the program left blocking gets the
//! call made non-blocking for that one call, and a wait on the reactor in place of the
//! kernel's (module doc of `hook`, "the descriptor's state is the caller's", "blocking
//! semantics, parked"); every other call goes to glibc. The calls that create, change or
//! close descriptors also keep the descriptor table current (module `fd`).

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libc::{c_int, c_ulong, c_void, iovec, msghdr, size_t, sockaddr, socklen_t, ssize_t};

use super::fd::{self, Entry, Waitable};
use super::real::real;
use super::{errno, on_fiber, parked, set_errno};
use crate::reactor::io::Direction;
use crate::sched::worker::Worker;

/// The entry of `fd` if a fiber's call on it must be made to wait here: a socket the
/// program left blocking.
#[inline]
fn blocking_socket(fd: RawFd) -> Option<(&'static Entry, bool)> {
    let entry = fd::entry(fd)?;
    let known = entry.known(fd);
    (known.socket && !known.nonblocking).then_some((entry, known.stream))
}

/// The deadline a socket timeout sets for a call starting now.
fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

/// A fiber's waits on one descriptor during one call: the registration, once made, kept for
/// the call's later attempts.
struct Waiter {
    fd: RawFd,
    entry: &'static Entry,
    waitable: Option<Arc<Waitable>>,
}

/// How a wait ended, when not with readiness.
enum Stop {
    /// The call's deadline passed.
    TimedOut,
    /// The wait failed (`errno` is set): cancellation, or a registration error.
    Failed,
}

impl Waiter {
    fn new(fd: RawFd, entry: &'static Entry) -> Waiter {
        Waiter { fd, entry, waitable: None }
    }

    /// The readiness event count of `dir` to pass to [`Waiter::wait`], read before the
    /// attempt it follows: 0 before the descriptor is registered (registering reports its
    /// readiness at that moment as event 1, so nothing between the attempt and the wait is
    /// lost).
    fn seen(&self, dir: Direction) -> u32 {
        self.waitable.as_ref().and_then(|w| w.registration.get()).map_or(0, |r| r.io.seq(dir))
    }

    /// Parks the fiber until an event of `dir` newer than `seen`, or `deadline`.
    fn wait(
        &mut self,
        worker: &Worker,
        dir: Direction,
        seen: u32,
        deadline: Option<Instant>,
        call: &'static str,
    ) -> Result<(), Stop> {
        let waitable = self.waitable.get_or_insert_with(|| self.entry.waitable(self.fd));
        let registration = match waitable.get() {
            Ok(Some(reg)) => reg,
            Ok(None) => unreachable!("a fiber runs on a worker"),
            Err(e) => {
                set_errno(e.raw_os_error().unwrap_or(libc::EIO));
                return Err(Stop::Failed);
            }
        };
        parked(worker, Err(Stop::Failed), || {
            match registration.wait_fiber(worker, dir, seen, deadline, call) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(Stop::TimedOut),
                Err(e) => {
                    set_errno(e.raw_os_error().unwrap_or(libc::EIO));
                    Err(Stop::Failed)
                }
            }
        })
    }
}

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

fn would_block(code: c_int) -> bool {
    code == libc::EAGAIN || code == libc::EWOULDBLOCK
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

/// [`blocking_socket`], unless the call's own flags ask for a non-blocking one.
fn blocking_socket_unless(fd: RawFd, flags: c_int) -> Option<(&'static Entry, bool)> {
    if flags & libc::MSG_DONTWAIT != 0 {
        return None;
    }
    blocking_socket(fd)
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
    if on_fiber().is_none() || blocking_socket(fd).is_none() {
        // SAFETY: the caller's contract.
        return unsafe { (real().read)(fd, buf, count) };
    }
    // SAFETY: `read` on a socket is `recv` with no flags.
    unsafe { receive_into(fd, buf, count, 0, std::ptr::null_mut(), std::ptr::null_mut()) }
}

/// `write(2)`: on a fiber and a blocking socket, a send that parks; otherwise glibc's.
///
/// # Safety
///
/// As `write(2)`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    if on_fiber().is_none() || blocking_socket(fd).is_none() {
        // SAFETY: the caller's contract.
        return unsafe { (real().write)(fd, buf, count) };
    }
    // SAFETY: `write` on a socket is `send` with no flags (SIGPIPE included).
    unsafe { send_from(fd, buf, count, 0, std::ptr::null(), 0) }
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
    let iovs: &[iovec] = if count == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract: `msg_iov` points to `msg_iovlen` iovecs.
        unsafe { std::slice::from_raw_parts(msg.msg_iov, count) }
    };
    let len: usize = iovs.iter().map(|v| v.iov_len).sum();
    let mut rest: Vec<iovec> = iovs.to_vec();
    let mut first = 0usize; // index of the first iovec with bytes left
    let mut sent_before = 0usize;
    transmit(worker, fd, entry, stream, len, |done| {
        // Advance the iovecs past the bytes sent since the last attempt.
        let mut skip = done - sent_before;
        sent_before = done;
        while skip > 0 && first < rest.len() {
            let v = &mut rest[first];
            let take = skip.min(v.iov_len);
            // SAFETY: `take` is within this iovec's buffer.
            v.iov_base = unsafe { v.iov_base.cast::<u8>().add(take) }.cast();
            v.iov_len -= take;
            skip -= take;
            if v.iov_len == 0 {
                first += 1;
            }
        }
        let mut part = *msg;
        part.msg_iov = rest[first..].as_mut_ptr();
        part.msg_iovlen = (rest.len() - first) as _;
        if done > 0 {
            part.msg_control = std::ptr::null_mut();
            part.msg_controllen = 0;
        }
        // SAFETY: `part` describes the caller's buffers past what was sent.
        unsafe { (real().sendmsg)(fd, &part, flags | libc::MSG_DONTWAIT) }
    })
}

/// `socket(2)`: glibc's, the new socket recorded.
///
/// # Safety
///
/// As `socket(2)`.
#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, kind: c_int, protocol: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let fd = unsafe { (real().socket)(domain, kind, protocol) };
    if let Some(entry) = fd::entry(fd) {
        let base = kind & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        entry.set_socket(kind & libc::SOCK_NONBLOCK != 0, base == libc::SOCK_STREAM);
    }
    fd
}

/// `connect(2)`: on a fiber and a blocking socket, a connect made non-blocking for the call,
/// then a park until it completes (for at most `SO_SNDTIMEO`, as the kernel's: then
/// `EINPROGRESS`).
///
/// # Safety
///
/// As `connect(2)`.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let (Some(worker), Some((entry, _))) = (on_fiber(), blocking_socket(fd)) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().connect)(fd, addr, len) };
    };
    let deadline = deadline(entry.timeout(libc::SO_SNDTIMEO));
    let mut waiter = Waiter::new(fd, entry);
    let seen = waiter.seen(Direction::Write);
    // SAFETY: the caller's contract.
    let (rc, code) = with_nonblocking(fd, || unsafe { (real().connect)(fd, addr, len) });
    if rc == 0 {
        return 0;
    }
    if code != libc::EINPROGRESS {
        set_errno(code);
        return -1;
    }
    let mut seen = seen;
    loop {
        match waiter.wait(worker, Direction::Write, seen, deadline, "connect (hooked libc call)") {
            Ok(()) => {}
            Err(Stop::TimedOut) => {
                set_errno(libc::EINPROGRESS);
                return -1;
            }
            Err(Stop::Failed) => return -1,
        }
        seen = waiter.seen(Direction::Write);
        let mut pfd = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        if unsafe { (real().poll)(&mut pfd, 1, 0) } <= 0 {
            continue; // woken before the connection completed
        }
        let mut error: c_int = 0;
        let mut elen = std::mem::size_of::<c_int>() as socklen_t;
        // SAFETY: `error` is valid for writes of `elen` bytes.
        let rc = unsafe {
            libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, (&raw mut error).cast(), &mut elen)
        };
        if rc != 0 {
            return -1;
        }
        if error != 0 {
            set_errno(error);
            return -1;
        }
        return 0;
    }
}

/// Runs `call` with `O_NONBLOCK` set on `fd`'s file description, then restores its flags;
/// the call's result and `errno`. For the calls that have no per-call non-blocking flag
/// (`connect`, `accept`): the window is those three system calls.
fn with_nonblocking(fd: RawFd, call: impl FnOnce() -> c_int) -> (c_int, c_int) {
    let real = real();
    // SAFETY: F_GETFL takes no argument.
    let flags = unsafe { (real.fcntl)(fd, libc::F_GETFL, 0) };
    if flags < 0 {
        return (-1, errno());
    }
    // SAFETY: F_SETFL takes the new flags as its argument.
    unsafe { (real.fcntl)(fd, libc::F_SETFL, (flags | libc::O_NONBLOCK) as c_ulong) };
    let rc = call();
    let code = errno();
    // SAFETY: as above, the flags as they were.
    unsafe { (real.fcntl)(fd, libc::F_SETFL, flags as c_ulong) };
    (rc, code)
}

/// `accept(2)`.
///
/// # Safety
///
/// As `accept(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's contract; accept is accept4 without flags.
    unsafe { accept4(fd, addr, len, 0) }
}

/// `accept4(2)`: on a fiber and a blocking listener, an accept made non-blocking for the
/// call and a park until a connection comes (for at most `SO_RCVTIMEO`: then `EAGAIN`); the
/// new socket recorded. Off a fiber glibc's, which waits again if it met the listener while
/// a fiber's accept had it non-blocking.
///
/// # Safety
///
/// As `accept4(2)`.
#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    let accepted = |new: c_int| {
        if let Some(entry) = fd::entry(new) {
            entry.set_socket(flags & libc::SOCK_NONBLOCK != 0, true);
        }
        new
    };
    let real = real();
    let Some((entry, _)) = blocking_socket(fd) else {
        // SAFETY: the caller's contract.
        let new = unsafe { (real.accept4)(fd, addr, len, flags) };
        return if new >= 0 { accepted(new) } else { new };
    };
    let Some(worker) = on_fiber() else {
        loop {
            // SAFETY: the caller's contract.
            let new = unsafe { (real.accept4)(fd, addr, len, flags) };
            if new >= 0 {
                return accepted(new);
            }
            if !would_block(errno()) || entry.timeout(libc::SO_RCVTIMEO).is_some() {
                return new;
            }
            let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { (real.poll)(&mut pfd, 1, -1) };
        }
    };
    let deadline = deadline(entry.timeout(libc::SO_RCVTIMEO));
    let mut waiter = Waiter::new(fd, entry);
    loop {
        let seen = waiter.seen(Direction::Read);
        // SAFETY: the caller's contract.
        let (new, code) = with_nonblocking(fd, || unsafe { (real.accept4)(fd, addr, len, flags) });
        if new >= 0 {
            return accepted(new);
        }
        if !would_block(code) {
            set_errno(code);
            return -1;
        }
        match waiter.wait(worker, Direction::Read, seen, deadline, "accept (hooked libc call)") {
            Ok(()) => {}
            Err(Stop::TimedOut) => {
                set_errno(libc::EAGAIN);
                return -1;
            }
            Err(Stop::Failed) => return -1,
        }
    }
}

/// `close(2)`: the descriptor forgotten (and deregistered) first, then glibc's.
///
/// # Safety
///
/// As `close(2)`.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if let Some(entry) = fd::entry(fd) {
        entry.forget();
    }
    // SAFETY: the caller's contract.
    unsafe { (real().close)(fd) }
}

/// `setsockopt(2)`: glibc's; `SO_RCVTIMEO` and `SO_SNDTIMEO` recorded.
///
/// # Safety
///
/// As `setsockopt(2)`.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    value: *const c_void,
    len: socklen_t,
) -> c_int {
    // SAFETY: the caller's contract.
    let rc = unsafe { (real().setsockopt)(fd, level, name, value, len) };
    let timeout = level == libc::SOL_SOCKET && (name == libc::SO_RCVTIMEO || name == libc::SO_SNDTIMEO);
    if rc == 0 && timeout && len as usize >= std::mem::size_of::<libc::timeval>() {
        if let Some(entry) = fd::entry(fd) {
            // SAFETY: the kernel accepted `value` as a timeval of `len` bytes.
            let tv = unsafe { std::ptr::read_unaligned(value.cast::<libc::timeval>()) };
            let micros = (tv.tv_sec as u64).saturating_mul(1_000_000).saturating_add(tv.tv_usec as u64);
            entry.set_timeout(name, (micros != 0).then(|| Duration::from_micros(micros)));
        }
    }
    rc
}

/// `fcntl(2)`, declared with its one optional argument as an integer: every command this
/// program may pass takes an integer or a pointer, which the x86_64 and aarch64 Linux calling
/// conventions pass in the same register whether the function is variadic or not. glibc's
/// is called the same way. `F_SETFL`'s `O_NONBLOCK` is recorded; a duplicate is forgotten.
///
/// # Safety
///
/// As `fcntl(2)`.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: the caller's contract.
    let rc = unsafe { (real().fcntl)(fd, cmd, arg) };
    if rc >= 0 {
        match cmd {
            libc::F_SETFL => {
                if let Some(entry) = fd::entry(fd) {
                    entry.set_nonblocking(arg as c_int & libc::O_NONBLOCK != 0);
                }
            }
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
                if let Some(entry) = fd::entry(rc) {
                    entry.forget();
                }
            }
            _ => {}
        }
    }
    rc
}

/// `ioctl(2)`, declared as [`fcntl`] is (one integer-or-pointer argument). `FIONBIO` is
/// recorded.
///
/// # Safety
///
/// As `ioctl(2)`.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: c_ulong, arg: c_ulong) -> c_int {
    // SAFETY: the caller's contract.
    let rc = unsafe { (real().ioctl)(fd, request, arg) };
    if rc == 0 && request == libc::FIONBIO as c_ulong && arg != 0 {
        if let Some(entry) = fd::entry(fd) {
            // SAFETY: FIONBIO's argument points to an int, which the kernel just read.
            let on = unsafe { *(arg as *const c_int) } != 0;
            entry.set_nonblocking(on);
        }
    }
    rc
}

/// `dup(2)`: the new number forgotten (learned anew on first use).
///
/// # Safety
///
/// As `dup(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let new = unsafe { (real().dup)(fd) };
    if let Some(entry) = fd::entry(new) {
        entry.forget();
    }
    new
}

/// `dup2(2)`: the target number, which the call closes, forgotten first.
///
/// # Safety
///
/// As `dup2(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, new: c_int) -> c_int {
    if fd != new {
        if let Some(entry) = fd::entry(new) {
            entry.forget();
        }
    }
    // SAFETY: the caller's contract.
    unsafe { (real().dup2)(fd, new) }
}

/// `dup3(2)`: as [`dup2`].
///
/// # Safety
///
/// As `dup3(2)`.
#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, new: c_int, flags: c_int) -> c_int {
    if fd != new {
        if let Some(entry) = fd::entry(new) {
            entry.forget();
        }
    }
    // SAFETY: the caller's contract.
    unsafe { (real().dup3)(fd, new, flags) }
}
