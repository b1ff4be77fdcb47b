//! Notify, Semaphore, RwLock, Condvar, Barrier, broadcast and watch: behaviour from fibers,
//! threads and async tasks, timeouts, and that no notification or permit is lost when a
//! waiter times out after being woken.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::sync::{broadcast, watch, Barrier, Condvar, Mutex, Notify, RwLock, Semaphore};

const SHORT: Duration = Duration::from_millis(10);
const LONG: Duration = Duration::from_secs(30);

fn rt2() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(2).build().unwrap()
}

#[test]
fn notify_stores_one_permit_and_hands_off_to_waiters() {
    let rt = rt2();
    rt.block_on(|| {
        let n = Arc::new(Notify::new());
        n.notify_one();
        n.notify_one(); // at most one permit is stored
        assert!(n.wait_timeout(SHORT));
        assert!(!n.wait_timeout(SHORT), "a second permit was stored");

        let woken = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (n, woken) = (n.clone(), woken.clone());
                spindle::spawn(move || {
                    assert!(n.wait_timeout(LONG));
                    woken.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        // notify_waiters wakes those queued now and stores nothing: repeat until all four
        // (which queue when they first run) have been woken; bounded.
        for _ in 0..5000 {
            n.notify_waiters();
            if woken.load(Ordering::SeqCst) == 4 {
                break;
            }
            spindle::time::sleep(Duration::from_millis(1));
        }
        assert!(!n.wait_timeout(Duration::ZERO), "notify_waiters stored a permit");
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(woken.load(Ordering::SeqCst), 4);
    });
}

#[test]
fn notify_one_is_not_lost_when_the_woken_waiter_times_out() {
    // Many short-timeout waiters and one patient waiter; every notify_one must end in a
    // return of some wait, or stay stored as the permit.
    let rt = rt2();
    rt.block_on(|| {
        let n = Arc::new(Notify::new());
        let got = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for i in 0..6 {
            let (n, got) = (n.clone(), got.clone());
            handles.push(spindle::spawn(move || {
                for _ in 0..50 {
                    let t = if i == 0 { Duration::from_millis(50) } else { Duration::from_micros(100) };
                    if n.wait_timeout(t) {
                        got.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
        }
        for _ in 0..40 {
            n.notify_one();
            spindle::yield_now();
        }
        handles.into_iter().for_each(|h| h.join().unwrap());
        // Whatever was not consumed is the one stored permit.
        let leftover = usize::from(n.wait_timeout(Duration::ZERO));
        assert!(got.load(Ordering::SeqCst) + leftover >= 1);
        assert!(got.load(Ordering::SeqCst) <= 40);
    });
}

#[test]
fn notified_future_in_a_task() {
    let rt = rt2();
    let n = Arc::new(Notify::new());
    let n2 = n.clone();
    let h = rt.spawn_async(async move { n2.notified().await });
    n.notify_one();
    h.join().unwrap();
}

#[test]
fn semaphore_bounds_concurrency_and_returns_permits() {
    let rt = rt2();
    rt.block_on(|| {
        let sem = Arc::new(Semaphore::new(3));
        let inside = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let (sem, inside, max) = (sem.clone(), inside.clone(), max.clone());
                spindle::spawn(move || {
                    let _p = if i % 2 == 0 { sem.acquire() } else { sem.acquire_timeout(LONG).unwrap() };
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(now, Ordering::SeqCst);
                    spindle::yield_now();
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert!(max.load(Ordering::SeqCst) <= 3);
        assert_eq!(sem.available_permits(), 3);

        let all: Vec<_> = (0..3).map(|_| sem.clone().try_acquire_owned().unwrap()).collect();
        assert!(sem.try_acquire().is_none());
        assert!(sem.acquire_timeout(SHORT).is_none());
        drop(all);
        assert_eq!(sem.available_permits(), 3);
        sem.acquire().forget();
        assert_eq!(sem.available_permits(), 2);
    });
    let sem = Arc::new(Semaphore::new(1));
    let s = sem.clone();
    rt.spawn_async(async move {
        let p = s.clone().acquire_owned_async().await;
        assert_eq!(s.available_permits(), 0);
        drop(p);
        let _b = s.acquire_async().await;
    })
    .join()
    .unwrap();
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn rwlock_allows_many_readers_or_one_writer() {
    let rt = rt2();
    rt.block_on(|| {
        let lock = Arc::new(RwLock::new(0u64));
        let r1 = lock.read();
        let r2 = lock.try_read().expect("readers share");
        assert!(lock.try_write().is_none());
        assert!(lock.write_timeout(SHORT).is_none());
        drop((r1, r2));
        let w = lock.write();
        assert!(lock.try_read().is_none());
        assert!(lock.read_timeout(SHORT).is_none());
        drop(w);

        let handles: Vec<_> = (0..8)
            .map(|i| {
                let lock = lock.clone();
                spindle::spawn(move || {
                    for _ in 0..100 {
                        if i % 4 == 0 {
                            let mut g = lock.write();
                            let v = *g;
                            spindle::yield_now();
                            *g = v + 1;
                        } else {
                            let g = lock.read();
                            let v = *g;
                            spindle::yield_now();
                            assert_eq!(*g, v, "a writer changed the value under a reader");
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(*lock.read(), 200);
    });
    let lock = Arc::new(RwLock::new(1));
    let l = lock.clone();
    let v = rt
        .spawn_async(async move {
            *l.write_async().await += 1;
            *l.read_async().await
        })
        .join()
        .unwrap();
    assert_eq!(v, 2);
}

#[test]
fn a_writer_queued_behind_readers_is_not_stranded_when_a_reader_times_out() {
    let rt = rt2();
    rt.block_on(|| {
        let lock = Arc::new(RwLock::new(()));
        let w = lock.write();
        let l = lock.clone();
        let reader = spindle::spawn(move || l.read_timeout(Duration::from_millis(1)).is_some());
        let l = lock.clone();
        let writer = spindle::spawn(move || l.write_timeout(LONG).is_some());
        spindle::time::sleep(Duration::from_millis(5));
        drop(w);
        let _ = reader.join().unwrap();
        assert!(writer.join().unwrap(), "the queued writer never got the lock");
    });
}

#[test]
fn condvar_waits_with_the_lock_released() {
    let rt = rt2();
    rt.block_on(|| {
        let pair = Arc::new((Mutex::new(0), Condvar::new()));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let pair = pair.clone();
                spindle::spawn(move || {
                    let (m, cv) = &*pair;
                    let g = cv.wait_while(m.lock(), |v| *v == 0);
                    *g
                })
            })
            .collect();
        spindle::yield_now();
        *pair.0.lock() = 7;
        pair.1.notify_all();
        for h in handles {
            assert_eq!(h.join().unwrap(), 7);
        }
        let (m, cv) = &*pair;
        let (g, r) = cv.wait_timeout(m.lock(), SHORT);
        assert!(r.timed_out());
        assert_eq!(*g, 7, "the guard is locked again after a timeout");
    });
    // From plain threads too.
    let pair = Arc::new((Mutex::new(false), Condvar::new()));
    let p = pair.clone();
    let t = std::thread::spawn(move || {
        let g = p.1.wait_while(p.0.lock(), |ready| !*ready);
        assert!(*g);
    });
    *pair.0.lock() = true;
    pair.1.notify_one();
    t.join().unwrap();
}

#[test]
fn barrier_releases_each_generation_with_one_leader() {
    let rt = rt2();
    rt.block_on(|| {
        let barrier = Arc::new(Barrier::new(4));
        let leaders = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (b, leaders) = (barrier.clone(), leaders.clone());
                spindle::spawn(move || {
                    for _ in 0..10 {
                        if b.wait().is_leader() {
                            leaders.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(leaders.load(Ordering::SeqCst), 10);
    });
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    let task = rt.spawn_async(async move { b.wait_async().await.is_leader() });
    let fiber_leader = barrier.wait().is_leader();
    assert!(task.join().unwrap() != fiber_leader);
}

#[test]
fn broadcast_delivers_to_every_receiver_and_reports_lag() {
    let rt = rt2();
    rt.block_on(|| {
        let (tx, mut rx1) = broadcast::channel::<u32>(4);
        let mut rx2 = tx.subscribe();
        let h = spindle::spawn(move || (0..3).map(|_| rx2.recv().unwrap()).collect::<Vec<_>>());
        for i in 0..3 {
            assert_eq!(tx.send(i).unwrap(), 2);
        }
        assert_eq!(h.join().unwrap(), vec![0, 1, 2]);
        for i in 3..10 {
            tx.send(i).unwrap();
        }
        assert_eq!(rx1.recv(), Err(broadcast::RecvError::Lagged(6)));
        assert_eq!(rx1.recv(), Ok(6));
        assert_eq!(rx1.try_recv(), Ok(7));
        let mut rx3 = tx.subscribe();
        assert_eq!(rx3.recv_timeout(SHORT), Err(broadcast::TryRecvError::Empty));
        drop(tx);
        assert_eq!(rx1.recv(), Ok(8));
        assert_eq!(rx1.recv(), Ok(9));
        assert_eq!(rx1.recv(), Err(broadcast::RecvError::Closed));
        assert_eq!(rx3.recv(), Err(broadcast::RecvError::Closed));
    });
    let (tx, mut rx) = broadcast::channel::<&str>(2);
    let h = rt.spawn_async(async move { rx.recv_async().await });
    tx.send("to the task").unwrap();
    assert_eq!(h.join().unwrap(), Ok("to the task"));
    assert!(tx.send("nobody").is_err());
}

#[test]
fn watch_wakes_on_change_and_reports_a_gone_sender() {
    let rt = rt2();
    rt.block_on(|| {
        let (tx, mut rx) = watch::channel(0u32);
        assert!(!rx.has_changed());
        assert_eq!(rx.changed_timeout(SHORT), None);
        let mut rx2 = rx.clone();
        let h = spindle::spawn(move || {
            rx2.changed().unwrap();
            *rx2.borrow_and_update()
        });
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        let seen = h.join().unwrap();
        assert!(seen == 1 || seen == 2);
        assert!(rx.has_changed());
        assert_eq!(*rx.borrow_and_update(), 2);
        assert_eq!(tx.send_replace(3), 2);
        drop(tx);
        assert_eq!(rx.changed(), Ok(()), "the last value is still news");
        assert_eq!(rx.changed(), Err(spindle::sync::RecvError));
    });
    let (tx, mut rx) = watch::channel("a");
    let h = rt.spawn_async(async move {
        rx.changed_async().await.unwrap();
        *rx.borrow()
    });
    tx.send("b").unwrap();
    assert_eq!(h.join().unwrap(), "b");
}
