//! The readiness driver, as spindle's reactor works: a socket operation is tried first; on
//! `EAGAIN` the socket is registered with epoll (once, edge-triggered, for reading and
//! writing) and the fiber parks until an event for its direction arrives.
//!
//! Like spindle (`net/source.rs`, "short-transfer rule"), a read that returned less than it
//! was offered, or a write that sent less, drained the socket: the next call waits for an
//! event instead of paying for an `EAGAIN` first.
//!
//! Invariants:
//! - **flags are edges seen**: `readable`/`writable` are set by an event and cleared when an
//!   operation returned `EAGAIN` or moved less than offered; a fiber waits only after its flag
//!   was cleared, so an edge that arrives later sets it again and wakes the fiber (epoll
//!   reports edges after the `EAGAIN` or the draining transfer).
//! - **one waiter per direction**: a socket has at most one fiber parked for reading and one
//!   for writing (one reader and one writer per socket in every use here).

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;

use crate::rt::{current, park, wake};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

#[derive(Default, Clone)]
struct FdState {
    registered: bool,
    readable: bool,
    writable: bool,
    reader: Option<usize>,
    writer: Option<usize>,
}

pub(crate) struct Epoll {
    epfd: RawFd,
    fds: RefCell<Vec<FdState>>,
    events: RefCell<Vec<libc::epoll_event>>,
    /// Fibers parked here.
    waiting: Cell<usize>,
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall, no pointers.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        let events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        Ok(Epoll { epfd, fds: RefCell::new(Vec::new()), events: RefCell::new(events), waiting: Cell::new(0) })
    }

    /// Parks the running fiber until `fd` is ready in `dir`, after an operation returned
    /// `EAGAIN`.
    pub(crate) fn wait(&self, fd: RawFd, dir: Dir) -> io::Result<()> {
        {
            let mut fds = self.fds.borrow_mut();
            let i = fd as usize;
            if fds.len() <= i {
                fds.resize(i + 1, FdState::default());
            }
            let st = &mut fds[i];
            if !st.registered {
                let mut ev = libc::epoll_event {
                    events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
                    u64: fd as u64,
                };
                // SAFETY: `ev` is a valid epoll_event for the duration of the call.
                if unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                    return Err(io::Error::last_os_error());
                }
                st.registered = true;
            }
            let (flag, waiter) = match dir {
                Dir::Read => (&mut st.readable, &mut st.reader),
                Dir::Write => (&mut st.writable, &mut st.writer),
            };
            *flag = false;
            assert!(waiter.is_none(), "uring_proto: two fibers wait on one socket in one direction");
            *waiter = Some(current());
        }
        self.waiting.set(self.waiting.get() + 1);
        loop {
            park();
            let fds = self.fds.borrow();
            let st = &fds[fd as usize];
            let ready = match dir {
                Dir::Read => st.readable,
                Dir::Write => st.writable,
            };
            if ready {
                return Ok(());
            }
        }
    }

    /// Whether a call in `dir` is known to find `fd` drained (registered, and no event since
    /// the last `EAGAIN` or short transfer).
    pub(crate) fn drained(&self, fd: RawFd, dir: Dir) -> bool {
        let fds = self.fds.borrow();
        fds.get(fd as usize).is_some_and(|st| {
            st.registered
                && !match dir {
                    Dir::Read => st.readable,
                    Dir::Write => st.writable,
                }
        })
    }

    /// Records a short transfer: the socket is drained in `dir` until its next event (only
    /// once registered: before that no event would tell).
    pub(crate) fn note_drained(&self, fd: RawFd, dir: Dir) {
        if let Some(st) = self.fds.borrow_mut().get_mut(fd as usize).filter(|st| st.registered) {
            match dir {
                Dir::Read => st.readable = false,
                Dir::Write => st.writable = false,
            }
        }
    }

    /// One `epoll_wait` (timeout in ms, -1 = until an event): sets flags, wakes waiters.
    pub(crate) fn poll(&self, timeout: i32) {
        assert!(
            timeout == 0 || self.waiting.get() > 0,
            "uring_proto: every fiber is parked and none waits for I/O (deadlock)"
        );
        let mut events = self.events.borrow_mut();
        // SAFETY: `events` is a live buffer of `events.len()` epoll_event entries.
        let n = unsafe { libc::epoll_wait(self.epfd, events.as_mut_ptr(), events.len() as i32, timeout) };
        if n < 0 {
            let e = io::Error::last_os_error();
            assert_eq!(e.kind(), io::ErrorKind::Interrupted, "epoll_wait: {e}");
            return;
        }
        let mut fds = self.fds.borrow_mut();
        for ev in &events[..n as usize] {
            let Some(st) = fds.get_mut(ev.u64 as usize) else { continue };
            let bits = ev.events as i32;
            if bits & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) != 0 {
                st.readable = true;
                if let Some(f) = st.reader.take() {
                    self.waiting.set(self.waiting.get() - 1);
                    wake(f);
                }
            }
            if bits & (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) != 0 {
                st.writable = true;
                if let Some(f) = st.writer.take() {
                    self.waiting.set(self.waiting.get() - 1);
                    wake(f);
                }
            }
        }
    }

    /// Forgets `fd` before it is closed (closing removes it from the epoll set).
    pub(crate) fn forget(&self, fd: RawFd) {
        if let Some(st) = self.fds.borrow_mut().get_mut(fd as usize) {
            let parked = st.reader.is_some() as usize + st.writer.is_some() as usize;
            self.waiting.set(self.waiting.get() - parked);
            *st = FdState::default();
        }
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own the epoll fd.
        unsafe { libc::close(self.epfd) };
    }
}
