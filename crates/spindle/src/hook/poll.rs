//! The interposed waits on many descriptors: `poll`, `ppoll`, `select`, `pselect`,
//! `epoll_wait`, `epoll_pwait`. On a fiber, with a timeout other than zero, each first asks
//! the kernel without waiting; if nothing is ready, the fiber parks on the reactor
//! registrations of the descriptors (an epoll descriptor is readable when it has events)
//! until one of them has a new event or the timeout passes, and asks the kernel again,
//! without waiting, for the answer. Otherwise, and with a signal mask, glibc's.
//!
//! Invariant: **no readiness lost between the kernel's answer and the park.** Each
//! descriptor's event count is read before the kernel is asked, and the park registers
//! against those counts: an event in between makes the registration fail and the kernel is
//! asked again.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libc::{c_int, nfds_t, pollfd, sigset_t, timespec, timeval};

use super::common::{on_fiber, parked, set_errno};
use super::fd::{self, Waitable};
use super::real::real;
use crate::reactor::io::Direction;
use crate::reactor::registration::Unregister;
use crate::sched::worker::Worker;

/// One descriptor a fiber's wait watches, in one direction.
struct Watch {
    waitable: Arc<Waitable>,
    dir: Direction,
    seen: u32,
}

/// How a park on many descriptors ended.
enum Parked {
    /// Woken (an event, the deadline, or a spurious wake-up): ask the kernel again.
    Woken,
    /// None of the descriptors can be watched by the reactor, and there is no deadline.
    Unwatchable,
    /// Cancelled (`errno` is `ECANCELED`).
    Cancelled,
}

/// Parks the fiber until one of `watched` has an event newer than its count, or `deadline`.
/// Descriptors the reactor cannot watch (regular files, which the kernel always reports
/// ready anyway) are left out.
fn park_on_any(worker: &Worker, watched: &[Watch], deadline: Option<Instant>) -> Parked {
    parked(worker, Parked::Cancelled, || {
        let waker = crate::park::fiber_waker(worker);
        let mut guards = Vec::with_capacity(watched.len());
        for w in watched {
            let Ok(Some(reg)) = w.waitable.get() else { continue };
            if !reg.io.register(w.dir, w.seen, &waker) {
                return Parked::Woken; // an event came since the count was read: ask again
            }
            guards.push(Unregister { io: &reg.io, dir: w.dir, waker: &waker, timer: None });
        }
        if guards.is_empty() && deadline.is_none() {
            return Parked::Unwatchable;
        }
        let timer = deadline.map(|d| worker.add_timer(d, waker.clone()));
        let _timer = TimerGuard(timer);
        crate::park::park_on("poll (hooked libc call)");
        Parked::Woken
    })
}

/// Cancels a park's timer on every way out.
struct TimerGuard(Option<crate::sched::worker::TimerHandle>);

impl Drop for TimerGuard {
    fn drop(&mut self) {
        if let (Some(key), Some(worker)) = (self.0, crate::sched::worker::current()) {
            worker.cancel_timer(key);
        }
    }
}

/// The watches of a `pollfd` array, their counts read now.
fn watches(fds: &[pollfd]) -> Vec<Watch> {
    let mut out = Vec::with_capacity(fds.len());
    for p in fds {
        let Some(entry) = fd::entry(p.fd) else { continue };
        let waitable = entry.waitable(p.fd);
        let reads = p.events & (libc::POLLIN | libc::POLLPRI | libc::POLLRDHUP) != 0;
        let writes = p.events & libc::POLLOUT != 0;
        for (wanted, dir) in [(reads, Direction::Read), (writes, Direction::Write)] {
            if wanted {
                let seen = waitable.get().ok().flatten().map_or(0, |r| r.io.seq(dir));
                out.push(Watch { waitable: waitable.clone(), dir, seen });
            }
        }
    }
    out
}

/// A fiber's `poll`: asks the kernel without waiting, parks until a watched descriptor has
/// an event or `deadline`, and asks again.
fn fiber_poll(worker: &Worker, fds: *mut pollfd, nfds: nfds_t, deadline: Option<Instant>) -> c_int {
    let slice: &[pollfd] = if nfds == 0 || fds.is_null() {
        &[]
    } else {
        // SAFETY: the caller's contract: `fds` points to `nfds` pollfds.
        unsafe { std::slice::from_raw_parts(fds, nfds as usize) }
    };
    loop {
        let watched = watches(slice);
        // SAFETY: the caller's contract; no wait.
        let n = unsafe { (real().poll)(fds, nfds, 0) };
        if n != 0 {
            return n;
        }
        if deadline.is_some_and(|d| crate::sched::clock::now() >= d) {
            return 0;
        }
        match park_on_any(worker, &watched, deadline) {
            Parked::Woken => {}
            Parked::Cancelled => return -1,
            // Nothing the reactor can watch and no timeout: the kernel's own wait is all
            // there is (it blocks the worker, as without the hook).
            // SAFETY: the caller's contract.
            Parked::Unwatchable => return unsafe { (real().poll)(fds, nfds, -1) },
        }
    }
}

/// A timeout in milliseconds as a deadline (negative: none).
fn deadline_ms(timeout: c_int) -> Option<Instant> {
    (timeout >= 0).then(|| crate::sched::clock::now() + Duration::from_millis(timeout as u64))
}

/// A `timespec` timeout as a deadline; `Err` for an invalid one.
fn deadline_ts(ts: *const timespec) -> Result<Option<Instant>, ()> {
    if ts.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract: a non-null timeout points to a timespec.
    let ts = unsafe { *ts };
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(());
    }
    Ok(crate::sched::clock::now().checked_add(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)))
}

/// Whether `ts` is a timeout of zero (no wait: the C library's call as it is).
///
/// # Safety
///
/// `ts` is null or points to a timespec.
unsafe fn is_zero(ts: *const timespec) -> bool {
    // SAFETY: the caller's contract; checked non-null first.
    !ts.is_null() && unsafe { (*ts).tv_sec == 0 && (*ts).tv_nsec == 0 }
}

/// `poll(2)`.
///
/// # Safety
///
/// As `poll(2)`.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    match on_fiber() {
        Some(worker) if timeout != 0 => fiber_poll(worker, fds, nfds, deadline_ms(timeout)),
        // SAFETY: the caller's contract.
        _ => unsafe { (real().poll)(fds, nfds, timeout) },
    }
}

/// `ppoll(2)`: with a signal mask, glibc's.
///
/// # Safety
///
/// As `ppoll(2)`.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    nfds: nfds_t,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    // SAFETY: the caller's contract: a non-null timeout points to a timespec.
    let zero = unsafe { is_zero(timeout) };
    match on_fiber() {
        Some(worker) if mask.is_null() && !zero => match deadline_ts(timeout) {
            Ok(deadline) => fiber_poll(worker, fds, nfds, deadline),
            Err(()) => {
                set_errno(libc::EINVAL);
                -1
            }
        },
        // SAFETY: the caller's contract.
        _ => unsafe { (real().ppoll)(fds, nfds, timeout, mask) },
    }
}

/// A fiber's `select`: the sets as `pollfd`s, [`fiber_poll`], and the sets rewritten with
/// what is ready.
///
/// # Safety
///
/// As `select(2)`: each non-null set is valid for reads and writes.
unsafe fn fiber_select(
    worker: &Worker,
    nfds: c_int,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    deadline: Option<Instant>,
) -> c_int {
    if !(0..=libc::FD_SETSIZE as c_int).contains(&nfds) {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: (each closure) the set is null or valid, `fd` is below FD_SETSIZE.
    let is_set = |set: *mut libc::fd_set, fd: RawFd| !set.is_null() && unsafe { libc::FD_ISSET(fd, set) };
    let mut fds = Vec::new();
    for fd in 0..nfds {
        let mut events = 0;
        if is_set(readfds, fd) {
            events |= libc::POLLIN;
        }
        if is_set(writefds, fd) {
            events |= libc::POLLOUT;
        }
        if is_set(exceptfds, fd) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            fds.push(pollfd { fd, events, revents: 0 });
        }
    }
    let n = fiber_poll(worker, fds.as_mut_ptr(), fds.len() as nfds_t, deadline);
    if n < 0 {
        return n;
    }
    if fds.iter().any(|p| p.revents & libc::POLLNVAL != 0) {
        set_errno(libc::EBADF);
        return -1;
    }
    for set in [readfds, writefds, exceptfds] {
        if !set.is_null() {
            // SAFETY: a non-null set is valid for writes.
            unsafe { libc::FD_ZERO(set) };
        }
    }
    let mut ready = 0;
    for p in &fds {
        let (asked, got) = (p.events, p.revents);
        for (set, wanted, shown) in [
            (readfds, libc::POLLIN, libc::POLLIN | libc::POLLHUP | libc::POLLERR),
            (writefds, libc::POLLOUT, libc::POLLOUT | libc::POLLERR),
            (exceptfds, libc::POLLPRI, libc::POLLPRI),
        ] {
            if asked & wanted != 0 && got & shown != 0 {
                // SAFETY: the set was asked about, so it is non-null and valid for writes;
                // `p.fd` < nfds <= FD_SETSIZE.
                unsafe { libc::FD_SET(p.fd, set) };
                ready += 1;
            }
        }
    }
    ready
}

/// `select(2)`: on a fiber with a timeout other than zero, a [`poll`] that parks; the
/// timeout is left as Linux leaves it (the time not slept).
///
/// # Safety
///
/// As `select(2)`.
#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *mut timeval,
) -> c_int {
    // SAFETY: a non-null timeout points to a timeval.
    let tv = (!timeout.is_null()).then(|| unsafe { *timeout });
    let Some(worker) = on_fiber().filter(|_| tv.is_none_or(|t| t.tv_sec != 0 || t.tv_usec != 0)) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().select)(nfds, readfds, writefds, exceptfds, timeout) };
    };
    let deadline = match tv {
        None => None,
        Some(t) if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) => {
            set_errno(libc::EINVAL);
            return -1;
        }
        Some(t) => {
            crate::sched::clock::now().checked_add(Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000))
        }
    };
    // SAFETY: the caller's contract.
    let n = unsafe { fiber_select(worker, nfds, readfds, writefds, exceptfds, deadline) };
    if let (Some(d), false) = (deadline, timeout.is_null()) {
        let left = d.saturating_duration_since(crate::sched::clock::now());
        // SAFETY: a non-null timeout is valid for writes.
        unsafe { *timeout = timeval { tv_sec: left.as_secs() as _, tv_usec: left.subsec_micros() as _ } };
    }
    n
}

/// `pselect(2)`: with a signal mask, glibc's.
///
/// # Safety
///
/// As `pselect(2)`.
#[no_mangle]
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *const timespec,
    mask: *const sigset_t,
) -> c_int {
    // SAFETY: the caller's contract: a non-null timeout points to a timespec.
    let zero = unsafe { is_zero(timeout) };
    let Some(worker) = on_fiber().filter(|_| mask.is_null() && !zero) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().pselect)(nfds, readfds, writefds, exceptfds, timeout, mask) };
    };
    let Ok(deadline) = deadline_ts(timeout) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    // SAFETY: the caller's contract.
    unsafe { fiber_select(worker, nfds, readfds, writefds, exceptfds, deadline) }
}

/// A fiber's `epoll_wait`: the epoll descriptor is readable while it has events.
fn fiber_epoll_wait(
    worker: &Worker,
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    deadline: Option<Instant>,
) -> c_int {
    let Some(entry) = fd::entry(epfd) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().epoll_wait)(epfd, events, max, -1) };
    };
    let waitable = entry.waitable(epfd);
    loop {
        let seen = waitable.get().ok().flatten().map_or(0, |r| r.io.seq(Direction::Read));
        // SAFETY: the caller's contract; no wait.
        let n = unsafe { (real().epoll_wait)(epfd, events, max, 0) };
        if n != 0 {
            return n;
        }
        if deadline.is_some_and(|d| crate::sched::clock::now() >= d) {
            return 0;
        }
        let watch = [Watch { waitable: waitable.clone(), dir: Direction::Read, seen }];
        match park_on_any(worker, &watch, deadline) {
            Parked::Woken => {}
            Parked::Cancelled => return -1,
            // SAFETY: the caller's contract (the reactor cannot watch this descriptor).
            Parked::Unwatchable => return unsafe { (real().epoll_wait)(epfd, events, max, -1) },
        }
    }
}

/// `epoll_wait(2)`.
///
/// # Safety
///
/// As `epoll_wait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    match on_fiber() {
        Some(worker) if timeout != 0 && max > 0 => {
            fiber_epoll_wait(worker, epfd, events, max, deadline_ms(timeout))
        }
        // SAFETY: the caller's contract.
        _ => unsafe { (real().epoll_wait)(epfd, events, max, timeout) },
    }
}

/// `epoll_pwait(2)`: with a signal mask, glibc's.
///
/// # Safety
///
/// As `epoll_pwait(2)`.
#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
    mask: *const sigset_t,
) -> c_int {
    match on_fiber() {
        Some(worker) if mask.is_null() && timeout != 0 && max > 0 => {
            fiber_epoll_wait(worker, epfd, events, max, deadline_ms(timeout))
        }
        // SAFETY: the caller's contract.
        _ => unsafe { (real().epoll_pwait)(epfd, events, max, timeout, mask) },
    }
}
