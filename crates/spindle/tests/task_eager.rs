//! `task::spawn_eager`: the first poll happens inside the spawner's poll exactly when the
//! module `task` invariant "eager first polls take nothing from anyone" allows it (one
//! worker, no other task queued, from a task's poll, a unit of its budget left, not nested),
//! and an eagerly
//! polled task is then an ordinary task: woken, cancelled at shutdown, its panic caught; and
//! a spawn during shutdown is never polled.
//!
//! Whether a poll happened inside `spawn_eager` is read from a thread-local flag that the
//! spawner sets around the call: a poll inside the call sees it set; a later poll, on this
//! thread or another, does not.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use spindle::task::{spawn_eager, JoinHandle};
use spindle::Builder;

thread_local! {
    static INSIDE_SPAWN: Cell<bool> = const { Cell::new(false) };
}

/// Spawns `future` eagerly with the flag set around the call.
fn spawn_marked<F>(future: F) -> JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    INSIDE_SPAWN.with(|f| f.set(true));
    let h = spawn_eager(future);
    INSIDE_SPAWN.with(|f| f.set(false));
    h
}

/// A future that reports whether its first poll ran inside `spawn_marked`.
async fn report() -> bool {
    INSIDE_SPAWN.with(Cell::get)
}

fn runtime(workers: usize) -> spindle::Runtime {
    Builder::new().worker_threads(workers).build().unwrap()
}

#[test]
fn from_a_task_on_one_worker_the_first_poll_happens_inside_the_call() {
    let rt = runtime(1);
    let inline = rt.spawn_async(async { spawn_marked(report()).await.unwrap() }).join().unwrap();
    assert!(inline, "one worker, from a task's poll: polled before spawn_eager returned");
}

#[test]
fn with_two_workers_the_task_is_queued() {
    let rt = runtime(2);
    for _ in 0..20 {
        let inline = rt.spawn_async(async { spawn_marked(report()).await.unwrap() }).join().unwrap();
        assert!(!inline, "another worker could have run it: queued, not polled in the call");
    }
}

#[test]
fn with_other_tasks_queued_the_task_goes_behind_them() {
    let rt = runtime(1);
    let (inline, order) = rt
        .spawn_async(async {
            let order = Arc::new(std::sync::Mutex::new(Vec::new()));
            let o = order.clone();
            let older = spindle::task::spawn_async(async move { o.lock().unwrap().push("older") });
            let o = order.clone();
            let h = spawn_marked(async move {
                o.lock().unwrap().push("eager");
                report().await
            });
            let inline = h.await.unwrap();
            older.await.unwrap();
            let order = order.lock().unwrap().clone();
            (inline, order)
        })
        .join()
        .unwrap();
    assert!(!inline, "a task was queued: breadth first, the spawn is queued behind it");
    assert_eq!(order, ["older", "eager"]);
}

#[test]
fn from_a_fiber_the_task_is_queued() {
    let rt = runtime(1);
    let inline = rt.block_on(|| spawn_marked(report()).join().unwrap());
    assert!(!inline, "a fiber's call queues the task");
}

#[test]
fn eager_first_polls_do_not_nest() {
    let rt = runtime(1);
    let (outer, inner) = rt
        .spawn_async(async {
            spawn_marked(async {
                let outer = INSIDE_SPAWN.with(Cell::get);
                // The flag is still set: a nested eager poll would see it.
                let inner = spawn_eager(report());
                (outer, inner)
            })
            .await
            .unwrap()
        })
        .join()
        .unwrap();
    let inner = rt.block_on(move || inner.join().unwrap());
    assert!(outer, "the outer eager spawn was polled at once");
    assert!(!inner, "the spawn inside it was queued (polled after the flag was cleared)");
}

#[test]
fn a_poll_that_spawns_eagerly_in_a_loop_runs_one_budget_of_them_at_once_and_queues_the_rest() {
    let rt = runtime(1);
    let (inline, total) = rt
        .spawn_async(async {
            let handles: Vec<_> = (0..300).map(|_| spawn_marked(report())).collect();
            let mut inline = 0;
            for h in handles {
                inline += usize::from(h.await.unwrap());
            }
            (inline, 300)
        })
        .join()
        .unwrap();
    // A task poll's I/O budget is 128 units (module `sched::worker::coop`); each eager poll
    // takes one and these futures do no socket operation.
    assert_eq!(inline, 128, "one budget's worth polled at once, of {total}");
}

#[test]
fn an_eager_task_that_waits_is_woken_and_finishes_later() {
    let rt = runtime(1);
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let out = rt
        .spawn_async(async move {
            let h = spawn_marked(async move {
                p.fetch_add(1, Ordering::Relaxed);
                spindle::task::yield_now().await; // wakes itself: queued again
                p.fetch_add(1, Ordering::Relaxed);
                7
            });
            h.await.unwrap()
        })
        .join()
        .unwrap();
    assert_eq!(out, 7);
    assert_eq!(polls.load(Ordering::Relaxed), 2);
}

#[test]
fn an_eager_poll_that_panics_gives_the_panic_to_the_joiner_and_the_next_is_eager_again() {
    let rt = runtime(1);
    let (err, next_inline) = rt
        .spawn_async(async {
            let h = spawn_marked(async {
                panic!("eager boom");
            });
            let err = h.await.unwrap_err();
            (err.is_panic(), spawn_marked(report()).await.unwrap())
        })
        .join()
        .unwrap();
    assert!(err, "the panic reached the joiner");
    assert!(next_inline, "the worker left its eager poll behind: the next spawn is eager");
}

#[test]
fn an_eager_task_still_waiting_at_shutdown_is_cancelled_and_its_future_dropped() {
    struct Dropped(Arc<AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let rt = runtime(1);
    let d = dropped.clone();
    let handle = rt
        .spawn_async(async move {
            // Handed out, not awaited: the task outlives its spawner's poll.
            Some(spawn_marked(async move {
                let _guard = Dropped(d);
                std::future::pending::<()>().await;
            }))
        })
        .join()
        .unwrap()
        .unwrap();
    assert!(!dropped.load(Ordering::Relaxed), "still waiting while the runtime runs");
    drop(rt);
    assert!(dropped.load(Ordering::Relaxed), "shutdown dropped the eagerly polled future");
    let err = handle.join().unwrap_err();
    assert!(err.is_cancelled(), "completed as cancelled");
}

#[test]
fn a_spawn_from_a_destructor_during_shutdown_is_cancelled_unpolled() {
    /// Spawns eagerly when dropped: by the shutdown, which drops the waiting task's future.
    struct SpawnOnDrop(Arc<AtomicBool>, Arc<AtomicBool>);
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            let polled = self.0.clone();
            let spawned = self.1.clone();
            drop(spawn_eager(async move { polled.store(true, Ordering::Relaxed) }));
            spawned.store(true, Ordering::Relaxed);
        }
    }
    let polled = Arc::new(AtomicBool::new(false));
    let spawned = Arc::new(AtomicBool::new(false));
    let rt = runtime(1);
    let guard = SpawnOnDrop(polled.clone(), spawned.clone());
    // A task that waits forever holding the guard; its first poll has run when join returns.
    let started = rt
        .spawn_async(async move {
            Some(spindle::task::spawn_async(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            }))
        })
        .join()
        .unwrap()
        .unwrap();
    drop(rt);
    assert!(spawned.load(Ordering::Relaxed), "the shutdown dropped the guard, which spawned");
    assert!(!polled.load(Ordering::Relaxed), "a spawn during shutdown is never polled");
    assert!(started.join().unwrap_err().is_cancelled());
}
