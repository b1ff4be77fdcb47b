//! The runtime's side of deadlock reports (module `sched::deadlock` has the rule): what it
//! knows of its other threads, the report (the fiber dump, on stderr and in the panic), and
//! `Runtime::block_on`'s wait, which such a report fails.

use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};

use super::dump::dump_fibers;
use crate::fiber::JoinHandle;
use crate::sched::deadlock::Outside;
use crate::sched::{worker, RuntimeShared};
use crate::services::Services;

/// What a runtime tells its watchdog's deadlock detector.
pub(super) struct RuntimeOutside {
    pub(super) services: Weak<Services>,
    /// A local runtime: its one worker is the thread in `block_on`.
    pub(super) local: bool,
}

impl Outside for RuntimeOutside {
    fn quiet_threads(&self, rt: &RuntimeShared) -> Option<usize> {
        let services = self.services.upgrade()?;
        let waiting = rt.waiters.count();
        if waiting == 0 {
            return None;
        }
        let workers = if self.local { 0 } else { rt.workers.len() };
        Some(workers + waiting + services.blocking.quiet_threads()? + services.files.quiet_threads()?)
    }

    fn declare(&self, rt: &RuntimeShared, headline: &str) {
        let dump = dump_fibers(rt);
        let mut report =
            format!("spindle: {headline} {} fibers wait for what nothing can bring:", dump.len());
        for f in &dump {
            let _ = write!(
                report,
                "\n  fiber {} \"{}\" on worker {}, spawned at {}: {}",
                f.id,
                f.name.as_deref().unwrap_or("<unnamed>"),
                f.worker,
                f.spawned_at,
                if f.waiting_on == "runnable" {
                    "runnable".to_owned()
                } else {
                    format!("waiting on {}", f.waiting_on)
                }
            );
        }
        let _ = write!(
            report,
            "\n(every worker sleeps with no timer and no I/O registration, and no thread outside the \
             runtime could wake them)"
        );
        // On stderr whatever the logging setup, as Go prints it.
        eprintln!("{report}");
        rt.waiters.fail_all(report.into());
        if self.local {
            // The local runtime's `block_on` runs the loop: make it leave, to fail there.
            drop(crate::task::spawn::spawn_pinned(rt.workers[0].clone(), async {
                if let Some(worker) = worker::current() {
                    worker.leave_soon();
                }
            }));
        }
    }
}

/// Unparks the thread waiting in `Runtime::block_on`.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// `Runtime::block_on`'s wait for its fiber on the calling thread: its result (a panic resumes
/// here), or a panic with the deadlock report if one fails it first.
pub(super) fn wait_block_on<T>(rt: &RuntimeShared, mut handle: JoinHandle<T>) -> T {
    let ticket = rt.waiters.enter();
    let _leave = Leave(rt, ticket);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(result) = Pin::new(&mut handle).poll(&mut cx) {
            return match result {
                Ok(value) => value,
                Err(err) => std::panic::resume_unwind(err.into_panic()),
            };
        }
        if let Some(report) = rt.waiters.failed(ticket) {
            panic!("{report}");
        }
        std::thread::park();
    }
}

/// Unregisters a `block_on` waiter however its wait ends.
pub(super) struct Leave<'a>(pub(super) &'a RuntimeShared, pub(super) u64);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.waiters.leave(self.1);
    }
}
