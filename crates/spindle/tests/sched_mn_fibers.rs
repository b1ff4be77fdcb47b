//! M:N: several workers share new fibers, started fibers never move, cross-worker wake-ups
//! are never lost, and shutdown ends cleanly with fibers parked on every worker.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use spindle::sync::{channel, WaitGroup};
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

#[test]
fn new_fibers_spread_over_idle_workers_and_all_complete() {
    let rt = runtime(2);
    assert_eq!(rt.worker_threads(), 2);
    let threads = Arc::new(Mutex::new(HashSet::<ThreadId>::new()));
    let t2 = threads.clone();
    let done = rt.block_on(move || {
        let handles: Vec<_> = (0..200)
            .map(|_| {
                let threads = t2.clone();
                spindle::spawn(move || {
                    threads.lock().unwrap().insert(std::thread::current().id());
                    // Work until both workers have run some fiber (at most 20 ms each), so that
                    // the test does not depend on how soon the OS runs the second worker.
                    let t = Instant::now();
                    while threads.lock().unwrap().len() < 2 && t.elapsed() < Duration::from_millis(20) {
                        spin(Duration::from_micros(50));
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().is_ok() as usize).sum::<usize>()
    });
    assert_eq!(done, 200);
    assert_eq!(threads.lock().unwrap().len(), 2, "both workers ran fibers");
}

#[test]
fn a_started_fiber_never_changes_thread_across_workers() {
    let rt = runtime(2);
    let moved = Arc::new(AtomicUsize::new(0));
    let m2 = moved.clone();
    rt.block_on(move || {
        let (tx, rx) = channel::<u32>(1);
        let rx = Arc::new(rx);
        let handles: Vec<_> = (0..100)
            .map(|i| {
                let (tx, rx, moved) = (tx.clone(), rx.clone(), m2.clone());
                spindle::spawn(move || {
                    let first = std::thread::current().id();
                    for round in 0..20 {
                        match (i + round) % 3 {
                            0 => spindle::yield_now(),
                            1 => spindle::time::sleep(Duration::from_micros(100)),
                            _ => {
                                // Woken by fibers that may run on the other worker.
                                tx.send(i).unwrap();
                                let _ = rx.recv();
                            }
                        }
                        if std::thread::current().id() != first {
                            moved.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        handles.into_iter().for_each(|h| h.join().unwrap());
    });
    assert_eq!(moved.load(Ordering::SeqCst), 0, "a started fiber changed thread");
}

#[test]
fn a_flooded_worker_shares_its_backlog() {
    let rt = runtime(2);
    let per_thread = Arc::new(Mutex::new(std::collections::HashMap::<ThreadId, usize>::new()));
    let p2 = per_thread.clone();
    rt.block_on(move || {
        // One fiber spawns everything without yielding: the other worker must take a share.
        let wg = Arc::new(WaitGroup::new());
        wg.add(2000);
        for _ in 0..2000 {
            let (wg, p) = (wg.clone(), p2.clone());
            spindle::spawn(move || {
                spin(Duration::from_micros(20));
                *p.lock().unwrap().entry(std::thread::current().id()).or_default() += 1;
                wg.done();
            });
        }
        wg.wait();
    });
    let counts = per_thread.lock().unwrap();
    assert_eq!(counts.values().sum::<usize>(), 2000);
    assert_eq!(counts.len(), 2, "the second worker took part: {counts:?}");
}

#[test]
fn cross_worker_channels_lose_no_wake_up() {
    let rt = runtime(2);
    let total = rt.block_on(|| {
        let (tx, rx) = channel::<u64>(4);
        let (back_tx, back_rx) = channel::<u64>(4);
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let (rx, back_tx) = (rx.clone(), back_tx.clone());
                spindle::spawn(move || {
                    for v in rx.iter() {
                        back_tx.send(v).unwrap();
                    }
                })
            })
            .collect();
        drop((rx, back_tx));
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let tx = tx.clone();
                spindle::spawn(move || {
                    for i in 0..25_000u64 {
                        tx.send(p * 25_000 + i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let sum = back_rx.iter().sum::<u64>();
        producers.into_iter().chain(consumers).for_each(|h| h.join().unwrap());
        sum
    });
    assert_eq!(total, (0..100_000u64).sum::<u64>());
}

#[test]
fn a_hundred_thousand_fibers_from_one_worker_all_complete() {
    let rt = runtime(2);
    let n = rt.block_on(|| {
        let count = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..100_000)
            .map(|_| {
                let c = count.clone();
                spindle::spawn(move || {
                    c.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        count.load(Ordering::Relaxed)
    });
    assert_eq!(n, 100_000);
}

#[test]
fn shutdown_with_fibers_parked_on_every_worker_ends_cleanly() {
    let rt = runtime(2);
    let started = Arc::new(WaitGroup::new());
    started.add(50);
    let handles: Vec<_> = (0..50)
        .map(|_| {
            let started = started.clone();
            rt.spawn(move || {
                started.done();
                spindle::time::sleep(Duration::from_secs(3600));
            })
        })
        .collect();
    started.wait();
    drop(rt);
    for h in handles {
        assert!(h.join().unwrap_err().is_cancelled());
    }
}

#[test]
#[should_panic(expected = "at least one worker")]
fn zero_workers_is_a_clear_panic() {
    Builder::new().worker_threads(0);
}

#[test]
fn builder_worker_places_a_fiber_on_that_worker_for_good() {
    let rt = runtime(2);
    // From outside: one fiber per worker index (modulo the worker count), each reporting the
    // thread it started on and the one it ended on after yielding and sleeping.
    let handles: Vec<_> = (0..4)
        .map(|i| {
            spindle::fiber::Builder::new()
                .worker(i)
                .spawn_on(&rt, || {
                    let first = std::thread::current().id();
                    for _ in 0..10 {
                        spindle::yield_now();
                        spindle::time::sleep(Duration::from_millis(1));
                    }
                    (first, std::thread::current().id())
                })
                .unwrap()
        })
        .collect();
    let ids: Vec<(ThreadId, ThreadId)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(ids.iter().all(|(a, b)| a == b));
    assert_eq!(ids[0].0, ids[2].0, "index 2 wraps to worker 0");
    assert_eq!(ids[1].0, ids[3].0, "index 3 wraps to worker 1");
    assert_ne!(ids[0].0, ids[1].0, "workers 0 and 1 are different threads");
    // From inside: a fiber spawned for the other worker runs there.
    let (here, there) = rt.block_on(|| {
        let here = std::thread::current().id();
        let a = spindle::fiber::Builder::new().worker(0).spawn(|| std::thread::current().id()).unwrap();
        let b = spindle::fiber::Builder::new().worker(1).spawn(|| std::thread::current().id()).unwrap();
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        (here, if a == here { b } else { a })
    });
    assert_ne!(here, there);
}

/// Drops `rt` on another thread and fails the test if that takes more than a minute (the
/// failure this guards against is a hang, so the bound is generous).
fn drop_within_a_minute(rt: Runtime) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("dropping the runtime hung");
}

/// Counts its drops (a fiber's destructors ran).
struct Guard(Arc<AtomicUsize>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn shutdown_ends_fibers_that_only_switch_among_themselves() {
    // Fibers that yield forever, alone or together, and pairs that ping-pong forever over
    // channels: none of them ever returns to its worker's scheduler loop on its own.
    let rt = runtime(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(WaitGroup::new());
    running.add(8);
    let mut handles = Vec::new();
    for i in 0..4 {
        let (dropped, running) = (dropped.clone(), running.clone());
        let h = spindle::fiber::Builder::new().worker(i).spawn_on(&rt, move || {
            let _guard = Guard(dropped);
            running.done();
            loop {
                spindle::yield_now();
            }
        });
        handles.push(h.unwrap());
    }
    for i in 0..2 {
        let (ping_tx, ping_rx) = channel::<u64>(1);
        let (pong_tx, pong_rx) = channel::<u64>(1);
        let (d1, r1) = (dropped.clone(), running.clone());
        let a = spindle::fiber::Builder::new().worker(i).spawn_on(&rt, move || {
            let _guard = Guard(d1);
            r1.done();
            let mut n = 0;
            loop {
                ping_tx.send(n).unwrap();
                n = pong_rx.recv().unwrap() + 1;
            }
        });
        let (d2, r2) = (dropped.clone(), running.clone());
        let b = spindle::fiber::Builder::new().worker(i).spawn_on(&rt, move || {
            let _guard = Guard(d2);
            r2.done();
            while let Ok(n) = ping_rx.recv() {
                if pong_tx.send(n).is_err() {
                    break;
                }
            }
        });
        handles.push(a.unwrap());
        handles.push(b.unwrap());
    }
    running.wait();
    drop_within_a_minute(rt);
    assert_eq!(dropped.load(Ordering::SeqCst), 8, "every fiber ran its destructors");
    for h in handles {
        // Cancelled, or (for a ping-pong partner that saw its channel close while the other
        // unwound first) a clean end or a channel error: never a hang.
        let _ = h.join();
    }
}

#[test]
fn a_pinned_spawn_aimed_at_a_worker_that_already_stopped_is_cancelled() {
    let rt = runtime(2);
    let (tx, rx) = std::sync::mpsc::channel();
    let parked = Arc::new(WaitGroup::new());
    parked.add(1);
    let p = parked.clone();
    // A fiber on worker 0 whose destructor (run when shutdown cancels it) waits until worker 1
    // has most likely exited, then spawns a fiber pinned to worker 1.
    struct SpawnOnDrop(std::sync::mpsc::Sender<spindle::JoinHandle<u32>>);
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            // Holds the worker's thread: a spin, not a sleep (with the `hook` feature a sleep
            // in a fiber parks, and in a cancelled one returns at once).
            let until = std::time::Instant::now() + Duration::from_millis(200);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
            let h = spindle::fiber::Builder::new().worker(1).spawn(|| 7).unwrap();
            let _ = self.0.send(h);
        }
    }
    let holder = spindle::fiber::Builder::new()
        .worker(0)
        .spawn_on(&rt, move || {
            let _spawn = SpawnOnDrop(tx);
            p.done();
            spindle::time::sleep(Duration::from_secs(3600));
        })
        .unwrap();
    parked.wait();
    drop_within_a_minute(rt);
    assert!(holder.join().unwrap_err().is_cancelled());
    let late = rx.recv_timeout(Duration::from_secs(5)).expect("the destructor spawned");
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(late.join());
    });
    let result = done_rx.recv_timeout(Duration::from_secs(60)).expect("joining the late fiber hung");
    assert!(result.unwrap_err().is_cancelled());
}
