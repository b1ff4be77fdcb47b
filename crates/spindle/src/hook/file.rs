//! The interposed calls on files, which have no readiness: a fiber's call that may wait for
//! the disk runs on the runtime's file pool while the fiber parks (module `offload`).
//!
//! - **Data calls** (`read`, `write`, `readv`, `writev` — dispatched here by module
//!   `transfer` — and the `pread` / `pwrite` families) on a regular file or a block device,
//!   when they move at most [`INLINE_MAX`] bytes, first try the call on the worker without
//!   waiting (`RWF_NOWAIT`: the kernel moves what the page cache holds, and refuses with
//!   `EAGAIN` what would need the disk); what is left goes to the file pool as the plain call.
//!   So a small read of cached data costs one system call on the worker, a read that would
//!   wait for the disk parks the fiber, and a large one is copied on the pool, not on the
//!   worker (a copy of megabytes holds a worker as long as a computation would). A file system
//!   that refuses non-waiting writes (`EOPNOTSUPP`: buffered writes on most) is remembered per
//!   descriptor, and that descriptor's writes go to the pool directly.
//! - **Calls on paths** (`open`, `openat`, `creat`, the `stat` family) and **`fsync` /
//!   `fdatasync`** on a file run on the pool: a path lookup may read directories from the
//!   disk (and opening a FIFO waits for its other end), and a sync waits for the disk.
//! - **Semantics are the plain call's.** Results, short counts and `errno` are those of the
//!   call made on a thread: a read returns short only at the end of the file (a short
//!   non-waiting read is finished on the pool), a vectored call moves its iovecs in order,
//!   the file position moves as the plain call moves it, an error after some bytes returns
//!   their count.
//! - Off a fiber, and on descriptors that are not files (pipes, terminals, other devices),
//!   every call is glibc's.
//!
//! Not covered: std's `fs::metadata` and `File::metadata` (std calls `statx` through a
//! dynamic lookup, which finds glibc's unless the program exports spindle's symbols with
//! `-C link-arg=-rdynamic`), directory reads (`opendir`, `readdir`), `copy_file_range`,
//! `sendfile`, `ftruncate` and `fallocate`: they run on the worker (use `spindle::fs`).

use std::os::fd::RawFd;

use libc::{c_char, c_int, c_uint, c_void, iovec, off64_t, off_t, size_t, ssize_t};

use super::common::{errno, on_fiber};
use super::fd::{self, Entry};
use super::iov::Iovecs;
use super::offload::{offload, Lent};
use super::real::real;
use crate::sched::worker::Worker;

/// The entry of `fd` if a fiber's data call on it must not wait on the worker: a regular
/// file or a block device.
#[inline]
pub(super) fn file(fd: RawFd) -> Option<&'static Entry> {
    let entry = fd::entry(fd)?;
    entry.known(fd).file.then_some(entry)
}

/// Which way a data call moves bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    Read,
    Write,
}

/// The offset of a call that uses and moves the file position (`read`, `readv`, ...), as
/// `preadv2` takes it.
pub(super) const POSITION: i64 = -1;

/// The most bytes a call moves on the worker (without waiting): a larger transfer goes to the
/// blocking pool whole, so that copying it does not hold the worker from its other fibers.
pub(super) const INLINE_MAX: usize = 64 << 10;

/// The most iovecs one call takes (the kernel's `UIO_MAXIOV`); more is `EINVAL`.
const IOV_MAX: c_int = 1024;

/// `preadv2` / `pwritev2` of `iovs` at `offset` (or [`POSITION`]).
///
/// # Safety
///
/// The iovecs describe memory valid for the transfer.
unsafe fn vectored(fd: RawFd, iovs: &mut [iovec], offset: i64, flags: c_int, dir: Dir) -> ssize_t {
    let count = iovs.len() as c_int;
    match dir {
        // SAFETY: the caller's contract.
        Dir::Read => unsafe { libc::preadv2(fd, iovs.as_ptr(), count, offset, flags) },
        // SAFETY: the caller's contract.
        Dir::Write => unsafe { libc::pwritev2(fd, iovs.as_ptr(), count, offset, flags) },
    }
}

/// The offset `done` bytes into a call at `offset`.
fn past(offset: i64, done: usize) -> i64 {
    if offset == POSITION {
        POSITION
    } else {
        offset.saturating_add(done as i64)
    }
}

/// A fiber's data call on a file (module doc): `count` iovecs at `iov`, at `offset` (or
/// [`POSITION`]).
///
/// # Safety
///
/// As `preadv(2)` / `pwritev(2)`: the iovecs describe memory valid for the transfer.
pub(super) unsafe fn transfer(
    worker: &Worker,
    fd: RawFd,
    entry: &'static Entry,
    iov: *const iovec,
    count: c_int,
    offset: i64,
    dir: Dir,
) -> ssize_t {
    if count <= 0 || count > IOV_MAX {
        // Nothing to move, or a call the kernel refuses at once: the plain call answers.
        // SAFETY: the caller's contract.
        let mut iovs = unsafe { Iovecs::from_raw(iov, count.max(0) as usize) };
        // SAFETY: as above.
        return unsafe { vectored(fd, iovs.rest(), offset, 0, dir) };
    }
    // SAFETY: the caller's contract: `iov` points to `count` iovecs.
    let mut iovs = unsafe { Iovecs::from_raw(iov, count as usize) };
    let len = iovs.len();
    let mut done = 0usize;
    if len <= INLINE_MAX && (dir == Dir::Read || !entry.no_nowait_write()) {
        loop {
            // SAFETY: the rest of the caller's iovecs.
            let n = unsafe { vectored(fd, iovs.rest(), past(offset, done), libc::RWF_NOWAIT, dir) };
            if n > 0 {
                done += n as usize;
                iovs.advance(n as usize);
                if done >= len {
                    return done as ssize_t;
                }
                continue;
            }
            if n == 0 {
                return done as ssize_t; // the end of the file (or nothing to move)
            }
            match errno() {
                libc::EAGAIN => break,
                libc::EOPNOTSUPP => {
                    if dir == Dir::Write {
                        entry.set_no_nowait_write();
                    }
                    break;
                }
                // Any other error is the plain call's too; after some bytes, their count.
                _ => return if done > 0 { done as ssize_t } else { -1 },
            }
        }
    }
    let rest = Lent(iovs);
    let at = past(offset, done);
    let call = match dir {
        Dir::Read => "file read (hooked libc call)",
        Dir::Write => "file write (hooked libc call)",
    };
    let n = offload(worker, call, move || {
        let mut iovs = rest.get();
        // SAFETY: the caller's iovecs past what was moved; the fiber stays in the call
        // until this job ends (module `offload`).
        unsafe { vectored(fd, iovs.rest(), at, 0, dir) as i64 }
    });
    if n < 0 {
        return if done > 0 { done as ssize_t } else { -1 };
    }
    (done + n as usize) as ssize_t
}

/// A one-buffer data call on a file.
///
/// # Safety
///
/// `buf` is valid for `len` bytes of the transfer.
pub(super) unsafe fn transfer_one(
    worker: &Worker,
    fd: RawFd,
    entry: &'static Entry,
    buf: *mut c_void,
    len: size_t,
    offset: i64,
    dir: Dir,
) -> ssize_t {
    let iov = iovec { iov_base: buf, iov_len: len };
    // SAFETY: the caller's contract.
    unsafe { transfer(worker, fd, entry, &iov, 1, offset, dir) }
}

/// Defines the interposed positioned calls: each takes the fiber's path on a file with a
/// valid offset, glibc's otherwise.
macro_rules! positioned {
    ($($(#[$doc:meta])* $name:ident($buf:ident: $buf_ty:ty, $len:ident: $len_ty:ty, $off_ty:ty) => $one:ident, $dir:expr;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// As the C function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, $buf: $buf_ty, $len: $len_ty, offset: $off_ty) -> ssize_t {
            if offset >= 0 {
                if let (Some(worker), Some(entry)) = (on_fiber(), file(fd)) {
                    // SAFETY: the caller's contract.
                    return unsafe { positioned!(@call $one, worker, fd, entry, $buf, $len, offset as i64, $dir) };
                }
            }
            // SAFETY: the caller's contract.
            unsafe { (real().$name)(fd, $buf, $len, offset) }
        }
    )*};
    (@call one, $worker:ident, $fd:ident, $entry:ident, $buf:ident, $len:ident, $off:expr, $dir:expr) => {
        transfer_one($worker, $fd, $entry, $buf as *mut c_void, $len, $off, $dir)
    };
    (@call vectored, $worker:ident, $fd:ident, $entry:ident, $buf:ident, $len:ident, $off:expr, $dir:expr) => {
        transfer($worker, $fd, $entry, $buf, $len, $off, $dir)
    };
}

positioned! {
    /// `pread(2)`.
    pread(buf: *mut c_void, len: size_t, off_t) => one, Dir::Read;
    /// `pread64(2)` (std's positioned read).
    pread64(buf: *mut c_void, len: size_t, off64_t) => one, Dir::Read;
    /// `pwrite(2)`.
    pwrite(buf: *const c_void, len: size_t, off_t) => one, Dir::Write;
    /// `pwrite64(2)` (std's positioned write).
    pwrite64(buf: *const c_void, len: size_t, off64_t) => one, Dir::Write;
    /// `preadv(2)`.
    preadv(iov: *const iovec, count: c_int, off_t) => vectored, Dir::Read;
    /// `preadv64(2)`.
    preadv64(iov: *const iovec, count: c_int, off64_t) => vectored, Dir::Read;
    /// `pwritev(2)`.
    pwritev(iov: *const iovec, count: c_int, off_t) => vectored, Dir::Write;
    /// `pwritev64(2)`.
    pwritev64(iov: *const iovec, count: c_int, off64_t) => vectored, Dir::Write;
}

/// Defines the interposed syncs: on a fiber and a file, on the pool.
macro_rules! syncs {
    ($($name:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(2)`: on a fiber and a file, on the file pool.")]
        ///
        /// # Safety
        ///
        /// As the C function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int) -> c_int {
            if let (Some(worker), Some(_)) = (on_fiber(), file(fd)) {
                // SAFETY: any descriptor number may be passed.
                return offload(worker, concat!(stringify!($name), " (hooked libc call)"), move || unsafe {
                    (real().$name)(fd) as i64
                }) as c_int;
            }
            // SAFETY: any descriptor number may be passed.
            unsafe { (real().$name)(fd) }
        }
    )*};
}

syncs! {
    fsync;
    fdatasync;
}

/// An open on the pool for a fiber; the new descriptor's entry is forgotten (its number may
/// have named another descriptor, closed with a raw system call).
fn open_parked(worker: &Worker, open: impl FnOnce() -> c_int + Send + 'static) -> c_int {
    let fd = offload(worker, "open (hooked libc call)", move || open() as i64) as c_int;
    if let Some(entry) = fd::entry(fd) {
        entry.forget();
    }
    fd
}

/// Defines the interposed opens by path. The mode is read as a third (fourth) integer
/// argument whether the caller passed one or not: C's variadic and fixed arguments travel in
/// the same registers on x86_64 and aarch64 Linux, and glibc reads it only with `O_CREAT` or
/// `O_TMPFILE` (the same convention as `fcntl`, module `socket`).
macro_rules! opens {
    ($($name:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(2)`: on a fiber, on the file pool.")]
        ///
        /// # Safety
        ///
        /// As the C function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
            let Some(worker) = on_fiber() else {
                // SAFETY: the caller's contract.
                return unsafe { (real().$name)(path, flags, mode) };
            };
            let path = Lent(path);
            open_parked(worker, move || {
                // SAFETY: the caller's path, valid until the call returns (module `offload`).
                unsafe { (real().$name)(path.get(), flags, mode) }
            })
        }
    )*};
}

opens! {
    open;
    open64;
}

/// Defines the interposed `openat`s (see `opens!`).
macro_rules! opens_at {
    ($($name:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(2)`: on a fiber, on the file pool.")]
        ///
        /// # Safety
        ///
        /// As the C function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(dir: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
            let Some(worker) = on_fiber() else {
                // SAFETY: the caller's contract.
                return unsafe { (real().$name)(dir, path, flags, mode) };
            };
            let path = Lent(path);
            open_parked(worker, move || {
                // SAFETY: the caller's path, valid until the call returns (module `offload`).
                unsafe { (real().$name)(dir, path.get(), flags, mode) }
            })
        }
    )*};
}

opens_at! {
    openat;
    openat64;
}

/// Defines the interposed `creat`s.
macro_rules! creats {
    ($($name:ident;)*) => {$(
        #[doc = concat!("`", stringify!($name), "(2)`: on a fiber, on the file pool.")]
        ///
        /// # Safety
        ///
        /// As the C function.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, mode: libc::mode_t) -> c_int {
            let Some(worker) = on_fiber() else {
                // SAFETY: the caller's contract.
                return unsafe { (real().$name)(path, mode) };
            };
            let path = Lent(path);
            open_parked(worker, move || {
                // SAFETY: the caller's path, valid until the call returns (module `offload`).
                unsafe { (real().$name)(path.get(), mode) }
            })
        }
    )*};
}

creats! {
    creat;
    creat64;
}

/// `fstatat` as a system call: the `stat` family's one call. glibc's `stat` symbols differ
/// between versions (older ones export `__xstat`), the system call does not.
///
/// # Safety
///
/// As `fstatat(2)`: `path` is a C string, `buf` valid for one `struct stat`.
unsafe fn sys_fstatat(dir: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
    // SAFETY: the caller's contract; on 64-bit Linux glibc's `struct stat` is the kernel's.
    unsafe { libc::syscall(libc::SYS_newfstatat, dir, path, buf, flags) as c_int }
}

/// A `stat` family call for a fiber, on the pool; off a fiber, on the calling thread.
///
/// # Safety
///
/// As `fstatat(2)`.
unsafe fn stat_at(dir: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
    let Some(worker) = on_fiber() else {
        // SAFETY: the caller's contract.
        return unsafe { sys_fstatat(dir, path, buf, flags) };
    };
    let (path, buf) = (Lent(path), Lent(buf));
    offload(worker, "stat (hooked libc call)", move || {
        // SAFETY: the caller's path and buffer, valid until the call returns (module
        // `offload`).
        unsafe { sys_fstatat(dir, path.get(), buf.get(), flags) as i64 }
    }) as c_int
}

/// `stat(2)`.
///
/// # Safety
///
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { stat_at(libc::AT_FDCWD, path, buf, 0) }
}

/// `stat64(2)` (the same structure on 64-bit Linux).
///
/// # Safety
///
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: the caller's contract; `stat64` is `stat` on 64-bit Linux.
    unsafe { stat_at(libc::AT_FDCWD, path, buf.cast(), 0) }
}

/// `lstat(2)`.
///
/// # Safety
///
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { stat_at(libc::AT_FDCWD, path, buf, libc::AT_SYMLINK_NOFOLLOW) }
}

/// `lstat64(2)`.
///
/// # Safety
///
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: the caller's contract; `stat64` is `stat` on 64-bit Linux.
    unsafe { stat_at(libc::AT_FDCWD, path, buf.cast(), libc::AT_SYMLINK_NOFOLLOW) }
}

/// `fstatat(2)`.
///
/// # Safety
///
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn fstatat(
    dir: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { stat_at(dir, path, buf, flags) }
}

/// `fstatat64(2)`.
///
/// # Safety
///
/// As the C function.
#[no_mangle]
pub unsafe extern "C" fn fstatat64(
    dir: c_int,
    path: *const c_char,
    buf: *mut libc::stat64,
    flags: c_int,
) -> c_int {
    // SAFETY: the caller's contract; `stat64` is `stat` on 64-bit Linux.
    unsafe { stat_at(dir, path, buf.cast(), flags) }
}
