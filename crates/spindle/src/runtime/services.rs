//! [`Services`]: what a runtime offers besides its workers, and the thread-local through which
//! code on its worker threads reaches them.

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

/// The tokio bridge's context entered on this thread while the guard lives, when the runtime
/// asks for it (feature `tokio-compat`, module `compat`); nothing otherwise.
#[cfg(feature = "tokio-compat")]
pub(super) fn enter_tokio(services: &Services) -> Option<tokio::runtime::EnterGuard<'static>> {
    services.tokio_context.then(crate::compat::enter_context)
}

/// Without the feature: nothing to enter (a guard that guards nothing, so that callers hold
/// it the same way).
#[cfg(not(feature = "tokio-compat"))]
pub(super) fn enter_tokio(_: &Services) -> NoTokio {
    NoTokio
}

/// The guard [`enter_tokio`] gives without the `tokio-compat` feature.
#[cfg(not(feature = "tokio-compat"))]
pub(super) struct NoTokio;

std::thread_local! {
    static SERVICES: std::cell::RefCell<Option<Arc<Services>>> = const { std::cell::RefCell::new(None) };
}

/// Called first on each worker thread.
pub(super) fn enter_worker(services: Arc<Services>) {
    crate::shutdown::enter_worker(services.shutdown.clone());
    SERVICES.with(|s| *s.borrow_mut() = Some(services));
}

/// Makes `services` this thread's for as long as the guard lives, then puts back what the
/// thread had (a [`LocalRuntime`]'s thread is its worker only inside `block_on`).
pub(super) fn enter_services(services: Arc<Services>) -> ServicesGuard {
    let token = crate::shutdown::swap_current(Some(services.shutdown.clone()));
    let services = SERVICES.with(|s| s.replace(Some(services)));
    ServicesGuard { services, token }
}

/// What [`enter_services`] replaced.
pub(super) struct ServicesGuard {
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
