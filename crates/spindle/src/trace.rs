//! The runtime's own events as tracing events (feature `tracing`): a fiber spawned, parked,
//! woken or cancelled, a task spawned, the watchdog's warnings.
//!
//! Targets: `spindle::fiber`, `spindle::task`, `spindle::watchdog`. Levels: `trace` for what
//! happens on every switch or wake-up (spawn, park, wake), `debug` for cancellations. Each
//! function is inlined into its caller: without the feature its body is empty (no code), and
//! with it the event macro first compares the level with tracing's static and global
//! maximum, so a disabled level costs one load and a branch.
//!
//! A leaf below every layer: the switch, the spawn and the unparker call it with the fiber's
//! fields (they own the control block), so it imports nothing of the runtime.

/// A fiber was built (before it is queued). The name is asked for only when the event is
/// recorded: reading it validates its bytes, a cost no spawn should pay for an event that is
/// off.
#[inline(always)]
pub(crate) fn fiber_spawned<'a>(
    id: u64,
    name: impl FnOnce() -> Option<&'a str>,
    site: &'static std::panic::Location<'static>,
) {
    #[cfg(feature = "tracing")]
    tracing::trace!(
        target: "spindle::fiber",
        fiber_id = id,
        fiber_name = name(),
        spawned_at = %site,
        "fiber spawned"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (id, name, site);
}

/// The running fiber parks on `reason`.
#[inline(always)]
pub(crate) fn fiber_parked(id: u64, reason: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "spindle::fiber", fiber_id = id, waiting_on = reason, "fiber parked");
    #[cfg(not(feature = "tracing"))]
    let _ = (id, reason);
}

/// A parked fiber was woken (its waker moved it out of `PARKED`).
#[inline(always)]
pub(crate) fn fiber_woken(id: u64) {
    #[cfg(feature = "tracing")]
    tracing::trace!(target: "spindle::fiber", fiber_id = id, "fiber woken");
    #[cfg(not(feature = "tracing"))]
    let _ = id;
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
