//! M:N for async tasks: `Send` tasks spread over workers and are stolen by idle workers,
//! shutdown cancels every live task exactly once wherever it ran last, and `spawn_local`
//! (tasks and fibers) keeps work on its worker.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use spindle::task::yield_now;
use spindle::{Builder, Runtime};

fn runtime(workers: usize) -> Runtime {
    Builder::new().worker_threads(workers).build().unwrap()
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

type Threads = Arc<Mutex<HashSet<ThreadId>>>;

fn note_thread(threads: &Threads) -> usize {
    let mut t = threads.lock().unwrap();
    t.insert(std::thread::current().id());
    t.len()
}

#[test]
fn a_flooded_worker_has_its_tasks_stolen_and_all_complete() {
    let rt = runtime(2);
    let threads: Threads = Arc::default();
    let t2 = threads.clone();
    // All the tasks are spawned by one fiber, so they start on its worker; each does a bit of
    // work and yields until some task has run on a second thread (so the test ends whatever
    // the timing, once stealing has happened).
    let done = rt.block_on(move || {
        let handles: Vec<_> = (0..200)
            .map(|_| {
                let threads = t2.clone();
                spindle::task::spawn_async(async move {
                    for _ in 0..100_000 {
                        spin(Duration::from_micros(20));
                        if note_thread(&threads) >= 2 {
                            break;
                        }
                        yield_now().await;
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().is_ok() as usize).sum::<usize>()
    });
    assert_eq!(done, 200);
    assert_eq!(threads.lock().unwrap().len(), 2, "tasks were polled on both workers");
    let steals: u64 = rt.metrics().iter().map(|m| m.steals).sum();
    assert!(steals > 0, "the idle worker stole tasks: {:?}", rt.metrics());
}

#[test]
fn tasks_spawned_from_outside_spread_and_all_complete() {
    let rt = runtime(2);
    let count = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..1000)
        .map(|_| {
            let count = count.clone();
            rt.spawn_async(async move {
                for _ in 0..10 {
                    yield_now().await;
                }
                count.fetch_add(1, Ordering::Relaxed);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(count.load(Ordering::Relaxed), 1000);
}

/// Counts drops of the futures of tasks cancelled at shutdown.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn shutdown_cancels_every_task_exactly_once_wherever_it_ran() {
    for _ in 0..5 {
        let rt = runtime(2);
        let drops = Arc::new(AtomicUsize::new(0));
        let threads: Threads = Arc::default();
        let handles: Vec<_> = (0..300)
            .map(|i| {
                let guard = DropCount(drops.clone());
                let threads = threads.clone();
                rt.spawn_async(async move {
                    let _guard = guard;
                    loop {
                        note_thread(&threads);
                        if i % 3 == 0 {
                            // Some wait for a wake-up that never comes (in no queue).
                            std::future::pending::<()>().await;
                        }
                        yield_now().await;
                    }
                })
            })
            .collect();
        // Let them run (and move) for a while.
        let deadline = Instant::now() + Duration::from_secs(5);
        while threads.lock().unwrap().len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(rt);
        assert_eq!(drops.load(Ordering::SeqCst), 300, "every future dropped exactly once");
        for h in handles {
            let err = h.join().unwrap_err();
            assert!(err.is_cancelled());
        }
    }
}

/// A one-slot mailbox between two tasks: `put` wakes the taker (wherever it last ran).
#[derive(Default)]
struct Slot {
    inner: Mutex<(Option<u32>, Option<std::task::Waker>)>,
}

impl Slot {
    fn put(&self, v: u32) {
        let waker = {
            let mut g = self.inner.lock().unwrap();
            assert!(g.0.is_none());
            g.0 = Some(v);
            g.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn take(&self) -> impl Future<Output = u32> + '_ {
        std::future::poll_fn(move |cx| {
            let mut g = self.inner.lock().unwrap();
            match g.0.take() {
                Some(v) => Poll::Ready(v),
                None => {
                    g.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }
}

#[test]
fn wake_ups_between_tasks_on_different_workers_are_never_lost() {
    // 50 pairs of tasks play ping-pong through wakers, free to move between workers; a lost
    // wake-up would hang the test.
    let rt = runtime(2);
    let total = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..50 {
        let (ping, pong) = (Arc::new(Slot::default()), Arc::new(Slot::default()));
        let (ping2, pong2) = (ping.clone(), pong.clone());
        handles.push(rt.spawn_async(async move {
            for i in 0..200 {
                pong2.take().await;
                ping2.put(i);
            }
        }));
        let total = total.clone();
        handles.push(rt.spawn_async(async move {
            for i in 0..200 {
                pong.put(i);
                ping.take().await;
                total.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(total.load(Ordering::Relaxed), 50 * 200);
}

#[test]
fn spawn_local_tasks_never_leave_their_worker_even_when_it_is_flooded() {
    let rt = runtime(2);
    let ok = rt.block_on(|| {
        let home = std::thread::current().id();
        let handles: Vec<_> = (0..100)
            .map(|_| {
                // An Rc: the future is not Send.
                let local = std::rc::Rc::new(std::cell::Cell::new(0u32));
                spindle::task::spawn_local(async move {
                    for _ in 0..50 {
                        spin(Duration::from_micros(10));
                        local.set(local.get() + 1);
                        if std::thread::current().id() != home {
                            return false;
                        }
                        yield_now().await;
                    }
                    local.get() == 50
                })
            })
            .collect();
        handles.into_iter().all(|h| h.join().unwrap())
    });
    assert!(ok, "every spawn_local task ran on its spawner's thread");
}

#[test]
fn spawn_local_fibers_stay_on_their_worker_and_may_hold_rc() {
    let rt = runtime(2);
    let ok = rt.block_on(|| {
        let home = std::thread::current().id();
        let counter = std::rc::Rc::new(std::cell::Cell::new(0u32));
        let handles: Vec<_> = (0..200)
            .map(|_| {
                let counter = counter.clone();
                spindle::fiber::spawn_local(move || {
                    spin(Duration::from_micros(20)); // a backlog the other worker would want
                    counter.set(counter.get() + 1);
                    spindle::yield_now();
                    std::thread::current().id() == home
                })
            })
            .collect();
        let all_home = handles.into_iter().all(|h| h.join().unwrap());
        all_home && counter.get() == 200
    });
    assert!(ok);
}

#[test]
fn shutdown_drops_pending_local_tasks_on_their_worker() {
    let rt = runtime(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d2 = drops.clone();
    let handle = rt.block_on(move || {
        let rc = std::rc::Rc::new(DropCount(d2));
        spindle::task::spawn_local(async move {
            let _rc = rc;
            std::future::pending::<()>().await;
        })
    });
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(handle.join().unwrap_err().is_cancelled());
}
