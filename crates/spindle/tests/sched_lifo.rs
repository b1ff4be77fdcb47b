//! The LIFO slots (module `sched::worker`, "LIFO slots"): a task or fiber woken by code running
//! on its worker runs next, ahead of older queued work, unless the task is batched ("batched
//! tasks": it goes behind them) or the fiber is a joiner woken by a completion (module
//! `park::completion`: it goes behind them too); the cap on consecutive LIFO runs keeps
//! a ping-pong pair from starving the rest (tasks, fibers, timers); a flood of wake-ups is
//! still stolen by an idle worker; and no wake-up is lost when pairs play across workers.
//!
//! Nothing here asserts on timings: a starvation or a lost wake-up shows as a hang.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use spindle::task::yield_now;
use spindle::{Builder, Runtime};

fn runtime(workers: usize) -> Runtime {
    Builder::new().worker_threads(workers).build().unwrap()
}

#[path = "support/mailbox.rs"]
mod mailbox;
use mailbox::Mailbox;

type Log = Arc<Mutex<Vec<String>>>;

fn note(log: &Log, what: impl Into<String>) {
    log.lock().unwrap().push(what.into());
}

/// From a fiber: yields until `mailbox` has a waiting receiver (its task was polled once).
fn wait_for_waiter(mailbox: &Mailbox) {
    while !mailbox.has_waiter() {
        spindle::yield_now();
    }
}

#[test]
fn a_woken_task_runs_before_older_queued_tasks() {
    let rt = runtime(1);
    let log: Log = Arc::default();
    let log2 = log.clone();
    rt.block_on(move || {
        let log = log2;
        let mailbox = Mailbox::default();
        let (mb, l) = (mailbox.clone(), log.clone());
        let woken = spindle::task::spawn_async(async move {
            mb.recv().await;
            note(&l, "woken");
        });
        wait_for_waiter(&mailbox);
        let l = log.clone();
        let waker = spindle::task::spawn_async(async move {
            // Four tasks queue up first, then the wake-up: FIFO order would run them first.
            let older: Vec<_> = (0..4)
                .map(|i| {
                    let l = l.clone();
                    spindle::task::spawn_async(async move { note(&l, format!("older {i}")) })
                })
                .collect();
            mailbox.send(1);
            older
        });
        for h in waker.join().unwrap() {
            h.join().unwrap();
        }
        woken.join().unwrap();
    });
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 5);
    assert_eq!(log[0], "woken", "the woken task ran first: {log:?}");
    assert_eq!(log[1..], ["older 0", "older 1", "older 2", "older 3"], "the others kept their order");
}

#[test]
fn a_woken_batched_task_runs_after_older_queued_tasks() {
    let rt = runtime(1);
    let log: Log = Arc::default();
    let log2 = log.clone();
    rt.block_on(move || {
        let log = log2;
        let mailbox = Mailbox::default();
        let (mb, l) = (mailbox.clone(), log.clone());
        let woken = spindle::task::Builder::new().batched(true).spawn(async move {
            mb.recv().await;
            note(&l, "woken");
        });
        wait_for_waiter(&mailbox);
        let l = log.clone();
        let waker = spindle::task::spawn_async(async move {
            // Four tasks queue up first, then the wake-up: the slot would run it first.
            let older: Vec<_> = (0..4)
                .map(|i| {
                    let l = l.clone();
                    spindle::task::spawn_async(async move { note(&l, format!("older {i}")) })
                })
                .collect();
            mailbox.send(1);
            older
        });
        for h in waker.join().unwrap() {
            h.join().unwrap();
        }
        woken.join().unwrap();
    });
    let log = log.lock().unwrap();
    assert_eq!(*log, ["older 0", "older 1", "older 2", "older 3", "woken"], "FIFO order: {log:?}");
}

#[test]
fn a_woken_local_task_runs_before_older_queued_local_tasks() {
    let rt = runtime(1);
    let log: Log = Arc::default();
    let log2 = log.clone();
    rt.block_on(move || {
        let log = log2;
        let mailbox = Mailbox::default();
        let (mb, l) = (mailbox.clone(), log.clone());
        let woken = spindle::task::spawn_local(async move {
            mb.recv().await;
            note(&l, "woken");
        });
        wait_for_waiter(&mailbox);
        let l = log.clone();
        let waker = spindle::task::spawn_local(async move {
            let older: Vec<_> = (0..4)
                .map(|i| {
                    let l = l.clone();
                    spindle::task::spawn_local(async move { note(&l, format!("older {i}")) })
                })
                .collect();
            mailbox.send(1);
            older
        });
        for h in waker.join().unwrap() {
            h.join().unwrap();
        }
        woken.join().unwrap();
    });
    let log = log.lock().unwrap();
    assert_eq!(log[0], "woken", "the woken local task ran first: {log:?}");
    assert_eq!(log[1..], ["older 0", "older 1", "older 2", "older 3"]);
}

#[test]
fn a_woken_fiber_runs_before_older_queued_fibers() {
    let rt = runtime(1);
    let log: Log = Arc::default();
    let log2 = log.clone();
    rt.block_on(move || {
        let log = log2;
        let (tx, rx) = spindle::sync::channel::<u64>(1);
        let l = log.clone();
        let woken = spindle::spawn(move || {
            rx.recv().unwrap();
            note(&l, "woken");
        });
        spindle::yield_now(); // `woken` runs and parks in recv
        let older: Vec<_> = (0..4)
            .map(|i| {
                let l = log.clone();
                spindle::spawn(move || note(&l, format!("older {i}")))
            })
            .collect();
        tx.send(1).unwrap(); // unparks `woken`: it runs at our next switch, before the others
        woken.join().unwrap();
        for h in older {
            h.join().unwrap();
        }
    });
    let log = log.lock().unwrap();
    assert_eq!(log[0], "woken", "the woken fiber ran first: {log:?}");
    assert_eq!(log[1..], ["older 0", "older 1", "older 2", "older 3"]);
}

#[test]
fn a_yielding_fiber_goes_behind_the_others_even_after_a_wake_up() {
    // A yield is not a wake-up: the yielder queues at the back, the woken fiber runs next.
    let rt = runtime(1);
    let log: Log = Arc::default();
    let log2 = log.clone();
    rt.block_on(move || {
        let log = log2;
        let (tx, rx) = spindle::sync::channel::<u64>(1);
        let l = log.clone();
        let woken = spindle::spawn(move || {
            rx.recv().unwrap();
            note(&l, "woken");
        });
        spindle::yield_now();
        let l = log.clone();
        let other = spindle::spawn(move || note(&l, "other"));
        tx.send(1).unwrap();
        spindle::yield_now();
        note(&log, "yielder");
        woken.join().unwrap();
        other.join().unwrap();
    });
    assert_eq!(*log.lock().unwrap(), ["woken", "other", "yielder"]);
}

#[test]
fn a_joiner_woken_by_a_completion_runs_after_older_queued_fibers() {
    // Module `park::completion`, "a completion wakes its joiner behind the queue": unlike the
    // wake-up above, the joiner goes to the back, so a fiber joining many in turn runs once
    // per pass instead of after each completion.
    let rt = runtime(1);
    let log: Log = Arc::default();
    let log2 = log.clone();
    rt.block_on(move || {
        let log = log2;
        let l = log.clone();
        let first = spindle::spawn(move || note(&l, "first"));
        let older: Vec<_> = (0..3)
            .map(|i| {
                let l = log.clone();
                spindle::spawn(move || note(&l, format!("older {i}")))
            })
            .collect();
        first.join().unwrap(); // parks; `first` runs and its completion wakes us
        note(&log, "joiner");
        for h in older {
            h.join().unwrap();
        }
    });
    assert_eq!(*log.lock().unwrap(), ["first", "older 0", "older 1", "older 2", "joiner"]);
}

#[test]
fn a_fiber_joining_many_in_turn_parks_once_per_pass() {
    // 1,000 fibers that finish at their first run, joined in spawn order: the joiner parks at
    // the first join, is queued behind the other 999 when the first completes, and finds
    // them all finished when it runs again. Counted through the worker's switches into
    // fibers: the 1,000 first runs and a few of the joiner's, where a joiner woken after
    // each completion would add 1,000 more.
    let rt = runtime(1);
    let resumed = |rt: &Runtime| rt.metrics().iter().map(|m| m.fibers_resumed).sum::<u64>();
    let before = resumed(&rt);
    rt.block_on(|| {
        let handles: Vec<_> = (0..1000u32).map(|i| spindle::spawn(move || i)).collect();
        let sum: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, 999 * 1000 / 2);
    });
    let resumptions = resumed(&rt) - before;
    assert!(
        resumptions < 1100,
        "{resumptions} switches for 1,000 joins: the joiner ran after each completion"
    );
}

/// A task pair that plays ping-pong until `stop`, and counts its round trips.
fn task_pair(stop: Arc<AtomicBool>, rounds: Arc<AtomicUsize>) -> Vec<spindle::task::JoinHandle<()>> {
    let (to_pong, to_ping) = (Mailbox::default(), Mailbox::default());
    let (a, b) = (to_pong.clone(), to_ping.clone());
    let ping = spindle::task::spawn_async(async move {
        loop {
            let last = stop.load(Ordering::Relaxed);
            a.send(u64::from(last));
            b.recv().await;
            rounds.fetch_add(1, Ordering::Relaxed);
            if last {
                return;
            }
        }
    });
    let pong = spindle::task::spawn_async(async move {
        loop {
            let v = to_pong.recv().await;
            to_ping.send(v);
            if v == 1 {
                return;
            }
        }
    });
    vec![ping, pong]
}

#[test]
fn a_task_pingpong_pair_cannot_starve_a_third_task() {
    // Without the cap, the pair would keep the LIFO slot to itself: the third task would never
    // be polled again and the test would hang.
    let rt = runtime(1);
    let rounds = rt.block_on(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicUsize::new(0));
        let pair = task_pair(stop.clone(), rounds.clone());
        let third = spindle::task::spawn_async(async move {
            for _ in 0..1000 {
                yield_now().await;
            }
            stop.store(true, Ordering::Relaxed);
        });
        third.join().unwrap();
        for h in pair {
            h.join().unwrap();
        }
        rounds.load(Ordering::Relaxed)
    });
    assert!(rounds > 0);
}

/// A fiber pair that plays ping-pong over blocking channels until `stop`.
fn fiber_pair(stop: Arc<AtomicBool>) -> Vec<spindle::JoinHandle<()>> {
    let (ping_tx, ping_rx) = spindle::sync::channel::<bool>(1);
    let (pong_tx, pong_rx) = spindle::sync::channel::<bool>(1);
    let ping = spindle::spawn(move || loop {
        let last = stop.load(Ordering::Relaxed);
        ping_tx.send(last).unwrap();
        pong_rx.recv().unwrap();
        if last {
            return;
        }
    });
    let pong = spindle::spawn(move || loop {
        let last = ping_rx.recv().unwrap();
        pong_tx.send(last).unwrap();
        if last {
            return;
        }
    });
    vec![ping, pong]
}

#[test]
fn a_fiber_pingpong_pair_cannot_starve_a_third_fiber() {
    let rt = runtime(1);
    rt.block_on(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let pair = fiber_pair(stop.clone());
        let third = spindle::spawn(move || {
            for _ in 0..1000 {
                spindle::yield_now();
            }
            stop.store(true, Ordering::Relaxed);
        });
        third.join().unwrap();
        for h in pair {
            h.join().unwrap();
        }
    });
}

#[test]
fn timers_and_tasks_progress_while_a_fiber_pair_pingpongs() {
    let rt = runtime(1);
    rt.block_on(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let pair = fiber_pair(stop.clone());
        let sleeper = spindle::spawn(|| spindle::time::sleep(Duration::from_millis(5)));
        let task = spindle::task::spawn_async(async {
            for _ in 0..100 {
                yield_now().await;
            }
        });
        sleeper.join().unwrap();
        task.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        for h in pair {
            h.join().unwrap();
        }
    });
}

#[test]
fn a_flood_of_wake_ups_is_still_stolen_by_the_idle_worker() {
    // 200 tasks wait on mailboxes; one task wakes them all, so they are all queued on its
    // worker (one in the LIFO slot, the rest in the stealable queue). The other worker, idle,
    // must steal some: each task works and yields until tasks have run on both threads.
    let rt = runtime(2);
    let threads: Arc<Mutex<HashSet<ThreadId>>> = Arc::default();
    let t2 = threads.clone();
    let done = rt.block_on(move || {
        let mailboxes: Vec<Mailbox> = (0..200).map(|_| Mailbox::default()).collect();
        let handles: Vec<_> = mailboxes
            .iter()
            .map(|mb| {
                let (mb, threads) = (mb.clone(), t2.clone());
                spindle::task::spawn_async(async move {
                    mb.recv().await;
                    for _ in 0..100_000 {
                        let start = Instant::now();
                        while start.elapsed() < Duration::from_micros(20) {
                            std::hint::spin_loop();
                        }
                        let seen = {
                            let mut t = threads.lock().unwrap();
                            t.insert(std::thread::current().id());
                            t.len()
                        };
                        if seen >= 2 {
                            break;
                        }
                        yield_now().await;
                    }
                })
            })
            .collect();
        for mb in &mailboxes {
            wait_for_waiter(mb);
        }
        spindle::task::spawn_async(async move {
            for mb in &mailboxes {
                mb.send(1);
            }
        })
        .join()
        .unwrap();
        handles.into_iter().map(|h| h.join().is_ok() as usize).sum::<usize>()
    });
    assert_eq!(done, 200);
    assert_eq!(threads.lock().unwrap().len(), 2, "woken tasks were polled on both workers");
}

#[test]
fn cross_worker_pingpong_stress_loses_no_wake_ups() {
    // Task pairs, fiber pairs and task-fiber pairs play ping-pong on two workers with yielding
    // tasks and fibers alongside; tasks move between workers, fibers stay. A lost wake-up
    // hangs the test.
    const ROUNDS: u64 = 2_000;
    let rt = runtime(2);
    let total = rt.block_on(|| {
        let total = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut background_tasks = Vec::new();
        let mut background_fibers = Vec::new();
        for _ in 0..4 {
            let s = stop.clone();
            background_tasks.push(spindle::task::spawn_async(async move {
                while !s.load(Ordering::Relaxed) {
                    yield_now().await;
                }
            }));
            let s = stop.clone();
            background_fibers.push(spindle::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    spindle::yield_now();
                }
            }));
        }
        let mut tasks = Vec::new();
        let mut fibers = Vec::new();
        for _ in 0..8 {
            // Task <-> task.
            let (to_pong, to_ping) = (Mailbox::default(), Mailbox::default());
            let (a, b, t) = (to_pong.clone(), to_ping.clone(), total.clone());
            tasks.push(spindle::task::spawn_async(async move {
                for i in 0..ROUNDS {
                    a.send(i);
                    assert_eq!(b.recv().await, i + 1);
                    t.fetch_add(1, Ordering::Relaxed);
                }
            }));
            tasks.push(spindle::task::spawn_async(async move {
                for _ in 0..ROUNDS {
                    let v = to_pong.recv().await;
                    to_ping.send(v + 1);
                }
            }));
            // Fiber <-> fiber.
            let (ping_tx, ping_rx) = spindle::sync::channel::<u64>(1);
            let (pong_tx, pong_rx) = spindle::sync::channel::<u64>(1);
            let t = total.clone();
            fibers.push(spindle::spawn(move || {
                for i in 0..ROUNDS {
                    ping_tx.send(i).unwrap();
                    assert_eq!(pong_rx.recv().unwrap(), i + 1);
                    t.fetch_add(1, Ordering::Relaxed);
                }
            }));
            fibers.push(spindle::spawn(move || {
                for _ in 0..ROUNDS {
                    let v = ping_rx.recv().unwrap();
                    pong_tx.send(v + 1).unwrap();
                }
            }));
            // Fiber <-> task: the fiber waits on the mailbox through `block_on`.
            let (to_task, to_fiber) = (Mailbox::default(), Mailbox::default());
            let (a, b, t) = (to_task.clone(), to_fiber.clone(), total.clone());
            fibers.push(spindle::spawn(move || {
                for i in 0..ROUNDS {
                    a.send(i);
                    assert_eq!(spindle::task::block_on(b.recv()), i + 1);
                    t.fetch_add(1, Ordering::Relaxed);
                }
            }));
            tasks.push(spindle::task::spawn_async(async move {
                for _ in 0..ROUNDS {
                    let v = to_task.recv().await;
                    to_fiber.send(v + 1);
                }
            }));
        }
        for h in tasks {
            h.join().unwrap();
        }
        for h in fibers {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for h in background_tasks {
            h.join().unwrap();
        }
        for h in background_fibers {
            h.join().unwrap();
        }
        total.load(Ordering::Relaxed)
    });
    assert_eq!(total, 3 * 8 * ROUNDS as usize);
}
