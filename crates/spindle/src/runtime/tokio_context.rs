//! Entering the tokio bridge's context on a worker thread when the runtime asks for it
//! (`Builder::tokio_context`, feature `tokio-compat`).

use crate::services::Services;

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
