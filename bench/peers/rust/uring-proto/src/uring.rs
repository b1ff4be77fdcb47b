//! The completion driver: every socket operation of a fiber is a submission entry; the
//! entries queued during one loop pass go to the kernel in one `io_uring_enter`, which also
//! waits for a completion when no fiber is ready. Optional: multishot accept (one armed
//! accept per listener) and multishot recv from a provided buffer ring (one armed recv per
//! stream; data is copied from the kernel-chosen buffer into the fiber's buffer on `read`).
//!
//! Invariants:
//! - **lent until completed**: a single-shot operation points at memory on the parked fiber's
//!   stack (the buffer, the socket address); the fiber stays parked until that operation's
//!   completion is reaped, and [`Uring::quiesce`] cancels and reaps everything in flight
//!   before any fiber is dropped.
//! - **user_data names its owner**: a single-shot operation's user_data is its slot in `ops`;
//!   a multishot's carries [`MULTI`], the fd and the fd's generation, so a completion that
//!   arrives after the fd was closed (and its number reused) is recognised as stale and its
//!   buffer or accepted fd released; fire-and-forget operations (close, cancel) carry
//!   [`IGNORE`].
//! - **counted in flight**: `waiting + armed + ignored` is the number of completions still
//!   due; blocking with none due would never return, so it panics instead.
//! - **one pass, one enter**: entries are pushed without a syscall; `io_uring_enter` happens
//!   once per pass ([`Uring::pass`]), or early only when the submission queue is full.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::bufring::BufRing;
use crate::rt::{current, park, wake};

/// Submission queue entries (monoio's default).
const ENTRIES: u32 = 1024;
/// Provided buffers for multishot recv: count and size.
const BUF_ENTRIES: u16 = 256;
const BUF_SIZE: u32 = 4096;
const BGID: u16 = 0;
/// `IORING_ENTER_GETEVENTS` (the io-uring crate keeps its `sys` module private).
const ENTER_GETEVENTS: u32 = 1;

/// user_data bit of a multishot operation (bits 0..32: fd, 32..61: generation).
const MULTI: u64 = 1 << 63;
/// user_data of an operation whose completion is not waited for (close, cancel).
const IGNORE: u64 = 1 << 62;
/// With [`MULTI`]: a multishot accept (else a multishot recv).
const ACCEPT: u64 = 1 << 61;
const GEN_MASK: u64 = (1 << 29) - 1;

/// Reads that fell back to a single-shot recv because the buffer ring ran dry.
static NOBUFS_FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// How many reads in this process fell back to a single-shot recv because the provided buffer
/// ring ran dry (for tests).
pub fn nobufs_fallbacks() -> u64 {
    NOBUFS_FALLBACKS.load(Ordering::Relaxed)
}

/// What a multishot read or accept does next, decided under the fd state's borrow.
enum Step {
    Done(io::Result<usize>),
    Single,
    Arm(u64),
    Wait,
}

enum Op {
    Free,
    Waiting(usize),
    Done(i32),
}

/// Per-fd state of the multishot operations.
#[derive(Default)]
struct UFd {
    gen: u32,
    armed: bool,
    waiter: Option<usize>,
    /// Received buffers not yet read: (buffer id, length, bytes already read).
    data: VecDeque<(u16, u32, u32)>,
    eof: bool,
    err: Option<i32>,
    /// The buffer ring ran dry and ended the multishot recv: the next read is single-shot.
    nobufs: bool,
    /// Connections accepted by the multishot accept, not yet taken.
    accepted: VecDeque<RawFd>,
}

pub(crate) struct Uring {
    ring: RefCell<IoUring>,
    ops: RefCell<Vec<Op>>,
    free_ops: RefCell<Vec<usize>>,
    fds: RefCell<Vec<UFd>>,
    bufs: Option<BufRing>,
    defer: bool,
    waiting: Cell<usize>,
    armed: Cell<usize>,
    ignored: Cell<usize>,
    cqes: RefCell<Vec<(u64, i32, u32)>>,
}

fn os_err(res: i32) -> io::Error {
    io::Error::from_raw_os_error(-res)
}

impl Uring {
    pub(crate) fn new(multishot: bool, defer: bool) -> io::Result<Uring> {
        let mut b = IoUring::builder();
        if defer {
            b.setup_single_issuer().setup_defer_taskrun();
        }
        let ring = b.build(ENTRIES)?;
        let bufs = if multishot {
            Some(BufRing::new(&ring.submitter(), BUF_ENTRIES, BUF_SIZE, BGID)?)
        } else {
            None
        };
        Ok(Uring {
            ring: RefCell::new(ring),
            ops: RefCell::new(Vec::new()),
            free_ops: RefCell::new(Vec::new()),
            fds: RefCell::new(Vec::new()),
            bufs,
            defer,
            waiting: Cell::new(0),
            armed: Cell::new(0),
            ignored: Cell::new(0),
            cqes: RefCell::new(Vec::with_capacity(256)),
        })
    }

    pub(crate) fn multishot(&self) -> bool {
        self.bufs.is_some()
    }

    /// Queues `e` (no syscall unless the submission queue is full).
    fn push(&self, e: squeue::Entry) {
        let mut ring = self.ring.borrow_mut();
        // SAFETY: the memory `e` points at outlives the operation: a parked fiber's stack,
        // the driver's buffer ring, or nothing (close, cancel) (invariant "lent until completed").
        if unsafe { ring.submission().push(&e) }.is_ok() {
            return;
        }
        ring.submit().expect("io_uring_enter (submission queue full)");
        // SAFETY: as above.
        unsafe { ring.submission().push(&e) }.expect("submission queue full after a submit");
    }

    fn push_ignored(&self, e: squeue::Entry) {
        self.ignored.set(self.ignored.get() + 1);
        self.push(e.user_data(IGNORE));
    }

    /// Submits `e` for the running fiber and parks it until the completion; its result.
    fn op(&self, e: squeue::Entry) -> i32 {
        let id = {
            let mut ops = self.ops.borrow_mut();
            let op = Op::Waiting(current());
            match self.free_ops.borrow_mut().pop() {
                Some(id) => {
                    ops[id] = op;
                    id
                }
                None => {
                    ops.push(op);
                    ops.len() - 1
                }
            }
        };
        self.waiting.set(self.waiting.get() + 1);
        self.push(e.user_data(id as u64));
        loop {
            park();
            let mut ops = self.ops.borrow_mut();
            if let Op::Done(res) = ops[id] {
                ops[id] = Op::Free;
                self.free_ops.borrow_mut().push(id);
                return res;
            }
        }
    }

    fn with_fd<R>(&self, fd: RawFd, f: impl FnOnce(&mut UFd) -> R) -> R {
        let mut fds = self.fds.borrow_mut();
        let i = fd as usize;
        if fds.len() <= i {
            fds.resize_with(i + 1, UFd::default);
        }
        f(&mut fds[i])
    }

    fn multi_ud(fd: RawFd, gen: u32, accept: bool) -> u64 {
        MULTI | if accept { ACCEPT } else { 0 } | (gen as u64 & GEN_MASK) << 32 | fd as u32 as u64
    }

    pub(crate) fn accept(&self, lfd: RawFd) -> io::Result<RawFd> {
        if !self.multishot() {
            let e = opcode::Accept::new(types::Fd(lfd), std::ptr::null_mut(), std::ptr::null_mut())
                .flags(libc::SOCK_CLOEXEC)
                .build();
            let res = self.op(e);
            return if res < 0 { Err(os_err(res)) } else { Ok(res) };
        }
        loop {
            let step = self.with_fd(lfd, |st| {
                if let Some(fd) = st.accepted.pop_front() {
                    return Step::Done(Ok(fd as usize));
                }
                if let Some(e) = st.err.take() {
                    return Step::Done(Err(os_err(e)));
                }
                st.waiter = Some(current());
                if st.armed {
                    return Step::Wait;
                }
                st.armed = true;
                Step::Arm(Self::multi_ud(lfd, st.gen, true))
            });
            match step {
                Step::Done(r) => return r.map(|fd| fd as RawFd),
                Step::Arm(ud) => {
                    self.armed.set(self.armed.get() + 1);
                    let e = opcode::AcceptMulti::new(types::Fd(lfd)).flags(libc::SOCK_CLOEXEC).build();
                    self.push(e.user_data(ud));
                }
                Step::Wait | Step::Single => {}
            }
            park();
        }
    }

    pub(crate) fn connect(&self, fd: RawFd, addr: &libc::sockaddr_in) -> io::Result<()> {
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let e = opcode::Connect::new(types::Fd(fd), (addr as *const libc::sockaddr_in).cast(), len).build();
        let res = self.op(e);
        if res < 0 {
            Err(os_err(res))
        } else {
            Ok(())
        }
    }

    pub(crate) fn send(&self, fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        let e = opcode::Send::new(types::Fd(fd), buf.as_ptr(), buf.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build();
        let res = self.op(e);
        if res < 0 {
            Err(os_err(res))
        } else {
            Ok(res as usize)
        }
    }

    fn recv_single(&self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        let e = opcode::Recv::new(types::Fd(fd), buf.as_mut_ptr(), buf.len() as u32).build();
        let res = self.op(e);
        if res < 0 {
            Err(os_err(res))
        } else {
            Ok(res as usize)
        }
    }

    pub(crate) fn recv(&self, fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
        let Some(bufs) = &self.bufs else { return self.recv_single(fd, buf) };
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let step = self.with_fd(fd, |st| {
                if let Some((bid, len, off)) = st.data.front_mut() {
                    let src = &bufs.get(*bid, *len as usize)[*off as usize..];
                    let n = src.len().min(buf.len());
                    buf[..n].copy_from_slice(&src[..n]);
                    *off += n as u32;
                    if *off == *len {
                        bufs.give_back(*bid);
                        st.data.pop_front();
                    }
                    return Step::Done(Ok(n));
                }
                if st.eof {
                    return Step::Done(Ok(0));
                }
                if let Some(e) = st.err.take() {
                    return Step::Done(Err(os_err(e)));
                }
                if std::mem::take(&mut st.nobufs) {
                    return Step::Single;
                }
                st.waiter = Some(current());
                if st.armed {
                    return Step::Wait;
                }
                st.armed = true;
                Step::Arm(Self::multi_ud(fd, st.gen, false))
            });
            match step {
                Step::Done(r) => return r,
                // The buffer ring ran dry and ended the multishot: this read goes straight
                // into the fiber's buffer; the next one arms the multishot again.
                Step::Single => {
                    NOBUFS_FALLBACKS.fetch_add(1, Ordering::Relaxed);
                    return self.recv_single(fd, buf);
                }
                Step::Arm(ud) => {
                    self.armed.set(self.armed.get() + 1);
                    self.push(opcode::RecvMulti::new(types::Fd(fd), BGID).build().user_data(ud));
                }
                Step::Wait => {}
            }
            park();
        }
    }

    /// Closes `fd` through the ring (no syscall now), cancelling its armed multishot and
    /// releasing what it still holds.
    pub(crate) fn close(&self, fd: RawFd) {
        let (was_armed, held, accepted) = self.with_fd(fd, |st| {
            let held: Vec<u16> = st.data.drain(..).map(|(bid, _, _)| bid).collect();
            let accepted: Vec<RawFd> = st.accepted.drain(..).collect();
            let was_armed = st.armed;
            // A new generation: completions still due for the old one are stale.
            *st = UFd { gen: st.gen.wrapping_add(1), ..UFd::default() };
            (was_armed, held, accepted)
        });
        if let Some(bufs) = &self.bufs {
            held.into_iter().for_each(|bid| bufs.give_back(bid));
        }
        if was_armed {
            // Its last completion arrives stale; it is no longer counted as armed.
            self.armed.set(self.armed.get() - 1);
            self.push_ignored(
                opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all()).build(),
            );
        }
        for a in accepted {
            self.push_ignored(opcode::Close::new(types::Fd(a)).build());
        }
        self.push_ignored(opcode::Close::new(types::Fd(fd)).build());
    }

    /// One `io_uring_enter` for the pass: submits what the pass queued, waits for one
    /// completion if `block`; then reaps every completion.
    pub(crate) fn pass(&self, block: bool) {
        {
            let mut ring = self.ring.borrow_mut();
            let pending = ring.submission().len();
            if block {
                let due = self.waiting.get() + self.armed.get() + self.ignored.get();
                assert!(due > 0, "uring_proto: every fiber is parked and no I/O is in flight (deadlock)");
                loop {
                    match ring.submit_and_wait(1) {
                        Ok(_) => break,
                        Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                        Err(e) => panic!("io_uring_enter: {e}"),
                    }
                }
            } else if pending > 0 {
                let r = if self.defer {
                    // SAFETY: plain enter with GETEVENTS so that deferred task work runs.
                    unsafe {
                        ring.submitter().enter::<libc::sigset_t>(pending as u32, 0, ENTER_GETEVENTS, None)
                    }
                } else {
                    ring.submit()
                };
                if let Err(e) = r {
                    assert_eq!(e.raw_os_error(), Some(libc::EINTR), "io_uring_enter: {e}");
                }
            }
        }
        self.reap();
    }

    fn reap(&self) {
        let mut cqes = self.cqes.borrow_mut();
        cqes.clear();
        {
            let mut ring = self.ring.borrow_mut();
            cqes.extend(ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
        }
        for &(ud, res, flags) in cqes.iter() {
            self.complete(ud, res, flags);
        }
    }

    fn complete(&self, ud: u64, res: i32, flags: u32) {
        if ud == IGNORE {
            self.ignored.set(self.ignored.get() - 1);
            return;
        }
        if ud & MULTI == 0 {
            let mut ops = self.ops.borrow_mut();
            if let Op::Waiting(f) = ops[ud as usize] {
                ops[ud as usize] = Op::Done(res);
                self.waiting.set(self.waiting.get() - 1);
                wake(f);
            }
            return;
        }
        let fd = ud as u32 as RawFd;
        let gen = ((ud >> 32) & GEN_MASK) as u32;
        let accept = ud & ACCEPT != 0;
        let bid = cqueue::buffer_select(flags);
        let more = cqueue::more(flags);
        let stale = self.with_fd(fd, |st| {
            if st.gen as u64 & GEN_MASK != gen as u64 {
                return true;
            }
            if accept {
                match res {
                    r if r >= 0 => st.accepted.push_back(r),
                    r => st.err = Some(r),
                }
            } else {
                match (res, bid) {
                    (r, Some(bid)) if r > 0 => st.data.push_back((bid, r as u32, 0)),
                    (0, _) => st.eof = true,
                    (r, _) if r == -libc::ENOBUFS => st.nobufs = true,
                    (r, _) => st.err = Some(r),
                }
            }
            if !more {
                st.armed = false;
            }
            if let Some(w) = st.waiter.take() {
                wake(w);
            }
            false
        });
        if stale {
            // The fd was closed (its multishot cancelled) after this completion was posted.
            if let (Some(bufs), Some(bid)) = (&self.bufs, bid) {
                bufs.give_back(bid);
            }
            if accept && res >= 0 {
                self.push_ignored(opcode::Close::new(types::Fd(res)).build());
            }
        } else if !more {
            self.armed.set(self.armed.get() - 1);
        }
    }

    /// Cancels every operation in flight and reaps until no completion is due.
    pub(crate) fn quiesce(&self) {
        let waiting: Vec<usize> = {
            let ops = self.ops.borrow();
            ops.iter().enumerate().filter(|(_, op)| matches!(op, Op::Waiting(_))).map(|(i, _)| i).collect()
        };
        for id in waiting {
            self.push_ignored(opcode::AsyncCancel::new(id as u64).build());
        }
        let armed: Vec<RawFd> = {
            let fds = self.fds.borrow();
            fds.iter().enumerate().filter(|(_, st)| st.armed).map(|(fd, _)| fd as RawFd).collect()
        };
        for fd in armed {
            self.push_ignored(
                opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all()).build(),
            );
        }
        while self.waiting.get() + self.armed.get() + self.ignored.get() > 0 {
            self.pass(true);
        }
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        if let Some(bufs) = &self.bufs {
            bufs.unregister(&self.ring.borrow().submitter());
        }
    }
}
