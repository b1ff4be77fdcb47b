//! What every interposed call shares: the test that the caller is a fiber (module doc of
//! `hook`, "off a fiber, the call is glibc's"), the calling thread's `errno`, and the guard
//! that turns a cancellation unwinding out of a fiber's wait into `ECANCELED` ("no unwinding
//! into C").

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::sched::worker::{self, Worker};

/// The worker whose fiber is making the call, if a fiber is (`hook`'s module doc, "off a
/// fiber, the call is glibc's").
#[inline]
pub(super) fn on_fiber() -> Option<&'static Worker> {
    worker::current().filter(|w| w.in_fiber())
}

/// Sets the calling thread's `errno`.
pub(super) fn set_errno(code: libc::c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for writes
    // for the life of the thread.
    unsafe { *libc::__errno_location() = code };
}

/// The calling thread's `errno`.
pub(super) fn errno() -> libc::c_int {
    // SAFETY: as in `set_errno`, for reads.
    unsafe { *libc::__errno_location() }
}

/// Runs a fiber's wait; a cancellation that unwinds out of it (`hook`'s module doc, "no
/// unwinding into C") is stopped here and becomes `ECANCELED` with the result `failed` (the
/// sleeps pass a `failed` that says they slept: `std::thread::sleep` treats any error but
/// `EINTR` as a bug). Any other panic keeps unwinding, into the `extern "C"` frame, which
/// aborts the process.
pub(super) fn parked<R>(worker: &Worker, failed: R, wait: impl FnOnce() -> R) -> R {
    if worker.current_fiber_cancelled() {
        set_errno(libc::ECANCELED);
        return failed;
    }
    match catch_unwind(AssertUnwindSafe(wait)) {
        Ok(r) => r,
        Err(payload) if payload.is::<crate::error::Cancelled>() => {
            crate::fiber::cancel::end();
            set_errno(libc::ECANCELED);
            failed
        }
        Err(payload) => std::panic::resume_unwind(payload),
    }
}
