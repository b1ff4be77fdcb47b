//! Running tokio-only crates (reqwest, sqlx, redis, tonic's transport …) from fibers and tasks
//! (feature `tokio-compat`).
//!
//! Such crates call into tokio's reactor and timer, which exist only inside a tokio runtime:
//! polled by a spindle worker they panic ("there is no reactor running"). The bridge runs a
//! tokio runtime (current-thread, I/O and timers enabled) on one helper thread. A future
//! handed to [`spawn`] runs there as a tokio task, inside tokio's context, and its result comes
//! back through tokio's join handle: a spindle task `.await`s it, a fiber waits for it with
//! [`block_on`] (which parks the fiber, not the worker).
//!
//! ```
//! let rt = spindle::Runtime::new().unwrap();
//! let slept = rt.block_on(|| {
//!     // tokio::time::sleep panics on a spindle worker; through the bridge it just works.
//!     spindle::compat::block_on(async {
//!         tokio::time::sleep(std::time::Duration::from_millis(1)).await;
//!         "slept in tokio"
//!     })
//! });
//! assert_eq!(slept, "slept in tokio");
//! ```
//!
//! # The tokio context on every worker
//!
//! With this feature every spindle worker thread runs inside the process-wide bridge's tokio
//! context (entered once when the thread starts; a [`LocalRuntime`](crate::LocalRuntime)
//! enters it for each `block_on`), so tokio-only code runs unchanged in fibers and tasks:
//! `tokio::spawn` spawns onto the bridge, `tokio::time` and tokio's sockets register with the
//! bridge's timer and reactor, and crates built on them (reqwest, tonic-reflection, hyper-util's
//! client) work without [`spawn`] or [`block_on`]. Their I/O and timers are driven by the
//! bridge's thread, which wakes spindle's fibers and tasks through their wakers; spindle's own
//! sockets and timers stay on the workers. A fiber waits for a tokio future with
//! [`task::block_on`](crate::task::block_on) (it parks), a task `.await`s it.
//! `Builder::tokio_context(false)` leaves a runtime's workers outside it.
//!
//! ```
//! let rt = spindle::Runtime::new().unwrap();
//! rt.block_on(|| {
//!     // No bridge call: the worker is inside the bridge's context.
//!     let task = tokio::spawn(async { 6 * 7 });
//!     spindle::task::block_on(async {
//!         tokio::time::sleep(std::time::Duration::from_millis(1)).await;
//!         assert_eq!(task.await.unwrap(), 42);
//!     });
//! });
//! ```
//!
//! The context is a thread-local of the worker, shared by all its fibers: a fiber must not hold
//! a `Handle::enter` guard of its own across a park (crate docs, "Thread-local context in
//! fibers").
//!
//! # When to use it, and what it costs
//!
//! Use it for a crate that only runs on tokio, at its boundary: build the client and make the
//! call inside the bridged future, and hand plain data back. Code that spindle covers (sockets,
//! timers, HTTP through spindle-http, gRPC through spindle-grpc) should stay on spindle: every
//! bridged call costs two cross-thread hand-offs (the spawn wakes the helper thread, the
//! completion wakes the waiting fiber or task), small against the network round trip it
//! usually wraps but far above a spindle call (figures: `docs/perf/tokio-compat.md`).
//! All bridged work shares the one helper thread (a
//! [`TokioBridge`] of your own gives a crate its own thread).
//!
//! # Invariants
//!
//! - **Entered correctly.** A bridged future is polled only by the tokio runtime's own thread,
//!   inside its context. No spindle thread ever holds a `Handle::enter` guard, so no guard can
//!   outlive a fiber's park or move to another fiber (which would trip tokio's
//!   "entered out of order" checks or poll the wrong runtime).
//! - **Cancellation follows the caller.** Dropping the [`Bridged`] future (a cancelled fiber
//!   unwinding, an aborted task, a timeout) aborts the tokio task; a panic in the bridged future
//!   resumes in the caller.
//! - **Not the other way round.** spindle's own sockets and timers register with the spindle
//!   worker that polls them, so they must not be used inside a bridged future (they report an
//!   error or panic there): keep each future on its runtime.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

/// A tokio runtime on a helper thread, for futures of tokio-only crates.
pub struct TokioBridge {
    handle: tokio::runtime::Handle,
    /// Dropping it lets the helper thread's `block_on` return and the runtime shut down.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl fmt::Debug for TokioBridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokioBridge").finish_non_exhaustive()
    }
}

impl TokioBridge {
    /// Starts a tokio runtime (current-thread, I/O and timers enabled) on a new thread named
    /// `name`. Dropping the bridge stops it; tasks still running there are dropped.
    pub fn new(name: &str) -> io::Result<TokioBridge> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new().name(name.to_owned()).spawn(move || {
            // Drives every task spawned through the handle until the bridge is dropped.
            let _ = runtime.block_on(stopped);
            runtime.shutdown_background();
        })?;
        Ok(TokioBridge { handle, _stop: stop })
    }

    /// The tokio runtime's handle (for APIs that take one).
    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    /// Runs `future` on the bridge's tokio runtime; await the result from a spindle task, or
    /// wait for it in a fiber with [`Bridged::wait`].
    pub fn spawn<F>(&self, future: F) -> Bridged<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Bridged { task: self.handle.spawn(future) }
    }

    /// Runs `future` on the bridge and waits for its output: parks a fiber (its worker runs
    /// other fibers meanwhile), or blocks a plain thread.
    #[track_caller]
    pub fn block_on<F>(&self, future: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn(future).wait()
    }
}

/// The process-wide bridge, started on first use (thread `spindle-tokio`).
///
/// # Panics
///
/// If the tokio runtime or its thread cannot be started.
pub fn bridge() -> &'static TokioBridge {
    static BRIDGE: OnceLock<TokioBridge> = OnceLock::new();
    BRIDGE.get_or_init(|| TokioBridge::new("spindle-tokio").expect("start spindle's tokio bridge"))
}

/// Enters the process-wide bridge's tokio context on this thread until the guard drops: a
/// spindle worker's thread does it for its whole life (or a local runtime's `block_on` for
/// its call), unless its runtime was built with `Builder::tokio_context(false)` (module
/// docs, "The tokio context on every worker").
pub(crate) fn enter_context() -> tokio::runtime::EnterGuard<'static> {
    bridge().handle().enter()
}

/// Runs `future` on the process-wide bridge ([`bridge`]); `.await` the result from a task.
pub fn spawn<F>(future: F) -> Bridged<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    bridge().spawn(future)
}

/// Runs `future` on the process-wide bridge and waits for it: parks a fiber, or blocks a
/// plain thread.
///
/// # Panics
///
/// In an async task polled by a spindle worker (it would block the worker): `.await`
/// [`spawn`] there. A panic of `future` resumes here.
#[track_caller]
pub fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    bridge().block_on(future)
}

/// A future running on a [`TokioBridge`]; resolves to its output. Dropping it aborts the
/// tokio task.
#[must_use = "dropping a Bridged future cancels it"]
pub struct Bridged<T> {
    task: tokio::task::JoinHandle<T>,
}

impl<T> fmt::Debug for Bridged<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridged").field("finished", &self.task.is_finished()).finish()
    }
}

impl<T> Bridged<T> {
    /// Waits for the output: parks a fiber, or blocks a plain thread.
    ///
    /// # Panics
    ///
    /// In an async task polled by a spindle worker: `.await` the `Bridged` there.
    #[track_caller]
    pub fn wait(self) -> T {
        let _ = crate::sched::caller::blocking_caller("tokio bridge wait");
        crate::task::block_on(self)
    }
}

impl<T> Future for Bridged<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match Pin::new(&mut self.task).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(value)) => Poll::Ready(value),
            Poll::Ready(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Poll::Ready(Err(_)) => {
                panic!("spindle::compat: the tokio bridge shut down before the future finished")
            }
        }
    }
}

impl<T> Drop for Bridged<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
