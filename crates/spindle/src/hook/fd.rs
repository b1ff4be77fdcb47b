//! What the interposed calls know of each descriptor: whether it is a socket or a file (a
//! regular file or a block device), whether the program made it non-blocking, its `SO_RCVTIMEO` / `SO_SNDTIMEO`, and its reactor
//! registration once a fiber has waited on it.
//!
//! # Invariants
//!
//! - **No allocation to look up.** The table is a static array indexed by descriptor number
//!   (zeroed memory in the program's BSS: only the pages of descriptors in use are ever
//!   touched), its entries atomics, so that a lookup from any thread, a signal handler
//!   included, takes no lock and allocates nothing. Descriptors past [`TABLE_SIZE`] have no
//!   entry and pass through.
//! - **Learned once, then told.** An entry is learned from the kernel the first time a fiber
//!   uses its descriptor (`fstat`, `fcntl(F_GETFL)`, the two timeouts: [`Entry::learn`]), or
//!   set outright when an interposed call creates the descriptor (`socket`, `accept`); after
//!   that the interposed `fcntl`, `ioctl` and `setsockopt` keep it current, and `close` and
//!   the `dup` family forget it ([`Entry::forget`]), so that a reused number is learned anew.
//! - **A registration outlives its waiters.** The registration is shared (`Arc`) between the
//!   entry and the fibers waiting on it; `close` takes it out of the entry and deregisters
//!   it before the descriptor closes (module `reactor::registration`, "forgotten before the
//!   close"), while a waiter still holding it keeps its memory valid.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::reactor::registration::Registration;

use super::real::real;

/// Descriptors with an entry: `0..TABLE_SIZE`.
pub(crate) const TABLE_SIZE: usize = 1 << 20;

/// The entry has been learned or set (the other bits are meaningful).
const KNOWN: u32 = 1;
/// The descriptor is a socket.
const SOCKET: u32 = 2;
/// The program made it non-blocking.
const NONBLOCK: u32 = 4;
/// A stream socket (a blocking send returns once every byte went out).
const STREAM: u32 = 8;
/// A regular file or a block device: data calls that may wait for the disk (module `file`).
const FILE: u32 = 16;
/// A file on which a non-waiting write (`RWF_NOWAIT`) was refused as unsupported: its
/// writes go straight to the file pool.
const NO_NOWAIT_WRITE: u32 = 32;

/// One descriptor's entry (module doc).
pub(super) struct Entry {
    state: AtomicU32,
    /// `SO_RCVTIMEO` and `SO_SNDTIMEO` in microseconds; 0: none (the kernel's "no timeout").
    recv_timeout: AtomicU64,
    send_timeout: AtomicU64,
    registration: Mutex<Option<Arc<Waitable>>>,
}

/// A descriptor's reactor registration, made on its first wait.
pub(super) struct Waitable {
    fd: RawFd,
    pub(super) registration: OnceLock<Registration>,
}

impl Waitable {
    /// The registration, made with the calling worker's reactor on first use.
    pub(super) fn get(&self) -> std::io::Result<Option<&Registration>> {
        Registration::get_or_register(&self.registration, self.fd)
    }
}

impl Drop for Waitable {
    fn drop(&mut self) {
        if let Some(reg) = self.registration.get() {
            reg.deregister();
        }
    }
}

static TABLE: [Entry; TABLE_SIZE] = [const { Entry::new() }; TABLE_SIZE];

/// The entry of `fd`, if it has one.
#[inline]
pub(super) fn entry(fd: RawFd) -> Option<&'static Entry> {
    usize::try_from(fd).ok().and_then(|i| TABLE.get(i))
}

/// What a fiber's call needs to know of a descriptor.
#[derive(Clone, Copy)]
pub(super) struct Known {
    pub(super) socket: bool,
    pub(super) nonblocking: bool,
    pub(super) stream: bool,
    pub(super) file: bool,
}

impl Entry {
    const fn new() -> Entry {
        Entry {
            state: AtomicU32::new(0),
            recv_timeout: AtomicU64::new(0),
            send_timeout: AtomicU64::new(0),
            registration: Mutex::new(None),
        }
    }

    /// What is known of descriptor `fd` (this entry's), learned from the kernel first if
    /// nothing is.
    pub(super) fn known(&self, fd: RawFd) -> Known {
        let mut state = self.state.load(Ordering::Acquire);
        if state & KNOWN == 0 {
            state = self.learn(fd);
        }
        Known {
            socket: state & SOCKET != 0,
            nonblocking: state & NONBLOCK != 0,
            stream: state & STREAM != 0,
            file: state & FILE != 0,
        }
    }

    /// Whether non-waiting writes (`RWF_NOWAIT`) are known to be refused on this file.
    pub(super) fn no_nowait_write(&self) -> bool {
        self.state.load(Ordering::Relaxed) & NO_NOWAIT_WRITE != 0
    }

    /// Records that the file refused a non-waiting write as unsupported.
    pub(super) fn set_no_nowait_write(&self) {
        let _ = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
            (s & FILE != 0).then_some(s | NO_NOWAIT_WRITE)
        });
    }

    /// Asks the kernel what descriptor `fd` is ("learned once, then told").
    fn learn(&self, fd: RawFd) -> u32 {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `stat` is valid for writes of one `struct stat`.
        let format = if unsafe { libc::fstat(fd, stat.as_mut_ptr()) } == 0 {
            // SAFETY: fstat succeeded, so it filled `stat`.
            unsafe { stat.assume_init() }.st_mode & libc::S_IFMT
        } else {
            0
        };
        let socket = format == libc::S_IFSOCK;
        // SAFETY: F_GETFL takes no argument and only reads the descriptor's flags.
        let flags = unsafe { (real().fcntl)(fd, libc::F_GETFL, 0) };
        let mut state = KNOWN;
        if socket {
            state |= SOCKET;
            if option_of(fd, libc::SO_TYPE) == Some(libc::SOCK_STREAM) {
                state |= STREAM;
            }
            self.recv_timeout.store(timeout_of(fd, libc::SO_RCVTIMEO), Ordering::Relaxed);
            self.send_timeout.store(timeout_of(fd, libc::SO_SNDTIMEO), Ordering::Relaxed);
        }
        if format == libc::S_IFREG || format == libc::S_IFBLK {
            state |= FILE;
        }
        if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
            state |= NONBLOCK;
        }
        self.state.store(state, Ordering::Release);
        state
    }

    /// Records a socket an interposed call has just made (`socket`, `accept`).
    pub(super) fn set_socket(&self, nonblocking: bool, stream: bool) {
        self.forget();
        self.recv_timeout.store(0, Ordering::Relaxed);
        self.send_timeout.store(0, Ordering::Relaxed);
        let state = KNOWN | SOCKET | if nonblocking { NONBLOCK } else { 0 } | if stream { STREAM } else { 0 };
        self.state.store(state, Ordering::Release);
    }

    /// Records the program's `O_NONBLOCK` (or `FIONBIO`) setting, if the entry is known.
    pub(super) fn set_nonblocking(&self, on: bool) {
        let _ = self.state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
            (s & KNOWN != 0).then_some(if on { s | NONBLOCK } else { s & !NONBLOCK })
        });
    }

    /// Records a timeout the program set with `setsockopt` (`SO_RCVTIMEO` or `SO_SNDTIMEO`).
    pub(super) fn set_timeout(&self, option: libc::c_int, timeout: Option<Duration>) {
        let micros = timeout.map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1));
        match option {
            libc::SO_RCVTIMEO => self.recv_timeout.store(micros, Ordering::Relaxed),
            libc::SO_SNDTIMEO => self.send_timeout.store(micros, Ordering::Relaxed),
            _ => {}
        }
    }

    /// The receive (`SO_RCVTIMEO`) or send (`SO_SNDTIMEO`) timeout.
    pub(super) fn timeout(&self, option: libc::c_int) -> Option<Duration> {
        let micros = match option {
            libc::SO_RCVTIMEO => self.recv_timeout.load(Ordering::Relaxed),
            _ => self.send_timeout.load(Ordering::Relaxed),
        };
        (micros != 0).then(|| Duration::from_micros(micros))
    }

    /// The descriptor's waitable registration, made on first use.
    pub(super) fn waitable(&self, fd: RawFd) -> Arc<Waitable> {
        let mut slot = crate::lock::lock(&self.registration);
        slot.get_or_insert_with(|| Arc::new(Waitable { fd, registration: OnceLock::new() })).clone()
    }

    /// Forgets everything about the descriptor (it is closing, or its number now names
    /// another one): the next use learns it anew. Deregisters it from the reactor, unless a
    /// waiter still holds the registration (then the last one does, when it lets go).
    pub(super) fn forget(&self) {
        self.state.store(0, Ordering::Release);
        let taken = crate::lock::lock(&self.registration).take();
        // Deregistered now, before the close, even if a waiter still holds it (a second
        // deregistration, by the last holder's drop, finds the slot gone and does nothing).
        if let Some(reg) = taken.as_ref().and_then(|w| w.registration.get()) {
            reg.deregister();
        }
    }
}

/// An integer socket option of `fd`, if the kernel gives it.
fn option_of(fd: RawFd, option: libc::c_int) -> Option<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` is valid for writes of `len` bytes, the size of an integer option.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, option, (&raw mut value).cast(), &mut len) };
    (rc == 0).then_some(value)
}

/// A socket's timeout option as the kernel has it, in microseconds (0: none).
fn timeout_of(fd: RawFd, option: libc::c_int) -> u64 {
    let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
    let mut len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
    // SAFETY: `tv` is valid for writes of `len` bytes, the size of the option's value.
    let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, option, (&raw mut tv).cast(), &mut len) };
    if rc != 0 {
        return 0;
    }
    (tv.tv_sec as u64).saturating_mul(1_000_000).saturating_add(tv.tv_usec as u64)
}
