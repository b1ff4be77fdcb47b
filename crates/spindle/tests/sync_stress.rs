//! A bounded stress test mixing many fibers and async tasks over the sync primitives at once:
//! channels with select and timeouts, Mutex, RwLock, Semaphore, Notify, Barrier, broadcast and
//! watch, on two workers. It checks conservation (every value sent is received once, every
//! increment is counted, permits all come back) rather than timing.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::sync::{broadcast, channel, watch, Barrier, Mutex, Notify, RwLock, Semaphore, WaitGroup};

const FIBERS: u64 = 24;
const TASKS: u64 = 24;
const ROUNDS: u64 = 100;

#[test]
fn fibers_and_tasks_share_every_primitive_without_loss() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (jobs_tx, jobs_rx) = channel::<u64>(8);
    let (prio_tx, prio_rx) = channel::<u64>(2);
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::new(Mutex::new(0u64));
    let table = Arc::new(RwLock::new(0u64));
    let sem = Arc::new(Semaphore::new(4));
    let inside = Arc::new(AtomicUsize::new(0));
    let notify = Arc::new(Notify::new());
    let barrier = Arc::new(Barrier::new((FIBERS + TASKS) as usize));
    let (bc_tx, _) = broadcast::channel::<u64>(1024);
    let (watch_tx, watch_rx) = watch::channel(0u64);
    let wg = WaitGroup::new();
    let finished = Arc::new(AtomicUsize::new(0));

    let mut fibers = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..FIBERS + TASKS {
        let (jobs_rx, prio_rx, received) = (jobs_rx.clone(), prio_rx.clone(), received.clone());
        let (counter, table, sem, inside) = (counter.clone(), table.clone(), sem.clone(), inside.clone());
        let (notify, barrier, mut bc_rx, mut watch_rx) =
            (notify.clone(), barrier.clone(), bc_tx.subscribe(), watch_rx.clone());
        let wg = wg.clone();
        let finished = finished.clone();
        wg.add(1);
        if i < FIBERS {
            fibers.push(rt.spawn(move || {
                barrier.wait();
                let mut open = (true, true);
                while open.0 || open.1 {
                    spindle::select! {
                        v = jobs_rx.recv_async(), if open.0 => match v { Ok(v) => { received.fetch_add(v, Ordering::SeqCst); } Err(_) => open.0 = false },
                        v = prio_rx.recv_async(), if open.1 => match v { Ok(v) => { received.fetch_add(v, Ordering::SeqCst); } Err(_) => open.1 = false },
                        _ = spindle::time::sleep_future(Duration::from_millis(2)) => {},
                    }
                    *counter.lock() += 1;
                    if let Some(mut t) = table.write_timeout(Duration::from_millis(1)) { *t += 1; } else { *table.write() += 1; }
                    let _r = table.read();
                    let _p = sem.acquire();
                    assert!(inside.fetch_add(1, Ordering::SeqCst) < 4);
                    spindle::yield_now();
                    inside.fetch_sub(1, Ordering::SeqCst);
                }
                finished.fetch_add(1, Ordering::SeqCst);
                notify.notify_one();
                let mut seen = 0;
                while let Ok(_) | Err(broadcast::RecvError::Lagged(_)) = bc_rx.recv() {
                    seen += 1;
                }
                let _ = watch_rx.changed();
                wg.done();
                seen
            }));
        } else {
            tasks.push(rt.spawn_async(async move {
                barrier.wait_async().await;
                let mut open = (true, true);
                while open.0 || open.1 {
                    spindle::select_async! {
                        v = jobs_rx.recv_async(), if open.0 => match v { Ok(v) => { received.fetch_add(v, Ordering::SeqCst); } Err(_) => open.0 = false },
                        v = prio_rx.recv_async(), if open.1 => match v { Ok(v) => { received.fetch_add(v, Ordering::SeqCst); } Err(_) => open.1 = false },
                    }
                    *counter.lock_async().await += 1;
                    *table.write_async().await += 1;
                    let _p = sem.acquire_async().await;
                    assert!(inside.fetch_add(1, Ordering::SeqCst) < 4);
                    spindle::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                }
                finished.fetch_add(1, Ordering::SeqCst);
                notify.notify_one();
                let mut seen = 0;
                while let Ok(_) | Err(broadcast::RecvError::Lagged(_)) = bc_rx.recv_async().await {
                    seen += 1;
                }
                let _ = watch_rx.changed_async().await;
                wg.done();
                seen
            }));
        }
    }
    drop((jobs_rx, prio_rx));

    let producer = rt.spawn(move || {
        let mut sent = 0u64;
        for v in 1..=ROUNDS * 20 {
            if v % 5 == 0 {
                while prio_tx.send_timeout(v, Duration::from_millis(1)).is_err() {}
            } else {
                jobs_tx.send(v).unwrap();
            }
            sent += v;
        }
        sent
    });
    let sent = producer.join().unwrap();
    // Everyone has left the loop once all have counted themselves; each notifies (a Notify
    // keeps one permit, so several notifications may merge into one wake-up).
    while finished.load(Ordering::SeqCst) < (FIBERS + TASKS) as usize {
        assert!(notify.wait_timeout(Duration::from_secs(30)), "a consumer never finished");
    }
    for v in 0..10 {
        bc_tx.send(v).unwrap();
    }
    drop(bc_tx);
    watch_tx.send(1).unwrap();
    assert!(wg.wait_timeout(Duration::from_secs(30)));
    let seen: Vec<u64> = fibers
        .into_iter()
        .map(|h| h.join().unwrap())
        .chain(tasks.into_iter().map(|h| h.join().unwrap()))
        .collect();
    assert!(seen.iter().all(|s| *s == 10), "a broadcast receiver missed values: {seen:?}");
    assert_eq!(received.load(Ordering::SeqCst), sent, "a message was lost or duplicated");
    let rounds = *counter.lock();
    assert_eq!(*table.read(), rounds);
    assert_eq!(sem.available_permits(), 4);
}
