//! Cancellation tokens: a parent's cancel reaches its children and theirs, never the reverse;
//! blocking-style, timed and awaited waits; the shutdown token as the root of a tree.

use std::time::Duration;

use spindle::sync::CancellationToken;
use spindle::Builder;

#[test]
fn cancel_flows_down_the_tree_and_never_up() {
    let root = CancellationToken::new();
    let a = root.child_token();
    let a1 = a.child_token();
    let b = root.child_token();
    a.cancel();
    assert!(a.is_cancelled() && a1.is_cancelled());
    assert!(!root.is_cancelled() && !b.is_cancelled(), "a child's cancel stays below it");
    root.cancel();
    assert!(b.is_cancelled());
    assert!(root.child_token().is_cancelled(), "a child of a cancelled token starts cancelled");
}

#[test]
fn fibers_wait_blocking_style_with_and_without_a_deadline() {
    let rt = Builder::new().start_paused(true).build().unwrap();
    rt.block_on(|| {
        let parent = CancellationToken::new();
        let child = parent.child_token();
        let t0 = spindle::time::now();
        assert!(!child.wait_timeout(Duration::from_secs(5)));
        assert_eq!(spindle::time::now() - t0, Duration::from_secs(5));
        let waiters: Vec<_> = (0..10)
            .map(|_| {
                let child = child.clone();
                spindle::spawn(move || {
                    child.wait();
                    child.is_cancelled()
                })
            })
            .collect();
        spindle::yield_now();
        parent.cancel();
        assert!(waiters.into_iter().all(|w| w.join().unwrap()));
        assert!(child.wait_timeout(Duration::from_secs(5)), "a cancelled token's wait returns at once");
        assert_eq!(spindle::time::now() - t0, Duration::from_secs(5));
    });
}

#[test]
fn tasks_await_cancelled_and_dropped_futures_leave_no_waiter() {
    let rt = spindle::Runtime::new().unwrap();
    let token = CancellationToken::new();
    // Futures made and dropped without the token being cancelled.
    let t = token.clone();
    rt.spawn_async(async move {
        for _ in 0..100 {
            let _ = spindle::time::timeout(Duration::from_micros(1), t.cancelled()).await;
        }
    })
    .join()
    .unwrap();
    let t = token.clone();
    let watcher = rt.spawn_async(async move {
        t.cancelled().await;
        "seen"
    });
    let child = token.child_token();
    let from_thread = std::thread::spawn(move || {
        child.wait(); // a plain thread blocks
        true
    });
    token.cancel();
    assert_eq!(watcher.join().unwrap(), "seen");
    assert!(from_thread.join().unwrap());
}

#[test]
fn a_drop_guard_cancels_unless_disarmed() {
    let token = CancellationToken::new();
    let child = token.child_token();
    drop(child.clone().drop_guard().disarm());
    assert!(!child.is_cancelled());
    {
        let _guard = child.clone().drop_guard();
    }
    assert!(child.is_cancelled());
    assert!(!token.is_cancelled());
}

#[test]
fn the_shutdown_token_is_a_root() {
    let rt = spindle::Runtime::new().unwrap();
    let shutdown = rt.shutdown_token();
    let request = shutdown.child_token();
    let step = request.child_token();
    let worker = rt.spawn(move || {
        step.wait();
        "stopped by the shutdown"
    });
    request.child_token().cancel();
    assert!(!request.is_cancelled());
    shutdown.trigger();
    assert!(request.is_cancelled());
    assert_eq!(worker.join().unwrap(), "stopped by the shutdown");
}
