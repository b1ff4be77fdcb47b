//! "All fibers are asleep": a runtime whose every fiber and task waits for something that
//! nothing can bring any more (a join cycle, a lost wake-up, a sender that is kept but never
//! used) is reported, as Go reports "all goroutines are asleep - deadlock!", instead of
//! hanging: the fiber dump goes to stderr and the `block_on` waiting on the runtime panics
//! with it.
//!
//! # When it is declared
//!
//! Only when it is provable from what the runtime sees, which is conservative: a fiber parked
//! on a channel whose sender lives on a thread outside the runtime is not asleep for good, and
//! spindle cannot see who holds a sender. So the rule is about threads:
//!
//! - **every worker sleeps in its reactor without a timeout**: no fiber or task is runnable,
//!   no timer is pending on any worker, and none of them holds an I/O registration (a socket,
//!   a pipe, a child's pidfd, the signal pipe: the kernel could wake it), nor does the shared
//!   task reactor; the injectors are empty;
//! - **a thread waits in `block_on`** for the runtime (a local runtime's `block_on` is its
//!   worker's loop);
//! - **no thread outside the runtime exists**: the process's threads are exactly the
//!   runtime's workers, its watchdog, its blocking pools' threads, all idle (no job queued or
//!   running: a job could wake a fiber), and the threads waiting in its `block_on`. Any other
//!   thread (the test harness's, a logger's, another runtime's, the tokio bridge's) might hold
//!   a sender or a `Fiber` handle, and the deadlock is then not declared;
//! - **it holds on two looks in a row** of the watchdog (half its budget apart), with no
//!   worker's progress or sleep counter moving in between: nothing ran meanwhile.
//!
//! Once all threads of the process are accounted for and asleep, nothing but the kernel can
//! make anything runnable, and the first condition rules the kernel out.
//!
//! # Invariants
//!
//! - **Read only.** The detector runs on the watchdog thread and only reads what workers
//!   publish (their `sleeping` and `sleep_untimed` flags, counters, registrations). Acting on a
//!   deadlock (the dump, failing `block_on`) is the runtime's ([`Outside::declare`]), through
//!   tasks the sleeping workers run.
//! - **Once per deadlock.** After a declaration the detector waits for the workers' counters
//!   to move before it may declare again.

use std::sync::atomic::Ordering;

use super::RuntimeShared;

/// What the runtime knows beyond its workers: its other threads, and how to act.
pub(crate) trait Outside: Send {
    /// The process's threads the runtime accounts for besides its watchdog (its workers'
    /// threads, or a local runtime's one thread; its blocking pools' threads; the threads in
    /// `block_on`), when all of them are quiet: `None` when a pool runs or queues a job, or
    /// when no thread waits in `block_on`.
    fn quiet_threads(&self, rt: &RuntimeShared) -> Option<usize>;

    /// Reports the deadlock (`message` is the headline) and fails the `block_on` calls
    /// waiting on the runtime.
    fn declare(&self, rt: &RuntimeShared, message: &str);
}

/// The watchdog's deadlock detector for one runtime.
pub(crate) struct Detector {
    outside: Box<dyn Outside>,
    /// The workers' progress and sleep counters at the last look that found the runtime
    /// asleep.
    asleep: Option<Vec<(u64, u64)>>,
    /// The counters when a deadlock was last declared ("once per deadlock").
    declared: Option<Vec<(u64, u64)>>,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector").field("asleep", &self.asleep).finish_non_exhaustive()
    }
}

/// The headline of the report, as Go words it.
pub(crate) const HEADLINE: &str = "all fibers are asleep - deadlock!";

impl Detector {
    pub(crate) fn new(outside: Box<dyn Outside>) -> Detector {
        Detector { outside, asleep: None, declared: None }
    }

    /// One look (the watchdog calls it every half budget).
    pub(crate) fn look(&mut self, rt: &RuntimeShared) {
        let Some(now) = asleep(rt, &*self.outside) else {
            self.asleep = None;
            return;
        };
        if self.declared.as_ref() == Some(&now) {
            return; // declared already; nothing ran since
        }
        if self.asleep.as_ref() == Some(&now) {
            self.declared = Some(now);
            self.asleep = None;
            self.outside.declare(rt, HEADLINE);
        } else {
            self.asleep = Some(now);
        }
    }
}

/// The workers' counters if the runtime is asleep for good by the rule of the module doc.
fn asleep(rt: &RuntimeShared, outside: &dyn Outside) -> Option<Vec<(u64, u64)>> {
    if !rt.injector_is_empty() || !rt.task_injector_is_empty() {
        return None;
    }
    if rt.io.as_ref().is_some_and(|io| io.driver.has_registrations()) {
        return None;
    }
    let mut counters = Vec::with_capacity(rt.workers.len());
    for w in &rt.workers {
        let asleep = w.in_loop.load(Ordering::Acquire)
            && w.stats.sleeping.load(Ordering::Acquire)
            && w.sleep_untimed.load(Ordering::Acquire)
            && !w.driver.has_registrations();
        if !asleep {
            return None;
        }
        counters.push((w.stats.progress.load(Ordering::Relaxed), w.stats.sleeps.load(Ordering::Relaxed)));
    }
    // The watchdog's own thread, and the others the runtime knows.
    let known = outside.quiet_threads(rt)? + 1;
    (process_threads()? == known).then_some(counters)
}

/// The number of threads of this process (`/proc/self/stat`, field 20), if readable.
pub(crate) fn process_threads() -> Option<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(17)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_process_thread_count_is_read() {
        let before = super::process_threads().expect("readable /proc/self/stat");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv());
        assert!(before >= 1 && super::process_threads().unwrap() >= 2);
        drop(tx);
        let _ = t.join();
    }
}
