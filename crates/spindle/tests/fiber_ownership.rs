//! Who keeps a fiber alive: a started fiber holds its own run reference (moved between the
//! worker's queues, forgotten while parked and taken back by the one unparker that reschedules
//! it), so a parked fiber lives without any handle, and its cell is freed once it has finished
//! and its handles are gone. These tests check that nothing leaks and nothing is freed early,
//! whatever the order of the handle's drop, the wake-ups and the shutdown.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle::{Builder, Runtime};

/// Waits (bounded) until only `token` itself holds its count.
fn wait_until_released(token: &Arc<()>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Arc::strong_count(token) > 1 {
        assert!(Instant::now() < deadline, "{} references left", Arc::strong_count(token) - 1);
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn parked_fibers_with_and_without_handles_are_cancelled_and_freed_at_shutdown() {
    let rt = Builder::new().worker_threads(2).build().unwrap();
    let token = Arc::new(());
    let (tx, rx) = mpsc::channel();
    let mut kept = Vec::new();
    for i in 0..40 {
        let (token, tx) = (token.clone(), tx.clone());
        let h = rt.spawn(move || {
            let _held = token;
            tx.send(()).unwrap();
            loop {
                spindle::fiber::park();
            }
        });
        // Half detached (no handle at all while parked), half joined after the shutdown.
        if i % 2 == 0 {
            kept.push(h);
        }
    }
    for _ in 0..40 {
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
    }
    drop(rt);
    for h in kept {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    assert_eq!(Arc::strong_count(&token), 1, "every cancelled fiber dropped its captures");
}

#[test]
fn a_result_is_freed_when_the_handle_goes_before_or_after_the_fiber_finishes() {
    let rt = Runtime::new().unwrap();
    let token = Arc::new(());
    // Handle dropped while the fiber is parked: the fiber's own reference keeps it, and the
    // cell (holding the result, a clone of the token) goes when the fiber is recycled.
    let (tx, rx) = spindle::sync::channel::<()>(1);
    let t = token.clone();
    let h = rt.spawn(move || {
        rx.recv().unwrap();
        t
    });
    rt.block_on(|| spindle::time::sleep(Duration::from_millis(5)));
    drop(h);
    tx.send(()).unwrap();
    wait_until_released(&token);
    // Handle dropped after the fiber finished.
    let t = token.clone();
    let h = rt.spawn(move || t);
    while !h.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(h);
    wait_until_released(&token);
    // Joined: the result moves out, the cell goes with the handle.
    let t = token.clone();
    let result = rt.spawn(move || t).join().unwrap();
    drop(result);
    wait_until_released(&token);
}

#[test]
fn an_unpark_after_the_fiber_finished_or_the_runtime_is_gone_is_harmless() {
    let rt = Runtime::new().unwrap();
    let token = Arc::new(());
    let t = token.clone();
    let (tx, rx) = mpsc::channel();
    let parked_forever = rt.spawn(move || {
        let _held = t;
        tx.send(spindle::fiber::current()).unwrap();
        loop {
            spindle::fiber::park();
        }
    });
    let fiber = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    drop(parked_forever);
    let done = rt.spawn(spindle::fiber::current);
    let finished = done.join().unwrap();
    finished.unpark(); // finished and recycled: leaves a permit nobody takes
    drop(rt);
    fiber.unpark(); // cancelled at shutdown: a no-op as well
    assert_eq!(Arc::strong_count(&token), 1);
    drop((fiber, finished));
}

#[test]
fn remote_and_local_unparks_racing_with_parks_lose_nothing() {
    let rt = Builder::new().worker_threads(2).build().unwrap();
    let token = Arc::new(());
    let stop = Arc::new(AtomicBool::new(false));
    let wakes = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (t, tx, stop, wakes) = (token.clone(), tx.clone(), stop.clone(), wakes.clone());
        handles.push(rt.spawn(move || {
            let _held = t;
            tx.send(spindle::fiber::current()).unwrap();
            while !stop.load(Ordering::Acquire) {
                spindle::fiber::park();
                wakes.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let fibers: Vec<_> = (0..4).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
    // A thread and a fiber unpark all of them over and over.
    let remote = {
        let (fibers, stop) = (fibers.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                fibers.iter().for_each(|f| f.unpark());
            }
        })
    };
    let local = {
        let (fibers, stop) = (fibers.clone(), stop.clone());
        rt.spawn(move || {
            while !stop.load(Ordering::Acquire) {
                fibers.iter().for_each(|f| f.unpark());
                spindle::yield_now();
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while wakes.load(Ordering::Relaxed) < 20_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Release);
    remote.join().unwrap();
    fibers.iter().for_each(|f| f.unpark());
    for h in handles {
        h.join().unwrap();
    }
    local.join().unwrap();
    drop(fibers);
    wait_until_released(&token);
    drop(rt);
}
