//! glibc's definitions of the interposed functions, found once with `dlsym(RTLD_NEXT)`: the
//! next definition after the program's own (spindle's), which is the C library's.
//!
//! Invariant: **resolved before first use, never null.** [`real`] resolves every function on
//! its first call (any thread; a race resolves twice, to the same addresses) and aborts with a
//! message naming the function if one is missing (a libc without it, or linked statically),
//! rather than letting a call jump to address zero.

use std::ffi::CStr;
use std::sync::OnceLock;

use libc::{
    c_char, c_int, c_uint, c_ulong, c_void, iovec, msghdr, nfds_t, off64_t, off_t, pollfd, sigset_t, size_t,
    sockaddr, socklen_t, ssize_t, timespec, timeval,
};

/// Declares [`Real`], one field per function, and `resolve`, which finds each function by its
/// field's name.
macro_rules! functions {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        /// The C library's functions.
        pub(super) struct Real {
            $($(#[$doc])* pub(super) $name: $ty,)*
        }

        fn resolve() -> Real {
            Real {
                $($name: {
                    let name = concat!(stringify!($name), "\0");
                    let address = next(CStr::from_bytes_with_nul(name.as_bytes()).expect("a C name"));
                    // SAFETY: `next` returns the C library's definition of this very function
                    // (never null), whose C signature the field's type spells (glibc's
                    // headers).
                    unsafe { std::mem::transmute::<*mut c_void, $ty>(address) }
                },)*
            }
        }
    };
}

type FdSet = *mut libc::fd_set;

functions! {
    socket: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    connect: unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
    accept4: unsafe extern "C" fn(c_int, *mut sockaddr, *mut socklen_t, c_int) -> c_int;
    read: unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t;
    write: unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
    readv: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
    writev: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t;
    recv: unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int) -> ssize_t;
    recvfrom: unsafe extern "C" fn(c_int, *mut c_void, size_t, c_int, *mut sockaddr, *mut socklen_t) -> ssize_t;
    recvmsg: unsafe extern "C" fn(c_int, *mut msghdr, c_int) -> ssize_t;
    send: unsafe extern "C" fn(c_int, *const c_void, size_t, c_int) -> ssize_t;
    sendto: unsafe extern "C" fn(c_int, *const c_void, size_t, c_int, *const sockaddr, socklen_t) -> ssize_t;
    sendmsg: unsafe extern "C" fn(c_int, *const msghdr, c_int) -> ssize_t;
    close: unsafe extern "C" fn(c_int) -> c_int;
    setsockopt: unsafe extern "C" fn(c_int, c_int, c_int, *const c_void, socklen_t) -> c_int;
    /// Declared with one integer-or-pointer argument after `cmd` (module `socket`, `fcntl`).
    fcntl: unsafe extern "C" fn(c_int, c_int, c_ulong) -> c_int;
    /// Declared with one integer-or-pointer argument after `request` (module `socket`, `ioctl`).
    ioctl: unsafe extern "C" fn(c_int, c_ulong, c_ulong) -> c_int;
    dup: unsafe extern "C" fn(c_int) -> c_int;
    dup2: unsafe extern "C" fn(c_int, c_int) -> c_int;
    dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
    poll: unsafe extern "C" fn(*mut pollfd, nfds_t, c_int) -> c_int;
    ppoll: unsafe extern "C" fn(*mut pollfd, nfds_t, *const timespec, *const sigset_t) -> c_int;
    select: unsafe extern "C" fn(c_int, FdSet, FdSet, FdSet, *mut timeval) -> c_int;
    pselect: unsafe extern "C" fn(c_int, FdSet, FdSet, FdSet, *const timespec, *const sigset_t) -> c_int;
    epoll_wait: unsafe extern "C" fn(c_int, *mut libc::epoll_event, c_int, c_int) -> c_int;
    epoll_pwait: unsafe extern "C" fn(c_int, *mut libc::epoll_event, c_int, c_int, *const sigset_t) -> c_int;
    nanosleep: unsafe extern "C" fn(*const timespec, *mut timespec) -> c_int;
    clock_nanosleep: unsafe extern "C" fn(libc::clockid_t, c_int, *const timespec, *mut timespec) -> c_int;
    usleep: unsafe extern "C" fn(libc::useconds_t) -> c_int;
    sleep: unsafe extern "C" fn(c_uint) -> c_uint;
    pread: unsafe extern "C" fn(c_int, *mut c_void, size_t, off_t) -> ssize_t;
    pread64: unsafe extern "C" fn(c_int, *mut c_void, size_t, off64_t) -> ssize_t;
    pwrite: unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
    pwrite64: unsafe extern "C" fn(c_int, *const c_void, size_t, off64_t) -> ssize_t;
    preadv: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
    preadv64: unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t) -> ssize_t;
    pwritev: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t;
    pwritev64: unsafe extern "C" fn(c_int, *const iovec, c_int, off64_t) -> ssize_t;
    fsync: unsafe extern "C" fn(c_int) -> c_int;
    fdatasync: unsafe extern "C" fn(c_int) -> c_int;
    /// Declared with the mode as a fixed argument (module `file`, `opens!`).
    open: unsafe extern "C" fn(*const c_char, c_int, c_uint) -> c_int;
    open64: unsafe extern "C" fn(*const c_char, c_int, c_uint) -> c_int;
    openat: unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint) -> c_int;
    openat64: unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint) -> c_int;
    creat: unsafe extern "C" fn(*const c_char, libc::mode_t) -> c_int;
    creat64: unsafe extern "C" fn(*const c_char, libc::mode_t) -> c_int;
}

/// The C library's functions, resolved on first use (module doc).
#[inline]
pub(super) fn real() -> &'static Real {
    static REAL: OnceLock<Real> = OnceLock::new();
    REAL.get_or_init(resolve)
}

/// The next definition of `name` after the program's.
fn next(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is a NUL-terminated string; RTLD_NEXT asks for the next definition in
    // the search order after the calling object, which is the program itself.
    let address = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if address.is_null() {
        crate::report::error(format_args!(
            "spindle (feature hook): the C library's `{}` was not found (dlsym RTLD_NEXT); the hook \
             needs a dynamically linked glibc",
            name.to_string_lossy()
        ));
        std::process::abort();
    }
    address
}
