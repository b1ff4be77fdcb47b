//! `spindle::Handle`: spawning from anywhere, and failing clearly (never hanging) once the
//! runtime is gone.

use std::time::Duration;

use spindle::{Handle, Runtime, RuntimeClosed};

#[test]
fn current_inside_a_worker_only() {
    assert!(Handle::current().is_none());
    assert!(!Handle::on_worker());
    let rt = Runtime::new().unwrap();
    let handle = rt.handle();
    let (inside, same) = rt.block_on(move || {
        let current = Handle::current();
        (current.is_some() && Handle::on_worker(), handle.is_current())
    });
    assert!(inside && same);
    assert!(!rt.handle().is_current());
}

#[test]
fn spawn_from_other_threads() {
    let rt = Runtime::new().unwrap();
    let handles: Vec<_> = (0..4u64)
        .map(|i| {
            let handle = rt.handle();
            std::thread::spawn(move || {
                let fiber = handle.spawn(move || i * 10);
                let task = handle.spawn_async(async move { i + 1 });
                (fiber.join().unwrap(), task.join().unwrap())
            })
        })
        .collect();
    let got: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, vec![(0, 1), (10, 2), (20, 3), (30, 4)]);
}

#[test]
fn spawn_async_from_a_worker_runs_on_that_runtime() {
    // A task spawned from a worker starts in that worker's queue; an idle worker of the same
    // runtime may steal it (tasks are Send), but it never runs anywhere else.
    let rt = Runtime::new().unwrap();
    let outside = Runtime::new().unwrap().handle();
    let (mine, theirs) = rt.block_on(move || {
        let handle = Handle::current().unwrap();
        let probe = handle.clone();
        let outside2 = outside.clone();
        handle.spawn_async(async move { (probe.is_current(), outside2.is_current()) }).join().unwrap()
    });
    assert!(mine, "the task runs on a worker of the spawning runtime");
    assert!(!theirs);
}

#[test]
fn spawning_after_the_runtime_is_dropped_fails() {
    let rt = Runtime::new().unwrap();
    let handle = rt.handle();
    drop(rt);
    assert_eq!(handle.try_spawn_async(async { 1 }).err(), Some(RuntimeClosed));
    assert_eq!(handle.try_spawn(|| 1).err(), Some(RuntimeClosed));
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.spawn_async(async { 1 })))
        .unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.contains("shut down"), "{msg}");
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.spawn(|| 1))).is_err());
}

/// Work spawned through a handle just before (or while) the runtime drops is run or cancelled,
/// never left waiting: every join returns.
#[test]
fn spawns_racing_the_drop_never_hang() {
    for _ in 0..20 {
        let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
        let handle = rt.handle();
        let spawner = std::thread::spawn(move || {
            let mut joined = 0;
            for _ in 0..200 {
                match handle.try_spawn_async(spindle::time::sleep_future(Duration::from_millis(5))) {
                    Ok(task) => {
                        let _ = task.join(); // Ok, or Err(Cancelled) at shutdown
                        joined += 1;
                    }
                    Err(RuntimeClosed) => break,
                }
                if let Ok(fiber) = handle.try_spawn(|| spindle::time::sleep(Duration::from_millis(1))) {
                    let _ = fiber.join();
                }
            }
            joined
        });
        std::thread::sleep(Duration::from_millis(2));
        drop(rt);
        spawner.join().unwrap();
    }
}
