//! Which workers are idle: the protocol that keeps new work from waiting in a shared queue
//! (the fiber injector, the task injector) while a worker sleeps. Model-checked with loom
//! below.
//!
//! Each worker has an `idle` flag; `count` says how many flags are set (a hint that lets a
//! producer skip the scan when no worker is idle).
//!
//! - A worker about to sleep **announces** itself ([`IdleSet::enter`]: set its flag, bump the
//!   count, `SeqCst` fence), then looks at the shared queues one last time; if they are empty it
//!   goes to sleep through its reactor's `SleepGate`.
//! - A producer pushes to a shared queue, issues a `SeqCst` fence, then **claims** one idle
//!   worker ([`IdleSet::claim_one`]: the first flag it can swap from set to clear) and publishes
//!   remote work to that worker's `SleepGate`, which writes its eventfd if it sleeps.
//! - The two fences are totally ordered. If the worker's comes first, the producer sees its
//!   flag (or count); if the producer's comes first, the worker sees the pushed item. So no
//!   item waits in a shared queue while every worker sleeps: either a worker sees it before
//!   sleeping, or a producer wakes a worker after pushing it.
//! - A flag is cleared by exactly one party: the worker itself when it stops being idle
//!   ([`IdleSet::leave`]), or the producer that claims it, which then owes the worker a
//!   wake-up. A claimed worker is therefore woken once per claim, and at most one worker is
//!   woken per pushed item (no thundering herd).
//!
//! The flags and count are the only shared state; the loom model stands the queue in with an
//! atomic counter and the eventfd with a `Notify` (sticky, like the eventfd). The models run
//! with a bound of 3 preemptions (the unbounded search of 3 and 4 threads takes hours).

use std::sync::atomic::Ordering;

use crate::loom::{fence, AtomicBool, AtomicUsize};

#[derive(Debug)]
pub(crate) struct IdleSet {
    flags: Box<[AtomicBool]>,
    /// How many flags are set (a hint: read without the fence it may be stale).
    count: AtomicUsize,
}

impl IdleSet {
    pub(crate) fn new(workers: usize) -> IdleSet {
        IdleSet { flags: (0..workers).map(|_| AtomicBool::new(false)).collect(), count: AtomicUsize::new(0) }
    }

    /// Worker `i` announces that it is about to sleep; it must look at the shared queues
    /// after this returns, and sleep only if they are empty.
    pub(crate) fn enter(&self, i: usize) {
        if !self.flags[i].swap(true, Ordering::SeqCst) {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
    }

    /// Worker `i` is busy again: clears its flag unless a producer claimed it already.
    pub(crate) fn leave(&self, i: usize) {
        if self.flags[i].swap(false, Ordering::SeqCst) {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether some worker is idle, without a fence (a hint for placement decisions).
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// A producer that has pushed to a shared queue claims one idle worker, which it must
    /// then wake. Issues the producer's fence itself.
    pub(crate) fn claim_one(&self) -> Option<usize> {
        fence(Ordering::SeqCst);
        if self.count.load(Ordering::SeqCst) == 0 {
            return None;
        }
        for (i, flag) in self.flags.iter().enumerate() {
            if flag.swap(false, Ordering::SeqCst) {
                self.count.fetch_sub(1, Ordering::SeqCst);
                return Some(i);
            }
        }
        None
    }
}

#[cfg(all(test, spindle_loom))]
mod loom_tests {
    use super::*;
    use crate::reactor::sleep_gate::SleepGate;
    use loom::sync::atomic::AtomicUsize as Counter;
    use loom::sync::{Arc, Notify};
    use loom::thread;

    /// A worker of the model: its gate and its eventfd.
    struct Worker {
        gate: SleepGate,
        eventfd: Notify,
    }

    struct Model {
        idle: IdleSet,
        /// The shared queue: how many items wait in it.
        queue: Counter,
        workers: Vec<Worker>,
        shutdown: loom::sync::atomic::AtomicBool,
        /// Notified by the worker that takes an item.
        took: Notify,
    }

    impl Model {
        fn new(workers: usize) -> Arc<Model> {
            Arc::new(Model {
                idle: IdleSet::new(workers),
                queue: Counter::new(0),
                workers: (0..workers)
                    .map(|_| Worker { gate: SleepGate::new(), eventfd: Notify::new() })
                    .collect(),
                shutdown: loom::sync::atomic::AtomicBool::new(false),
                took: Notify::new(),
            })
        }

        /// `RuntimeShared::inject` + `wake_one_idle`.
        fn push(&self) {
            self.queue.fetch_add(1, Ordering::SeqCst);
            if let Some(i) = self.idle.claim_one() {
                if self.workers[i].gate.publish() {
                    self.workers[i].eventfd.notify();
                }
            }
        }

        fn try_take(&self) -> bool {
            let mut n = self.queue.load(Ordering::SeqCst);
            while n > 0 {
                match self.queue.compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => return true,
                    Err(actual) => n = actual,
                }
            }
            false
        }

        /// The worker loop of `Worker::run` + `Worker::idle`, until `want` items were taken
        /// (by this worker, or by all when `taken` is shared) or shutdown.
        fn work(&self, i: usize, taken: &Counter, want: usize) {
            let me = &self.workers[i];
            loop {
                if self.try_take() {
                    taken.fetch_add(1, Ordering::SeqCst);
                    self.took.notify();
                    continue;
                }
                if taken.load(Ordering::SeqCst) >= want || self.shutdown.load(Ordering::SeqCst) {
                    return;
                }
                me.gate.take_inbox();
                self.idle.enter(i);
                if self.queue.load(Ordering::SeqCst) > 0 {
                    self.idle.leave(i);
                    continue;
                }
                if me.gate.enter() {
                    if !self.shutdown.load(Ordering::SeqCst) {
                        me.eventfd.wait();
                    }
                    me.gate.leave();
                }
                self.idle.leave(i);
            }
        }
    }

    /// One worker, two producers on other threads: the worker gets both items. A lost
    /// wake-up leaves it asleep forever, which loom reports as a deadlock.
    /// Loom with a bound on preemptions (as tokio's loom tests use): the unbounded search
    /// of these 3- and 4-thread models runs for hours.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        builder.check(f);
    }

    #[test]
    fn loom_no_item_waits_in_the_injector_while_the_worker_sleeps() {
        model(|| {
            let model = Model::new(1);
            let producers: Vec<_> = (0..2)
                .map(|_| {
                    let model = model.clone();
                    thread::spawn(move || model.push())
                })
                .collect();
            let taken = Counter::new(0);
            model.work(0, &taken, 2);
            for p in producers {
                p.join().unwrap();
            }
            assert_eq!(taken.load(Ordering::SeqCst), 2);
        });
    }

    /// Two workers and one producer: whichever worker the item reaches, it is taken while
    /// both may be going to sleep. Afterwards the main thread shuts the workers down (as
    /// `Runtime::drop` does: a flag, then a forced eventfd write).
    #[test]
    fn loom_an_item_reaches_one_of_two_sleeping_workers() {
        model(|| {
            let model = Model::new(2);
            let taken = Arc::new(Counter::new(0));
            let workers: Vec<_> = (0..2)
                .map(|i| {
                    let (model, taken) = (model.clone(), taken.clone());
                    thread::spawn(move || model.work(i, &taken, 1))
                })
                .collect();
            model.push();
            // If both workers slept with the item queued, this would wait forever: loom
            // reports the deadlock. (Loom's Notify may wake spuriously, hence the loop.)
            while taken.load(Ordering::SeqCst) == 0 {
                model.took.wait();
            }
            model.shutdown.store(true, Ordering::SeqCst);
            for w in &model.workers {
                w.eventfd.notify();
            }
            for w in workers {
                w.join().unwrap();
            }
            assert_eq!(taken.load(Ordering::SeqCst), 1);
        });
    }
}
