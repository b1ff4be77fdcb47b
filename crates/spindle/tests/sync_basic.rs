//! Integration tests of the fiber-aware sync primitives: channels, oneshot, mutex, wait group.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::sync::{channel, oneshot, unbounded, Mutex, RecvError, TryRecvError, TrySendError, WaitGroup};
use spindle::Runtime;

#[test]
fn bounded_channel_delivers_in_order_and_applies_backpressure() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let (tx, rx) = channel::<u32>(2);
        let sent = Arc::new(AtomicUsize::new(0));
        let sent2 = sent.clone();
        let producer = spindle::spawn(move || {
            for i in 0..10 {
                tx.send(i).unwrap();
                sent2.fetch_add(1, Ordering::SeqCst);
            }
        });
        // Let the producer run until the channel is full: it must stop at the capacity.
        for _ in 0..5 {
            spindle::yield_now();
        }
        assert_eq!(sent.load(Ordering::SeqCst), 2, "a full bounded channel must park the sender");
        assert_eq!(rx.len(), 2);
        let got: Vec<u32> = rx.iter().collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        producer.join().unwrap();
    });
}

#[test]
fn closed_channels_report_errors_instead_of_hanging() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        // Every sender gone: queued values drain, then RecvError.
        let (tx, rx) = channel::<u8>(4);
        tx.send(7).unwrap();
        drop(tx);
        assert_eq!(rx.recv(), Ok(7));
        assert_eq!(rx.recv(), Err(RecvError));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));

        // Every receiver gone: send gives the value back.
        let (tx, rx) = unbounded::<String>();
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.send("lost?".to_string()).unwrap_err().0, "lost?");

        // A receiver parked on an empty channel wakes when the last sender goes away.
        let (tx, rx) = channel::<u8>(1);
        let waiter = spindle::spawn(move || rx.recv());
        spindle::yield_now();
        assert!(!waiter.is_finished());
        drop(tx);
        assert_eq!(waiter.join().unwrap(), Err(RecvError));

        // A sender parked on a full channel wakes when the last receiver goes away.
        let (tx, rx) = channel::<u8>(1);
        tx.send(1).unwrap();
        let waiter = spindle::spawn(move || tx.send(2).map_err(|e| e.0));
        spindle::yield_now();
        assert!(!waiter.is_finished());
        drop(rx);
        assert_eq!(waiter.join().unwrap(), Err(2));
    });
}

#[test]
fn try_variants_never_wait() {
    let (tx, rx) = channel::<u8>(1);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert!(tx.try_send(1).is_ok());
    assert!(matches!(tx.try_send(2), Err(TrySendError::Full(2))));
    assert_eq!(rx.try_recv(), Ok(1));
    drop(rx);
    assert!(matches!(tx.try_send(3), Err(TrySendError::Disconnected(3))));
}

#[test]
fn zero_capacity_is_a_rendezvous_channel() {
    // tests/sync_rendezvous.rs has the rest; here, only that nothing waits in it unsent.
    let (tx, rx) = channel::<u8>(0);
    assert!(tx.try_send(1).is_err(), "no receiver waits: a rendezvous send cannot complete");
    assert!(rx.is_empty());
}

#[test]
fn many_producers_many_consumers_lose_nothing() {
    let rt = Runtime::new().unwrap();
    let total = rt.block_on(|| {
        let (tx, rx) = channel::<u64>(8);
        let producers: Vec<_> = (0..8u64)
            .map(|p| {
                let tx = tx.clone();
                spindle::spawn(move || {
                    for i in 0..1000 {
                        tx.send(p * 1000 + i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let consumers: Vec<_> = (0..4)
            .map(|_| {
                let rx = rx.clone();
                spindle::spawn(move || rx.iter().collect::<Vec<u64>>())
            })
            .collect();
        drop(rx);
        producers.into_iter().for_each(|h| h.join().unwrap());
        let mut all: Vec<u64> = consumers.into_iter().flat_map(|h| h.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..8000).collect::<Vec<_>>());
        all.len()
    });
    assert_eq!(total, 8000);
}

#[test]
fn channels_work_between_fibers_and_plain_threads() {
    let rt = Runtime::new().unwrap();
    let (to_fiber, from_thread) = channel::<u32>(1);
    let (to_thread, from_fiber) = unbounded::<u32>();
    let echo = rt.spawn(move || {
        for v in from_thread.iter() {
            to_thread.send(v * 2).unwrap();
        }
    });
    for i in 0..1000 {
        to_fiber.send(i).unwrap();
        assert_eq!(from_fiber.recv(), Ok(i * 2));
    }
    drop(to_fiber);
    echo.join().unwrap();
    assert_eq!(from_fiber.recv(), Err(RecvError));
}

#[test]
fn a_waiter_that_unwinds_leaves_the_channel_usable() {
    // Shutdown cancels a fiber parked in recv; the channel must not keep its stale node.
    let (tx, rx) = channel::<u32>(1);
    {
        let rt = Runtime::new().unwrap();
        let rx2 = rx.clone();
        let parked = rt.spawn(move || rx2.recv());
        std::thread::sleep(Duration::from_millis(20));
        drop(rt);
        let err = parked.join().unwrap_err();
        assert!(err.is_cancelled());
    }
    tx.send(5).unwrap();
    assert_eq!(rx.recv(), Ok(5));
}

#[test]
fn oneshot_sends_once_and_reports_a_dropped_sender() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let (tx, rx) = oneshot::<&'static str>();
        spindle::spawn(move || tx.send("hi").unwrap());
        assert_eq!(rx.recv(), Ok("hi"));

        let (tx, rx) = oneshot::<u8>();
        let waiting = spindle::spawn(move || rx.recv());
        spindle::yield_now();
        drop(tx);
        assert_eq!(waiting.join().unwrap(), Err(RecvError));

        let (tx, rx) = oneshot::<u8>();
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.send(3), Err(3));
    });
}

#[test]
fn mutex_excludes_across_yields_and_threads() {
    let rt = Runtime::new().unwrap();
    let counter = Arc::new(Mutex::new((0u64, false)));
    let fibers: Vec<_> = (0..50)
        .map(|_| {
            let counter = counter.clone();
            rt.spawn(move || {
                for _ in 0..100 {
                    let mut guard = counter.lock();
                    assert!(!guard.1, "two holders of one mutex");
                    guard.1 = true;
                    spindle::yield_now(); // hold it across a switch: others must park
                    guard.0 += 1;
                    guard.1 = false;
                }
            })
        })
        .collect();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let counter = counter.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    let mut guard = counter.lock();
                    assert!(!guard.1, "two holders of one mutex");
                    guard.0 += 1;
                }
            })
        })
        .collect();
    fibers.into_iter().for_each(|h| h.join().unwrap());
    threads.into_iter().for_each(|h| h.join().unwrap());
    assert_eq!(counter.lock().0, 50 * 100 + 2 * 1000);
    assert!(counter.try_lock().is_some());
}

#[test]
fn a_panic_while_locked_unlocks() {
    let rt = Runtime::new().unwrap();
    let m = Arc::new(Mutex::new(1));
    let m2 = m.clone();
    let r = rt.spawn(move || {
        let _g = m2.lock();
        panic!("boom");
    });
    assert!(r.join().is_err());
    assert_eq!(*m.lock(), 1);
}

#[test]
fn waitgroup_waits_for_every_done() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let wg = Arc::new(WaitGroup::new());
        let done = Arc::new(AtomicUsize::new(0));
        wg.add(100);
        for _ in 0..100 {
            let (wg, done) = (wg.clone(), done.clone());
            spindle::spawn(move || {
                spindle::yield_now();
                done.fetch_add(1, Ordering::SeqCst);
                wg.done();
            });
        }
        wg.wait();
        assert_eq!(done.load(Ordering::SeqCst), 100);
        assert_eq!(wg.count(), 0);
        wg.wait(); // already zero: returns at once
    });
}

#[test]
#[should_panic]
fn waitgroup_done_below_zero_panics() {
    let wg = WaitGroup::new();
    wg.done();
}
