//! `Handle`: spawning from other threads, `Handle::current` on workers, and the shutdown
//! rule that a spawn either lands before the workers stop or fails with `RuntimeClosed`:
//! never a join handle that waits forever.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::{Handle, Runtime, RuntimeClosed};

#[test]
fn a_handle_spawns_fibers_and_tasks_from_plain_threads() {
    let rt = Runtime::new().unwrap();
    let handle = rt.handle();
    let threads: Vec<_> = (0..4u64)
        .map(|i| {
            let handle = handle.clone();
            std::thread::spawn(move || {
                let fiber = handle.spawn(move || i * 10).join().unwrap();
                let task = handle.spawn_async(async move { i + 1 }).join().unwrap();
                fiber + task
            })
        })
        .collect();
    let sum: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(sum, (0..4).map(|i| i * 10 + i + 1).sum::<u64>());
    assert!(!handle.is_current(), "the test thread is not a worker");
    assert!(Handle::current().is_none());
}

#[test]
fn handle_current_names_the_runtime_of_the_worker() {
    let rt = Runtime::new().unwrap();
    let other = Runtime::new().unwrap();
    let (mine, theirs) = (rt.handle(), other.handle());
    let (is_mine, is_theirs) = rt.block_on(move || {
        let current = Handle::current().expect("a fiber runs on a worker");
        (current.is_current() && mine.is_current(), theirs.is_current())
    });
    assert!(is_mine);
    assert!(!is_theirs);
}

#[test]
fn spawning_after_the_runtime_is_dropped_fails_clearly() {
    let rt = Runtime::new().unwrap();
    let handle = rt.handle();
    drop(rt);
    assert_eq!(handle.try_spawn(|| 1).err(), Some(RuntimeClosed));
    assert!(handle.try_spawn_async(async { 1 }).is_err());
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.spawn(|| 1))).unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("spindle::Handle::spawn"), "the panic names the call: {msg}");
}

/// Threads keep spawning through a handle while the runtime is dropped. Every spawn must end
/// one of three ways: it ran, its join reports cancellation, or it was refused. A lost spawn
/// would hang the join (the test would time out).
#[test]
fn spawns_racing_with_shutdown_are_run_cancelled_or_refused() {
    for _ in 0..20 {
        let rt = Runtime::new().unwrap();
        let handle = rt.handle();
        let stop = Arc::new(AtomicBool::new(false));
        let (ran, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let spawners: Vec<_> = (0..2)
            .map(|n| {
                let (handle, stop, ran, refused) =
                    (handle.clone(), stop.clone(), ran.clone(), refused.clone());
                std::thread::spawn(move || {
                    let mut joins = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let counted = ran.clone();
                        let outcome = if n == 0 {
                            handle
                                .try_spawn(move || counted.fetch_add(1, Ordering::Relaxed))
                                .map(|h| h.join().is_ok())
                        } else {
                            handle
                                .try_spawn_async(async move { counted.fetch_add(1, Ordering::Relaxed) })
                                .map(|h| h.join().is_ok())
                        };
                        match outcome {
                            Ok(_) => joins += 1, // ran (Ok) or cancelled at shutdown (Err)
                            Err(RuntimeClosed) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                    joins
                })
            })
            .collect();
        while ran.load(Ordering::Relaxed) < 10 {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(rt);
        // Both spawners see the closed runtime on their next try (or stop by themselves).
        std::thread::sleep(Duration::from_millis(5));
        stop.store(true, Ordering::Relaxed);
        let joins: usize = spawners.into_iter().map(|s| s.join().unwrap()).sum();
        assert!(joins >= 10, "spawns ran before the drop");
        assert!(refused.load(Ordering::Relaxed) <= 2);
    }
}
