//! The interposed sleeps: `nanosleep` (what `std::thread::sleep` calls), `clock_nanosleep`,
//! `usleep` and `sleep`. On a fiber they are spindle's timer sleep (the fiber parks, its
//! worker runs others); otherwise glibc's. A fiber's sleep is not cut short by signals
//! (module doc of `hook`), so the time left is always zero; a cancelled fiber's sleep
//! returns at once, as if it had slept.

use std::time::Duration;

use libc::{c_int, c_uint, clockid_t, timespec};

use super::common::{on_fiber, parked, set_errno};
use super::real::real;
use crate::sched::worker::Worker;

/// A `timespec` as a duration; `None` when invalid (negative, or nanoseconds out of range).
fn duration(ts: &timespec) -> Option<Duration> {
    (ts.tv_sec >= 0 && (0..1_000_000_000).contains(&ts.tv_nsec))
        .then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// Parks the fiber for `d` (spindle's sleep). Cancelled, it returns at once as if it had
/// slept: the fiber unwinds at its next park in spindle's code (module doc of `hook`).
fn fiber_sleep(worker: &Worker, d: Duration) {
    parked(worker, (), || match crate::sched::clock::now().checked_add(d) {
        Some(deadline) => crate::time::sleep_until(deadline),
        None => crate::time::sleep(crate::time::NEVER),
    })
}

/// `nanosleep(2)`.
///
/// # Safety
///
/// As `nanosleep(2)`.
#[no_mangle]
pub unsafe extern "C" fn nanosleep(req: *const timespec, rem: *mut timespec) -> c_int {
    let Some(worker) = on_fiber() else {
        // SAFETY: the caller's contract.
        return unsafe { (real().nanosleep)(req, rem) };
    };
    // SAFETY: the caller's contract: `req` points to a timespec.
    let Some(d) = duration(unsafe { &*req }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    fiber_sleep(worker, d);
    if !rem.is_null() {
        // SAFETY: a non-null `rem` is valid for writes.
        unsafe { *rem = timespec { tv_sec: 0, tv_nsec: 0 } };
    }
    0
}

/// `clock_nanosleep(2)` on the realtime, monotonic and boot clocks (others: glibc's). Returns
/// the error number, as the function does, rather than setting `errno`.
///
/// # Safety
///
/// As `clock_nanosleep(2)`.
#[no_mangle]
pub unsafe extern "C" fn clock_nanosleep(
    clock: clockid_t,
    flags: c_int,
    req: *const timespec,
    rem: *mut timespec,
) -> c_int {
    let known = matches!(clock, libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME);
    let Some(worker) = on_fiber().filter(|_| known) else {
        // SAFETY: the caller's contract.
        return unsafe { (real().clock_nanosleep)(clock, flags, req, rem) };
    };
    // SAFETY: the caller's contract: `req` points to a timespec.
    let Some(mut d) = duration(unsafe { &*req }) else { return libc::EINVAL };
    if flags & libc::TIMER_ABSTIME != 0 {
        let mut now = timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `now` is valid for writes.
        unsafe { libc::clock_gettime(clock, &mut now) };
        d = d.saturating_sub(duration(&now).unwrap_or_default());
    }
    fiber_sleep(worker, d);
    if !rem.is_null() && flags & libc::TIMER_ABSTIME == 0 {
        // SAFETY: a non-null `rem` is valid for writes.
        unsafe { *rem = timespec { tv_sec: 0, tv_nsec: 0 } };
    }
    0
}

/// `usleep(3)`.
///
/// # Safety
///
/// As `usleep(3)`.
#[no_mangle]
pub unsafe extern "C" fn usleep(usec: libc::useconds_t) -> c_int {
    match on_fiber() {
        Some(worker) => {
            fiber_sleep(worker, Duration::from_micros(u64::from(usec)));
            0
        }
        // SAFETY: the caller's contract.
        None => unsafe { (real().usleep)(usec) },
    }
}

/// `sleep(3)`: the seconds not slept, always 0 on a fiber.
///
/// # Safety
///
/// As `sleep(3)`.
#[no_mangle]
pub unsafe extern "C" fn sleep(seconds: c_uint) -> c_uint {
    match on_fiber() {
        Some(worker) => {
            fiber_sleep(worker, Duration::from_secs(u64::from(seconds)));
            0
        }
        // SAFETY: the caller's contract.
        None => unsafe { (real().sleep)(seconds) },
    }
}
