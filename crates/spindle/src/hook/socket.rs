//! The interposed descriptor calls: `socket`, `connect`, `accept`, `accept4`, `close`,
//! `setsockopt`, `fcntl`, `ioctl` and the `dup` family. `connect` and `accept` on a fiber and
//! a socket the program left blocking are made non-blocking for the call (`O_NONBLOCK` set
//! and restored: they have no per-call flag) and park between attempts (module `wait`); the
//! calls that create, change or close descriptors keep the descriptor table current (module
//! `fd`); otherwise glibc's call.

use std::os::fd::RawFd;
use std::time::Duration;

use libc::{c_int, c_ulong, c_void, sockaddr, socklen_t};

use super::common::{errno, on_fiber, set_errno};
use super::fd;
use super::real::real;
use super::wait::{blocking_socket, deadline, would_block, Stop, Waiter};
use crate::reactor::io::Direction;

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
