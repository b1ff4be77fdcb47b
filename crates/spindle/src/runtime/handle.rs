//! [`Handle`]: spawning on a runtime from anywhere, without owning it.
//!
//! A `Handle` is an `Arc` of the runtime's shared part: cloning it is one atomic increment,
//! it is `Send + Sync`, and it may outlive the [`Runtime`](crate::Runtime). It does not keep
//! the workers running: dropping the runtime stops them whatever handles remain.
//!
//! # Invariant: no spawn is lost at shutdown
//!
//! A spawn through a handle takes the read side of `RuntimeShared::spawn_gate`, checks the flag,
//! and queues its fiber or task *while still holding the read lock*. `Runtime::drop` sets the
//! flag under the write lock before it asks any worker to stop. So a spawn either
//!
//! - queued its work before the workers were asked to stop: a worker runs it, or cancels it
//!   at shutdown (its join handle then reports `Cancelled`, the usual shutdown outcome), or
//! - found the flag set: [`Handle::try_spawn_async`] / [`Handle::try_spawn`] return
//!   [`RuntimeClosed`], and [`Handle::spawn_async`] / [`Handle::spawn`] panic saying so.
//!
//! Never does work land in the queue of a worker that has already stopped, where its join
//! handle would wait forever.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::dump::dump_fibers;
use super::spawn::spawn_fiber_on;
use crate::fiber::{self, JoinHandle};
use crate::sched::{worker, RuntimeShared};
use crate::services::{self, Services};

/// A cheap, cloneable reference to a [`Runtime`](crate::Runtime) that spawns fibers and
/// tasks on it from any thread. Get one with [`Runtime::handle`](crate::Runtime::handle), or
/// [`Handle::current`] inside a worker.
///
/// ```
/// let rt = spindle::Runtime::new().unwrap();
/// let handle = rt.handle();
/// let from_a_thread = std::thread::spawn(move || handle.spawn(|| 6 * 7).join().unwrap());
/// assert_eq!(from_a_thread.join().unwrap(), 42);
/// drop(rt);
/// ```
#[derive(Clone)]
pub struct Handle {
    shared: Arc<RuntimeShared>,
    services: Arc<Services>,
}

/// The error of a spawn through a [`Handle`] whose runtime has been dropped (or is being
/// dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeClosed;

impl fmt::Display for RuntimeClosed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the spindle runtime has been shut down")
    }
}

impl std::error::Error for RuntimeClosed {}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle").field("runtime", &self.shared.id).finish()
    }
}

impl Handle {
    pub(crate) fn new(shared: Arc<RuntimeShared>, services: Arc<Services>) -> Handle {
        Handle { shared, services }
    }

    /// The handle of the runtime whose worker runs the caller, or `None` outside a worker.
    pub fn current() -> Option<Handle> {
        let w = worker::current()?;
        Some(Handle { shared: w.rt.clone(), services: services::services()? })
    }

    /// Whether the caller runs on a worker of any spindle runtime (a thread-local read; no
    /// handle is made).
    pub fn on_worker() -> bool {
        worker::current().is_some()
    }

    /// Whether the calling thread is one of this runtime's workers.
    pub fn is_current(&self) -> bool {
        worker::current().is_some_and(|w| Arc::ptr_eq(&w.rt, &self.shared))
    }

    /// Every started, unfinished fiber of the runtime: id, name, owner worker, what it is
    /// parked on and where it was spawned (see [`Runtime::dump_fibers`](crate::Runtime::dump_fibers)).
    /// From a fiber it parks, from a thread it blocks, until every worker has listed its own;
    /// on a [`LocalRuntime`](crate::LocalRuntime)'s handle, that is during its next `block_on`.
    ///
    /// # Panics
    ///
    /// On a local runtime's own thread outside its `block_on` (nothing would run its worker):
    /// use [`LocalRuntime::dump_fibers`](crate::LocalRuntime::dump_fibers) there.
    pub fn dump_fibers(&self) -> Vec<crate::sched::metrics::FiberInfo> {
        dump_fibers(&self.shared)
    }

    /// The runtime's shutdown token (see [`Runtime::shutdown_token`](crate::Runtime::shutdown_token)).
    pub fn shutdown_token(&self) -> crate::shutdown::ShutdownToken {
        self.services.shutdown.clone()
    }

    /// Spawns `future` as an async task: on the calling worker when called from one of this
    /// runtime's workers, otherwise on the workers in turn.
    ///
    /// # Panics
    ///
    /// If the runtime has been dropped; [`try_spawn_async`](Self::try_spawn_async) returns an
    /// error instead.
    pub fn spawn_async<F>(&self, future: F) -> crate::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_spawn_async(future).unwrap_or_else(|e| panic!("spindle::Handle::spawn_async: {e}"))
    }

    /// [`spawn_async`](Self::spawn_async), or `Err(RuntimeClosed)` (the future is dropped) if
    /// the runtime has been dropped.
    pub fn try_spawn_async<F>(&self, future: F) -> Result<crate::task::JoinHandle<F::Output>, RuntimeClosed>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let closed = self.shared.spawn_gate.read().unwrap_or_else(|e| e.into_inner());
        if *closed {
            return Err(RuntimeClosed);
        }
        // Queued under the read lock (module doc); on a worker of this runtime the task starts
        // in that worker's queue, elsewhere in the task injector.
        let handle = crate::task::spawn::spawn_on(self.shared.clone(), future);
        drop(closed);
        Ok(handle)
    }

    /// Spawns a fiber on the runtime (through its injector: any idle worker may start it).
    ///
    /// # Panics
    ///
    /// If the runtime has been dropped; [`try_spawn`](Self::try_spawn) returns an error instead.
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_spawn(f).unwrap_or_else(|e| panic!("spindle::Handle::spawn: {e}"))
    }

    /// [`spawn`](Self::spawn), or `Err(RuntimeClosed)` if the runtime has been dropped.
    #[track_caller]
    pub fn try_spawn<F, T>(&self, f: F) -> Result<JoinHandle<T>, RuntimeClosed>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let closed = self.shared.spawn_gate.read().unwrap_or_else(|e| e.into_inner());
        if *closed {
            return Err(RuntimeClosed);
        }
        let handle = spawn_fiber_on(&self.shared, fiber::Builder::new(), f)
            .expect("spawn a fiber with the runtime's default settings");
        drop(closed);
        Ok(handle)
    }
}
