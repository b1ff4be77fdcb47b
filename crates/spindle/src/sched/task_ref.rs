//! What the scheduler knows of an async task: [`TaskRef`], a handle it can poll, cancel and
//! list. The tasks themselves (futures, state word, join handles) are module `task`'s; the
//! scheduler only queues these handles, so it never depends on that module.

use std::fmt;
use std::sync::Arc;

/// A task as the workers see it.
pub(crate) type TaskRef = Arc<dyn TaskRun>;

/// What a worker does with a queued task.
pub(crate) trait TaskRun: Send + Sync {
    /// Polls the task once (on a worker's own stack, in the scheduler context).
    fn run(self: Arc<Self>);
    /// Shutdown: claims the task (waiting for a poll under way on another worker), drops the
    /// future and completes it as cancelled. A no-op on a finished task.
    fn cancel(self: Arc<Self>);
    /// Whether the task has completed (output stored, or cancelled).
    fn is_done(&self) -> bool;
    /// Marks the task as registered in a worker's live list; true the first time only.
    fn register_once(&self) -> bool;
}

impl fmt::Debug for dyn TaskRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task").field("done", &self.is_done()).finish()
    }
}
