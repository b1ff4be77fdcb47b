//! Graceful shutdown: `Runtime::shutdown_timeout` drains tracked work (fibers and tasks that
//! hold an `InFlight` guard), cancels what is left at the deadline, and wakes fibers, threads
//! and tasks waiting on the shutdown token.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle::net::TcpListener;
use spindle::shutdown::ShutdownToken;
use spindle::{Builder, Runtime};

/// Counts drops: a cancelled fiber unwinds and runs its destructors.
struct CountDrop(Arc<AtomicUsize>);
impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn tracked_work_drains_before_the_runtime_stops() {
    let rt = Builder::new().worker_threads(2).build().unwrap();
    let finished = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..6 {
        let (finished, tx, token) = (finished.clone(), tx.clone(), rt.shutdown_token());
        if i % 2 == 0 {
            rt.spawn(move || {
                let _busy = token.track();
                tx.send(()).unwrap();
                token.wait();
                // In-flight work finishing after the trigger.
                spindle::time::sleep(Duration::from_millis(20));
                finished.fetch_add(1, Ordering::SeqCst);
            });
        } else {
            rt.spawn_async(async move {
                let _busy = token.track();
                tx.send(()).unwrap();
                token.triggered().await;
                spindle::time::sleep_future(Duration::from_millis(20)).await;
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
    }
    for _ in 0..6 {
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
    }
    assert!(rt.shutdown_timeout(Duration::from_secs(20)));
    assert_eq!(finished.load(Ordering::SeqCst), 6);
}

#[test]
fn work_past_the_deadline_and_untracked_loops_are_cancelled() {
    let rt = Runtime::new().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel();
    // Tracked, but never finishes: cancelled at the deadline.
    let (d, t) = (dropped.clone(), tx.clone());
    let token = rt.shutdown_token();
    let stuck = rt.spawn(move || {
        let _guard = CountDrop(d);
        let _busy = token.track();
        t.send(()).unwrap();
        spindle::time::sleep(Duration::from_secs(3600));
    });
    // An accept loop that never looks at the token: cancelled too.
    let d = dropped.clone();
    let accept_loop = rt.spawn(move || {
        let _guard = CountDrop(d);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        tx.send(()).unwrap();
        loop {
            let _ = listener.accept();
        }
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(!rt.shutdown_timeout(Duration::from_millis(100)), "the stuck work cannot drain");
    assert_eq!(dropped.load(Ordering::SeqCst), 2, "both fibers unwound");
    assert!(stuck.join().unwrap_err().is_cancelled());
    assert!(accept_loop.join().unwrap_err().is_cancelled());
}

#[test]
fn shutdown_with_nothing_in_flight_returns_at_once() {
    let rt = Runtime::new().unwrap();
    let token = rt.shutdown_token();
    assert!(!token.is_triggered());
    assert!(rt.shutdown_timeout(Duration::from_secs(3600)));
    assert!(token.is_triggered());
}

#[test]
fn a_token_wakes_a_thread_and_a_fiber_drain_wait_ends_at_its_deadline() {
    let token = ShutdownToken::new();
    let t = token.clone();
    let thread = std::thread::spawn(move || t.wait());
    token.trigger();
    token.trigger(); // idempotent
    thread.join().unwrap();
    // A wait that starts after the trigger returns at once.
    token.wait();

    let rt = Runtime::new().unwrap();
    let busy = token.track();
    let t = token.clone();
    let drained = rt.block_on(move || t.wait_drained(Some(Instant::now() + Duration::from_millis(30))));
    assert!(!drained, "a guard is still alive");
    assert_eq!(token.in_flight(), 1);
    let t = token.clone();
    let waiter = rt.spawn(move || t.wait_drained(None));
    drop(busy);
    assert!(waiter.join().unwrap());
    assert_eq!(token.in_flight(), 0);
}

#[test]
fn a_blocking_wait_from_a_task_panics_naming_the_future() {
    let rt = Runtime::new().unwrap();
    let token = rt.shutdown_token();
    let err = rt.spawn_async(async move { token.wait() }).join().unwrap_err();
    let err = err.into_panic();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("ShutdownToken::triggered"), "{msg}");
}
