//! spawn_blocking: blocking work runs off the workers, results and panics come back to fibers,
//! futures and threads, the pool is bounded, and shutdown cancels queued jobs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::Builder;

#[test]
fn blocking_work_does_not_stall_the_worker() {
    let rt = Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        let slow = spindle::spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(50)); // a real blocking call
            "done"
        });
        // Meanwhile the only worker keeps running fibers.
        let mut yields = 0u64;
        while !slow.is_finished() {
            yields += 1;
            spindle::yield_now();
        }
        assert!(yields > 0);
        assert_eq!(slow.join().unwrap(), "done");
    });
}

#[test]
fn panics_come_back_as_errors_and_handles_are_futures() {
    let rt = Builder::new().worker_threads(1).build().unwrap();
    let err = rt.spawn_blocking(|| -> u8 { panic!("blocking boom") }).join().unwrap_err();
    let err = err.into_panic();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"blocking boom"));
    let v = rt.block_on(|| spindle::task::block_on(spindle::spawn_blocking(|| 6 * 7)).unwrap());
    assert_eq!(v, 42);
}

#[test]
fn the_pool_is_bounded_and_queues_the_rest() {
    let rt = Builder::new().worker_threads(1).max_blocking_threads(2).build().unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (running, peak) = (running.clone(), peak.clone());
            rt.spawn_blocking(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(10));
                running.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert!(peak.load(Ordering::SeqCst) <= 2, "at most max_blocking_threads at once");
}

#[test]
fn shutdown_cancels_queued_jobs() {
    let rt = Builder::new().worker_threads(1).max_blocking_threads(1).build().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let flag = started.clone();
    let first = rt.spawn_blocking(move || {
        flag.store(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
    });
    let queued = rt.spawn_blocking(|| 1);
    // The first job must be running (not merely queued) when the runtime shuts down: on a slow
    // machine (or under a sanitizer) it may not have started yet, and would be cancelled.
    while started.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    drop(rt);
    assert!(first.join().is_ok(), "a running job finishes");
    match queued.join() {
        Ok(v) => assert_eq!(v, 1), // it may have started before the shutdown
        Err(e) => assert!(e.is_cancelled()),
    }
}
