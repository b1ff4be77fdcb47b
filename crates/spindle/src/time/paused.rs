//! Paused time: [`pause`], [`advance`], [`resume`] (tokio's `time::pause` and friends). The
//! clock itself, and when it moves by itself, is module `sched::clock`.

use std::future::Future;
use std::time::Duration;

use crate::sched::caller::{blocking_caller, Caller};
use crate::sched::clock::ClockError;
use crate::sched::worker::{self, Worker};

/// The worker running the caller, for a clock operation named `what`.
#[track_caller]
fn worker_for(what: &str) -> &'static Worker {
    worker::current().unwrap_or_else(|| {
        panic!("spindle::time::{what} called outside a spindle runtime; call it in a fiber or task of the runtime")
    })
}

#[track_caller]
fn check(result: Result<(), ClockError>, what: &str) {
    if let Err(e) = result {
        panic!("spindle::time::{what}: {}", e.message());
    }
}

/// Pauses the runtime's clock: [`now`](super::now) stops moving, and from then on it moves
/// only by [`advance`], or by itself to the next timer's deadline when every fiber and task of
/// the runtime waits (each one parked or pending, the reactor has no ready event and no
/// [`spawn_blocking`](crate::spawn_blocking) or file job is running): a sleep of an hour then
/// returns at once, with [`now`](super::now) an hour later, and timeouts elapse as soon as
/// nothing else can happen. This is tokio's `time::pause`, for fibers' [`sleep`](super::sleep)
/// and every `_timeout` wait as much as for futures. The paused reading is rounded up to a
/// whole millisecond, so that whole-millisecond sleeps end exactly on their deadlines.
///
/// Paused time is for tests: a runtime of one worker (a [`LocalRuntime`](crate::LocalRuntime),
/// `worker_threads(1)`, or `#[spindle::test(start_paused = true)]`, which pauses before the
/// test's body runs). Only the runtime's own timers follow its clock: `std::time::Instant::now()`,
/// the real clock, keeps running, and so does the clock of code off the runtime's worker
/// (plain threads, the blocking pool).
///
/// ```
/// use std::time::Duration;
///
/// let rt = spindle::Builder::new().build_local().unwrap();
/// rt.block_on(|| {
///     spindle::time::pause();
///     let start = spindle::time::now();
///     let (tx, rx) = spindle::sync::channel::<()>(1);
///     let timed_out = rx.recv_timeout(Duration::from_secs(30)).is_err();
///     assert!(timed_out);
///     assert_eq!(spindle::time::now() - start, Duration::from_secs(30));
///     drop(tx);
/// });
/// ```
///
/// # Panics
///
/// Outside a fiber or task of a spindle runtime, on a runtime of more than one worker, or if
/// time is already paused.
#[track_caller]
pub fn pause() {
    check(worker_for("pause").rt.clock.pause(), "pause");
}

/// Lets the runtime's paused clock run again, from its paused reading (it never goes back).
///
/// # Panics
///
/// Outside a fiber or task of a spindle runtime, or if time is not paused.
#[track_caller]
pub fn resume() {
    check(worker_for("resume").rt.clock.resume(), "resume");
}

/// Whether the time of the runtime running the caller is paused (false off a runtime).
pub fn is_paused() -> bool {
    worker::current().is_some_and(|w| w.rt.clock.is_paused())
}

/// Moves the runtime's paused clock `by` forward, fires the timers that are due by then, and
/// yields, so that the fibers and tasks they woke run before the caller goes on (tokio's
/// `time::advance(by).await`, blocking-style). For a fiber; in an async task use
/// [`advance_async`].
///
/// ```
/// use std::time::Duration;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let rt = spindle::Builder::new().start_paused(true).build().unwrap();
/// rt.block_on(|| {
///     let rang = Arc::new(AtomicBool::new(false));
///     let r = rang.clone();
///     spindle::spawn(move || {
///         spindle::time::sleep(Duration::from_secs(10));
///         r.store(true, Ordering::Relaxed);
///     });
///     spindle::yield_now(); // the alarm fiber starts and sleeps
///     spindle::time::advance(Duration::from_secs(9));
///     assert!(!rang.load(Ordering::Relaxed));
///     spindle::time::advance(Duration::from_secs(1));
///     assert!(rang.load(Ordering::Relaxed));
/// });
/// ```
///
/// # Panics
///
/// Outside a fiber of a spindle runtime, in an async task (use [`advance_async`]), or if time
/// is not paused.
#[track_caller]
pub fn advance(by: Duration) {
    let worker = match blocking_caller("time::advance") {
        Caller::Fiber(worker) => worker,
        Caller::Thread => panic!("spindle::time::advance called outside a spindle runtime"),
    };
    check(worker.rt.clock.advance(by), "advance");
    worker.fire_due_timers();
    crate::fiber::yield_now();
}

/// [`advance`] for async tasks: moves the paused clock `by` forward and fires the timers due
/// by then at once; the returned future yields once, so that what they woke runs before the
/// task goes on.
///
/// ```
/// use std::time::Duration;
///
/// #[spindle::main(flavor = "local", start_paused = true)]
/// async fn main() {
///     let start = spindle::time::now();
///     spindle::time::advance_async(Duration::from_millis(1500)).await;
///     assert_eq!(spindle::time::now() - start, Duration::from_millis(1500));
/// }
/// ```
///
/// # Panics
///
/// Outside a fiber or task of a spindle runtime, or if time is not paused.
#[track_caller]
pub fn advance_async(by: Duration) -> impl Future<Output = ()> + Send + 'static {
    let worker = worker_for("advance_async");
    check(worker.rt.clock.advance(by), "advance_async");
    worker.fire_due_timers();
    crate::task::yield_now::yield_now()
}
