//! Spawning a fiber on a runtime from any thread: a `Runtime`'s or a `Handle`'s spawn, and a
//! `LocalRuntime`'s `block_on` fiber.

use std::io;

use crate::fiber::{self, JoinHandle};
use crate::sched::RuntimeShared;

/// Spawns a fiber on `rt` from any thread: on the worker chosen with `Builder::worker`, else
/// through the injector (any idle worker may start it).
#[track_caller]
pub(crate) fn spawn_fiber_on<F, T>(
    rt: &RuntimeShared,
    builder: fiber::Builder,
    f: F,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let target = builder.target_worker();
    let (fiber, output) = builder.build(f, rt.config.stack_size, target.is_some(), None)?;
    match target {
        Some(i) => rt.place_pinned(i, fiber),
        None => rt.inject_fiber(fiber),
    }
    Ok(JoinHandle::new(output))
}
