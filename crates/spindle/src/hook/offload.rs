//! A call that has no readiness (a read of a regular file that would wait for the disk, an
//! `open`, an `fsync`, a `stat`), made for a fiber on the runtime's file pool while the
//! fiber parks: its worker runs other fibers and tasks meanwhile.
//!
//! # Invariants
//!
//! - **The caller's memory outlives the job.** The job works on memory the C caller lent for
//!   the call (the buffer of a `read`, the path of an `open`, the `struct stat` of a `stat`),
//!   through raw pointers. The fiber does not return from the call until the job has ended
//!   or has been dropped unrun: its park is not cut short by a cancellation
//!   (`Worker::park_current_through_cancel`). A fiber cancelled meanwhile sees it when the
//!   call has returned, at its next hooked call (`ECANCELED`) or its next park in spindle's
//!   own code.
//! - **An unrun job is an error, never a hang.** The job owns its [`Report`]: whether the
//!   job ran or the pool dropped it unrun (its runtime shut down before it started), dropping
//!   the report publishes an outcome (`ECANCELED` when it never ran) and wakes the fiber.
//! - **`errno` is the job's.** The job's `errno` is read on the pool thread right after its
//!   call and set on the fiber's thread before the call returns.
//! - **Published once, with release.** The outcome's fields are written before `done` is
//!   stored with release; the fiber reads them after loading `done` with acquire.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;

use libc::c_int;

use super::common::{errno, set_errno};
use crate::park::Waiter;
use crate::sched::worker::Worker;

/// The outcome of a job, shared by the job's report and the waiting fiber.
struct Outcome {
    done: AtomicBool,
    result: AtomicI64,
    errno: AtomicI32,
}

/// The job's duty to publish its outcome and wake the fiber: done by its drop, whether the
/// job ran ("an unrun job is an error").
struct Report {
    outcome: Arc<Outcome>,
    waiter: Option<Waiter>,
    result: i64,
    errno: c_int,
}

impl Drop for Report {
    fn drop(&mut self) {
        self.outcome.result.store(self.result, Ordering::Relaxed);
        self.outcome.errno.store(self.errno, Ordering::Relaxed);
        self.outcome.done.store(true, Ordering::Release);
        if let Some(waiter) = self.waiter.take() {
            waiter.wake();
        }
    }
}

/// Runs `job` (a system call returning `-1` with `errno` on failure) on the file pool for
/// the running fiber of `worker`, parking the fiber until it is done; returns its result with
/// `errno` set. `call` names the call for `dump_fibers`.
///
/// A cancelled fiber's file calls still run (unlike its socket waits, which fail with
/// `ECANCELED`): a file call ends on its own, and refusing it would lose the writes of the
/// destructors that run while the fiber unwinds (a buffered writer's flush, a log line).
/// While it unwinds (a panic, a cancellation) the call runs on the worker itself: a fiber
/// that parked mid-unwind would leave its thread's panic count raised for the other fibers,
/// and a panic in one of them would then abort the process as a panic while panicking.
pub(super) fn offload(
    worker: &Worker,
    call: &'static str,
    job: impl FnOnce() -> i64 + Send + 'static,
) -> i64 {
    if std::thread::panicking() {
        return job();
    }
    let Some(services) = crate::services::services() else {
        // A worker always has its runtime's services; should it not, the call runs here.
        return job();
    };
    let outcome = Arc::new(Outcome {
        done: AtomicBool::new(false),
        result: AtomicI64::new(-1),
        errno: AtomicI32::new(0),
    });
    let mut report = Report {
        outcome: outcome.clone(),
        waiter: Some(Waiter::current()),
        result: -1,
        errno: libc::ECANCELED,
    };
    // The handle is not needed: the report wakes the fiber, ran or not.
    drop(services.files.spawn(move || {
        report.result = job();
        report.errno = errno();
        drop(report);
    }));
    while !outcome.done.load(Ordering::Acquire) {
        worker.park_current_through_cancel(call);
    }
    set_errno(outcome.errno.load(Ordering::Relaxed));
    outcome.result.load(Ordering::Relaxed)
}

/// Raw pointers to memory the caller lent for the call (a pointer, or iovecs that hold
/// some), carried into the job ("the caller's memory outlives the job").
pub(super) struct Lent<T>(pub(super) T);

// SAFETY: the pointers are to memory the C caller lent for the duration of the call, which
// the fiber does not leave before the job ends ("the caller's memory outlives the job"); only
// the job uses it meanwhile (the fiber is parked).
unsafe impl<T> Send for Lent<T> {}

impl<T> Lent<T> {
    /// The pointers. A method, so that a closure captures the whole `Lent` (which is `Send`)
    /// rather than its field (which is not).
    pub(super) fn get(self) -> T {
        self.0
    }
}
