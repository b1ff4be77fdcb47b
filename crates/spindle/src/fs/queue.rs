//! A file's operation queue: the mechanism that keeps a [`File`](super::File)'s operations in
//! order while they run on the file pool.
//!
//! # Invariants
//!
//! - **One operation at a time, in submission order.** Every operation on a `File` (a read, a
//!   write, a seek, `sync_all`, …) is pushed onto the file's queue under its lock, from the
//!   caller's thread, at the moment it is started. At most one *drain* runs the queue at a time
//!   (`Queue::draining`), and it pops and runs the operations one by one in FIFO order. So two
//!   operations never run at once on one file, and an operation never runs before one
//!   submitted earlier: a `File` shared by two fibers may interleave *whole* operations, as a
//!   std `File` shared by two threads does, but never reorders or corrupts one.
//! - **Eager submission.** An operation is queued when it is started, not when its caller
//!   next looks: a future that started an operation and was then dropped (or a fiber cancelled
//!   while it waits) leaves the operation queued; it runs in its place, and only its result is
//!   thrown away. A later operation therefore never overtakes an abandoned one.
//! - **Who drains.** The submitter that finds the queue idle starts a drain: as a job on the
//!   runtime's blocking pool when it is on a spindle worker, inline on its own thread
//!   otherwise (a plain thread stalls nobody). The drain ends, and clears `draining`, under the
//!   lock when it finds the queue empty, so an operation pushed after that starts a new drain.
//! - **Shutdown.** A drain job that the pool drops without running (its runtime shut down
//!   first) clears `draining` and drops the queued operations; their callers' receivers see
//!   the sender gone and report the shutdown as an error.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use super::pool::on_worker_pool;
use crate::lock::lock;
use crate::sync::oneshot::{self, Receiver};

/// A queued operation: runs on the draining thread, sends its result to its caller.
type Op = Box<dyn FnOnce(&std::fs::File) + Send>;

/// A std file and its operation queue, shared by the `File`, its drain and its clones' jobs.
pub(super) struct Shared {
    pub(super) std: std::fs::File,
    queue: Mutex<Queue>,
}

struct Queue {
    ops: VecDeque<Op>,
    /// A drain is running or about to (see the module doc).
    draining: bool,
}

impl Shared {
    pub(super) fn new(std: std::fs::File) -> Arc<Shared> {
        Arc::new(Shared { std, queue: Mutex::new(Queue { ops: VecDeque::new(), draining: false }) })
    }

    /// Whether an operation is queued or running.
    pub(super) fn busy(&self) -> bool {
        lock(&self.queue).draining
    }

    /// Queues `op` behind every operation submitted before it, starts a drain if none runs,
    /// and returns the receiver of its result (the sender is dropped unrun at shutdown).
    pub(super) fn submit<T, F>(self: &Arc<Self>, op: F) -> Receiver<T>
    where
        F: FnOnce(&std::fs::File) -> T + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::oneshot();
        let op: Op = Box::new(move |file| {
            // The receiver may be gone (an abandoned operation): the result is discarded.
            let _ = tx.send(op(file));
        });
        let start = {
            let mut queue = lock(&self.queue);
            queue.ops.push_back(op);
            !std::mem::replace(&mut queue.draining, true)
        };
        if start {
            let drain = Drain { shared: self.clone(), ran: false };
            match on_worker_pool() {
                // The handle is not needed: each operation reports through its own channel.
                Some(services) => drop(services.files.spawn(move || drain.run())),
                None => drain.run(),
            }
        }
        rx
    }
}

/// The right to run a file's queue (held by whoever set `draining`).
struct Drain {
    shared: Arc<Shared>,
    /// `run` was called; a drain dropped without it was cancelled by the pool's shutdown.
    ran: bool,
}

impl Drain {
    /// Runs the queued operations in order until the queue is empty, then clears `draining`.
    fn run(mut self) {
        self.ran = true;
        loop {
            let op = {
                let mut queue = lock(&self.shared.queue);
                match queue.ops.pop_front() {
                    Some(op) => op,
                    None => {
                        queue.draining = false;
                        return;
                    }
                }
            };
            // The operations are std calls, which do not panic; should one, its caller sees
            // its sender dropped (an error) and the operations behind it still run.
            let _ = catch_unwind(AssertUnwindSafe(|| op(&self.shared.std)));
        }
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        if !self.ran {
            let dropped = {
                let mut queue = lock(&self.shared.queue);
                queue.draining = false;
                std::mem::take(&mut queue.ops)
            };
            // Outside the lock: dropping an operation drops its sender, which wakes its caller.
            drop(dropped);
        }
    }
}
