//! The fiber dump of a runtime: every started, unfinished fiber, each listed by its own
//! worker.

use std::thread;

use crate::sched::{metrics, worker, RuntimeShared};

/// Every started, unfinished fiber of `rt`: each worker lists its own, in a task on its
/// loop (`Runtime::dump_fibers`, `Handle::dump_fibers`).
///
/// # Panics
///
/// On the thread of a local runtime outside its `block_on`: nothing would run the tasks
/// (`LocalRuntime::dump_fibers` lists them directly).
pub(crate) fn dump_fibers(rt: &RuntimeShared) -> Vec<metrics::FiberInfo> {
    let here = thread::current().id();
    assert!(
        worker::current().is_some() || !rt.workers.iter().any(|w| w.thread.get() == Some(&here)),
        "Handle::dump_fibers called on a LocalRuntime's thread outside its block_on: nothing runs \
         its worker there; use LocalRuntime::dump_fibers"
    );
    let handles: Vec<_> = rt
        .workers
        .iter()
        .map(|w| {
            crate::task::spawn::spawn_pinned(w.clone(), async {
                worker::current().map(|w| w.dump()).unwrap_or_default()
            })
        })
        .collect();
    handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
}
