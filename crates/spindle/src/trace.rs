//! The runtime's own events as tracing events (feature `tracing`): a fiber spawned, parked,
//! woken or cancelled, a task spawned, the watchdog's warnings.
//!
//! Targets: `spindle::fiber`, `spindle::task`, `spindle::watchdog`. Levels: `trace` for what
//! happens on every switch or wake-up (spawn, park, wake), `debug` for cancellations. Each
//! function is inlined into its caller: without the feature its body is empty (no code), and
//! with it the event macro first compares the level with tracing's static and global
//! maximum, so a disabled level costs one load and a branch.

use crate::fiber::control::Header;

/// A fiber was built (before it is queued).
#[inline(always)]
pub(crate) fn fiber_spawned(header: &Header) {
    #[cfg(feature = "tracing")]
    tracing::trace!(
        target: "spindle::fiber",
        fiber_id = header.id,
        fiber_name = header.name.as_deref(),
        spawned_at = %header.site,
        "fiber spawned"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = header;
}

/// The running fiber parks on `reason`.
#[inline(always)]
pub(crate) fn fiber_parked(header: &Header, reason: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "spindle::fiber", fiber_id = header.id, waiting_on = reason, "fiber parked");
    #[cfg(not(feature = "tracing"))]
    let _ = (header, reason);
}

/// A parked fiber was woken (its waker moved it out of `PARKED`).
#[inline(always)]
pub(crate) fn fiber_woken(header: &Header) {
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "spindle::fiber", fiber_id = header.id, "fiber woken");
    #[cfg(not(feature = "tracing"))]
    let _ = header;
}

/// A fiber starts unwinding for cancellation.
#[inline(always)]
pub(crate) fn fiber_cancelled(id: u64, name: &str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "spindle::fiber", fiber_id = id, fiber_name = name, "fiber cancelled");
    #[cfg(not(feature = "tracing"))]
    let _ = (id, name);
}

/// A task was spawned.
#[inline(always)]
pub(crate) fn task_spawned(id: u64) {
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "spindle::task", task_id = id, "task spawned");
    #[cfg(not(feature = "tracing"))]
    let _ = id;
}

/// A task was aborted (its handle's `abort`, or shutdown).
#[inline(always)]
pub(crate) fn task_cancelled(id: u64) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "spindle::task", task_id = id, "task cancelled");
    #[cfg(not(feature = "tracing"))]
    let _ = id;
}

/// Sends a runtime report (module `report`) to tracing when a subscriber is set; returns
/// whether it did.
#[inline]
pub(crate) fn report(level: log::Level, message: std::fmt::Arguments<'_>) -> bool {
    #[cfg(feature = "tracing")]
    if tracing::dispatcher::has_been_set() {
        match level {
            log::Level::Error => tracing::error!(target: "spindle", "{message}"),
            _ => tracing::warn!(target: "spindle", "{message}"),
        }
        return true;
    }
    let _ = (level, message);
    false
}
