//! A fiber's waits during one interposed call on one descriptor (module doc of `hook`,
//! "blocking semantics, parked"): which descriptors wait here (sockets the program left
//! blocking), the call's deadline from the socket's timeout, and the park on the reactor
//! registration, kept for the call's later attempts.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libc::c_int;

use super::common::{parked, set_errno};
use super::fd::{self, Entry, Waitable};
use crate::reactor::io::Direction;
use crate::sched::worker::Worker;

/// The entry of `fd` if a fiber's call on it must be made to wait here: a socket the
/// program left blocking.
#[inline]
pub(super) fn blocking_socket(fd: RawFd) -> Option<(&'static Entry, bool)> {
    let entry = fd::entry(fd)?;
    let known = entry.known(fd);
    (known.socket && !known.nonblocking).then_some((entry, known.stream))
}

/// The deadline a socket timeout sets for a call starting now.
pub(super) fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| crate::sched::clock::now().checked_add(t))
}

/// A fiber's waits on one descriptor during one call: the registration, once made, kept for
/// the call's later attempts.
pub(super) struct Waiter {
    fd: RawFd,
    entry: &'static Entry,
    waitable: Option<Arc<Waitable>>,
}

/// How a wait ended, when not with readiness.
pub(super) enum Stop {
    /// The call's deadline passed.
    TimedOut,
    /// The wait failed (`errno` is set): cancellation, or a registration error.
    Failed,
}

impl Waiter {
    pub(super) fn new(fd: RawFd, entry: &'static Entry) -> Waiter {
        Waiter { fd, entry, waitable: None }
    }

    /// The readiness event count of `dir` to pass to [`Waiter::wait`], read before the
    /// attempt it follows: 0 before the descriptor is registered (registering reports its
    /// readiness at that moment as event 1, so nothing between the attempt and the wait is
    /// lost).
    pub(super) fn seen(&self, dir: Direction) -> u32 {
        self.waitable.as_ref().and_then(|w| w.registration.get()).map_or(0, |r| r.io.seq(dir))
    }

    /// Parks the fiber until an event of `dir` newer than `seen`, or `deadline`.
    pub(super) fn wait(
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

/// [`blocking_socket`], unless the call's own flags ask for a non-blocking one.
pub(super) fn blocking_socket_unless(fd: RawFd, flags: c_int) -> Option<(&'static Entry, bool)> {
    if flags & libc::MSG_DONTWAIT != 0 {
        return None;
    }
    blocking_socket(fd)
}

pub(super) fn would_block(code: c_int) -> bool {
    code == libc::EAGAIN || code == libc::EWOULDBLOCK
}
