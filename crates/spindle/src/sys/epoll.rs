//! epoll and eventfd, owned file descriptors, errors as `io::Error`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Readiness bits as epoll reports them.
pub(crate) const READABLE: u32 = libc::EPOLLIN as u32 | libc::EPOLLPRI as u32;
pub(crate) const WRITABLE: u32 = libc::EPOLLOUT as u32;
/// The peer closed its side (or the connection died): wakes readers and writers.
pub(crate) const CLOSED: u32 = libc::EPOLLRDHUP as u32 | libc::EPOLLHUP as u32 | libc::EPOLLERR as u32;

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// An epoll instance.
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
}

/// One readiness event: the registration token and the epoll bits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Event {
    pub(crate) token: u64,
    pub(crate) bits: u32,
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: plain system call; the result is checked and owned below.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Registers `fd`, edge-triggered, for reading, writing and hang-ups, under `token`.
    pub(crate) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLPRI | libc::EPOLLET)
                as u32,
            u64: token,
        };
        // SAFETY: both descriptors are valid for the call; `ev` is a valid epoll_event.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// The epoll instance's own descriptor (readable while it has events ready: another
    /// epoll instance can watch it).
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Registers `fd` one-shot for reading, disarmed: it reports nothing until
    /// [`arm_oneshot_readable`](Self::arm_oneshot_readable).
    pub(crate) fn add_disarmed(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLONESHOT as u32, u64: token };
        // SAFETY: as in `add`.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Arms a registration of [`add_disarmed`](Self::add_disarmed): it reports `fd` readable
    /// once (level: at once if it is readable now), then is disarmed again.
    pub(crate) fn arm_oneshot_readable(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32, u64: token };
        // SAFETY: as in `add`.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_MOD, fd, &mut ev) })?;
        Ok(())
    }

    /// Registers `fd` level-triggered for reading (the wake-up eventfd).
    pub(crate) fn add_level_readable(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: as in `add`.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Waits for events (`None` = forever, zero = poll) and appends them to `out`, whose
    /// capacity bounds how many are taken at once. EINTR counts as "no events".
    pub(crate) fn wait(&self, out: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        let timeout_ms = match timeout {
            None => -1,
            // Round up: waking before a timer's deadline would only make us wait again.
            Some(d) => d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int,
        };
        // Not zeroed: the kernel writes the first `n` entries and only those are read (zeroing
        // the 3 KiB would be a memset on every call, of entries never read).
        let mut raw: [std::mem::MaybeUninit<libc::epoll_event>; 256] = [std::mem::MaybeUninit::uninit(); 256];
        let max = raw.len().min(out.capacity().max(1)) as libc::c_int;
        // SAFETY: `raw` has room for `max` events (MaybeUninit<T> has T's layout); the epoll fd
        // is valid.
        let n = match unsafe {
            super::nocancel::epoll_wait(self.fd.as_raw_fd(), raw.as_mut_ptr().cast(), max, timeout_ms)
        } {
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(err) => return Err(err),
        };
        out.extend(raw[..n].iter().map(|e| {
            // SAFETY: epoll_wait initialised the first `n` entries.
            let e = unsafe { e.assume_init_ref() };
            Event { token: e.u64, bits: e.events }
        }));
        Ok(())
    }
}

/// An eventfd used to wake a worker blocked in `epoll_wait` from another thread.
#[derive(Debug)]
pub(crate) struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub(crate) fn new() -> io::Result<EventFd> {
        // SAFETY: plain system call; the result is checked and owned below.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(EventFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes the eventfd readable (wakes the epoll waiter). Never blocks.
    pub(crate) fn notify(&self) {
        let one: u64 = 1;
        // EAGAIN (counter full) still leaves it readable, which is all we need, so the result
        // is ignored.
        let _ = super::nocancel::write(self.fd.as_raw_fd(), &one.to_ne_bytes());
    }

    /// Resets the eventfd to not readable.
    pub(crate) fn drain(&self) {
        let mut value = [0u8; 8];
        // EAGAIN (already drained) is fine.
        let _ = super::nocancel::read(self.fd.as_raw_fd(), &mut value);
    }
}
