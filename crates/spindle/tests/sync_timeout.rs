//! Timeouts and deadlines on every blocking wait of `spindle::sync`: channel send/recv,
//! oneshot recv, mutex lock, wait group wait and fiber join, in fibers and on plain threads.
//! No timing is asserted beyond "did not return before the deadline".

use std::time::{Duration, Instant};

use spindle::sync::{channel, oneshot, Mutex, RecvTimeoutError, SendTimeoutError, WaitGroup};
use spindle::Runtime;

const SHORT: Duration = Duration::from_millis(10);

fn in_fiber_and_thread(f: fn()) {
    let rt = Runtime::new().unwrap();
    rt.block_on(f);
    std::thread::spawn(f).join().unwrap();
}

#[test]
fn channel_recv_timeout_times_out_then_receives() {
    in_fiber_and_thread(|| {
        let (tx, rx) = channel::<u32>(1);
        let start = Instant::now();
        assert_eq!(rx.recv_timeout(SHORT), Err(RecvTimeoutError::Timeout));
        assert!(start.elapsed() >= SHORT, "returned before the deadline");
        tx.send(5).unwrap();
        assert_eq!(rx.recv_deadline(Instant::now() + SHORT), Ok(5));
        drop(tx);
        assert_eq!(rx.recv_timeout(SHORT), Err(RecvTimeoutError::Disconnected));
    });
}

/// A timeout too long for an `Instant` waits for good: the value sent later is received, no
/// overflow panic and no early timeout.
#[test]
fn timeouts_too_long_for_an_instant_wait_for_the_value() {
    in_fiber_and_thread(|| {
        let forever = Duration::from_secs(u64::MAX);
        let (tx, rx) = channel::<u32>(1);
        let (otx, orx) = oneshot::<u32>();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(SHORT);
            tx.send(9).unwrap();
            otx.send(10).unwrap();
            tx
        });
        assert_eq!(rx.recv_timeout(forever), Ok(9));
        assert_eq!(orx.recv_timeout(Duration::MAX), Ok(10));
        let tx = sender.join().unwrap();
        tx.send_timeout(11, Duration::MAX).unwrap();
        assert_eq!(rx.recv_timeout(Duration::MAX), Ok(11));
    });
}

#[test]
fn channel_send_timeout_gives_the_value_back() {
    in_fiber_and_thread(|| {
        let (tx, rx) = channel::<String>(1);
        tx.send("a".into()).unwrap();
        match tx.send_timeout("b".into(), SHORT) {
            Err(SendTimeoutError::Timeout(v)) => assert_eq!(v, "b"),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert_eq!(rx.recv().unwrap(), "a");
        assert!(rx.is_empty(), "a timed-out send must not have queued its value");
        tx.send_deadline("c".into(), Instant::now() + SHORT).unwrap();
        drop(rx);
        assert!(matches!(tx.send_timeout("d".into(), SHORT), Err(SendTimeoutError::Disconnected(_))));
    });
}

#[test]
fn a_timed_receive_woken_by_a_send_gets_the_value() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let (tx, rx) = channel::<u32>(1);
        let h = spindle::spawn(move || rx.recv_timeout(Duration::from_secs(30)));
        spindle::yield_now();
        tx.send(9).unwrap();
        assert_eq!(h.join().unwrap(), Ok(9));
    });
}

#[test]
fn timed_out_receivers_pass_wakeups_on_and_lose_nothing() {
    // Many receivers with tiny timeouts race real receivers; every value sent is received once.
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let total = rt.block_on(|| {
        let (tx, rx) = channel::<u64>(4);
        let mut handles = Vec::new();
        for i in 0..8 {
            let rx = rx.clone();
            handles.push(spindle::spawn(move || {
                let mut sum = 0u64;
                loop {
                    let r = if i % 2 == 0 {
                        rx.recv_timeout(Duration::from_micros(200))
                    } else {
                        rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
                    };
                    match r {
                        Ok(v) => sum += v,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => return sum,
                    }
                }
            }));
        }
        drop(rx);
        for v in 1..=2000u64 {
            tx.send(v).unwrap();
        }
        drop(tx);
        handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(total, 2000 * 2001 / 2);
}

#[test]
fn mutex_lock_timeout_and_deadline() {
    in_fiber_and_thread(|| {
        let m = std::sync::Arc::new(Mutex::new(0));
        let g = m.lock();
        assert!(m.lock_timeout(SHORT).is_none());
        assert!(m.lock_deadline(Instant::now() + SHORT).is_none());
        drop(g);
        *m.lock_timeout(SHORT).unwrap() += 1;
        assert_eq!(*m.lock(), 1);
    });
}

#[test]
fn a_timed_lock_waiter_gets_the_lock_when_released() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let m = std::sync::Arc::new(Mutex::new(0));
        let g = m.lock();
        let m2 = m.clone();
        let h = spindle::spawn(move || {
            *m2.lock_timeout(Duration::from_secs(30)).expect("woken by the unlock") += 1
        });
        spindle::yield_now();
        drop(g);
        h.join().unwrap();
        // A timed-out waiter leaves no trace: the lock still works for others.
        let g = m.lock();
        assert!(m.lock_timeout(SHORT).is_none());
        drop(g);
        assert_eq!(*m.lock(), 1);
    });
}

#[test]
fn waitgroup_wait_timeout() {
    in_fiber_and_thread(|| {
        let wg = WaitGroup::new();
        wg.add(1);
        assert!(!wg.wait_timeout(SHORT));
        assert!(!wg.wait_deadline(Instant::now() + SHORT));
        wg.done();
        assert!(wg.wait_timeout(SHORT));
    });
}

#[test]
fn oneshot_recv_timeout() {
    in_fiber_and_thread(|| {
        let (tx, rx) = oneshot::<u8>();
        assert_eq!(rx.recv_timeout(SHORT), Err(RecvTimeoutError::Timeout));
        tx.send(3).unwrap();
        assert_eq!(rx.recv_deadline(Instant::now() + SHORT), Ok(3));
        let (tx, rx) = oneshot::<u8>();
        drop(tx);
        assert_eq!(rx.recv_timeout(SHORT), Err(RecvTimeoutError::Disconnected));
    });
}

#[test]
fn fiber_join_timeout_gives_the_handle_back() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let (tx, rx) = channel::<()>(1);
        let h = spindle::spawn(move || {
            rx.recv().unwrap();
            7
        });
        let h = h.join_timeout(SHORT).expect_err("the fiber waits for us");
        tx.send(()).unwrap();
        assert_eq!(h.join().unwrap(), 7);
        let quick = spindle::spawn(|| 1);
        assert_eq!(quick.join_deadline(Instant::now() + Duration::from_secs(30)).ok().unwrap().unwrap(), 1);
    });
}

#[test]
fn task_join_timeout_gives_the_handle_back() {
    let rt = Runtime::new().unwrap();
    let (tx, rx) = oneshot::<u8>();
    let h = rt.spawn_async(async move { rx.await.unwrap() + 1 });
    let h = h.join_timeout(SHORT).expect_err("the task waits for the oneshot");
    tx.send(1).unwrap();
    assert_eq!(h.join_deadline(Instant::now() + Duration::from_secs(30)).ok().unwrap().unwrap(), 2);
    rt.block_on(|| {
        let h = spindle::task::spawn_async(async { 5 });
        assert_eq!(h.join_timeout(Duration::from_secs(30)).ok().unwrap().unwrap(), 5);
    });
}

#[test]
fn spawn_blocking_join_timeout_gives_the_handle_back() {
    let rt = Runtime::new().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let h = rt.spawn_blocking(move || rx.recv().map(|()| 3));
    let h = h.join_timeout(SHORT).expect_err("the job waits for us");
    tx.send(()).unwrap();
    assert_eq!(h.join_deadline(Instant::now() + Duration::from_secs(30)).ok().unwrap().unwrap(), Ok(3));
}
