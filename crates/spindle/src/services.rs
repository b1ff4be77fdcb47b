//! [`Services`]: what a runtime offers besides its workers (the blocking and file pools, the
//! shutdown token), and the thread-local through which code on its worker threads reaches them.
//!
//! A leaf below the rooms that use it: `net` (DNS), `fs`, the hook's offload and the runtime
//! read the thread-local, and only `runtime` sets it (when a worker thread starts, or while a
//! local runtime's `block_on` runs), so nothing below `runtime` imports `runtime`.

use std::sync::Arc;

use crate::blocking::BlockingPool;
use crate::shutdown::ShutdownToken;

/// What a runtime offers besides its workers: the blocking pool and the shutdown token.
/// Workers reach it through a thread-local set when their thread starts ([`services`]), so the
/// scheduler (module `sched`) never depends on these modules.
#[derive(Debug)]
pub(crate) struct Services {
    pub(crate) blocking: Arc<BlockingPool>,
    /// The pool of file system calls (`Builder::max_file_threads`).
    pub(crate) files: Arc<BlockingPool>,
    pub(crate) shutdown: ShutdownToken,
    /// Whether the workers enter the tokio bridge's context (`Builder::tokio_context`).
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio_context: bool,
}

std::thread_local! {
    static SERVICES: std::cell::RefCell<Option<Arc<Services>>> = const { std::cell::RefCell::new(None) };
}

/// Called first on each worker thread.
pub(crate) fn enter_worker(services: Arc<Services>) {
    crate::shutdown::enter_worker(services.shutdown.clone());
    SERVICES.with(|s| *s.borrow_mut() = Some(services));
}

/// Makes `services` this thread's for as long as the guard lives, then puts back what the
/// thread had (a [`LocalRuntime`]'s thread is its worker only inside `block_on`).
pub(crate) fn enter_services(services: Arc<Services>) -> ServicesGuard {
    let token = crate::shutdown::swap_current(Some(services.shutdown.clone()));
    let services = SERVICES.with(|s| s.replace(Some(services)));
    ServicesGuard { services, token }
}

/// What [`enter_services`] replaced.
pub(crate) struct ServicesGuard {
    services: Option<Arc<Services>>,
    token: Option<ShutdownToken>,
}

impl Drop for ServicesGuard {
    fn drop(&mut self) {
        crate::shutdown::swap_current(self.token.take());
        SERVICES.with(|s| *s.borrow_mut() = self.services.take());
    }
}

/// The services of the runtime whose worker runs the caller, if the caller is on a worker.
pub(crate) fn services() -> Option<Arc<Services>> {
    SERVICES.with(|s| s.borrow().clone())
}
