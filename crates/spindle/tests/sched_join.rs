//! Joins of fibers, tasks and blocking jobs: one completion cell, `JoinError` saying why there
//! is no result, and handles that can be waited on with a timeout, then joined or awaited
//! from somewhere else.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use spindle::{CancelReason, JoinError, Runtime};

fn runtime() -> Runtime {
    spindle::Builder::new().worker_threads(2).build().unwrap()
}

/// Polls a future once: whether it was pending.
struct PollOnce<'a, F>(&'a mut F);

impl<F: Future + Unpin> Future for PollOnce<'_, F> {
    type Output = bool;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        Poll::Ready(Pin::new(&mut *self.0).poll(cx).is_pending())
    }
}

fn reason(err: &JoinError) -> Option<CancelReason> {
    err.cancel_reason()
}

#[test]
fn a_panic_is_a_panic_with_its_payload() {
    let rt = runtime();
    let err = rt.spawn(|| -> u32 { panic!("fiber boom") }).join().unwrap_err();
    assert!(err.is_panic() && !err.is_cancelled());
    assert_eq!(err.to_string(), "panicked: fiber boom");
    assert_eq!(err.into_panic().downcast_ref::<&str>(), Some(&"fiber boom"));
    let err = rt.spawn_async(async { panic!("task boom") }).join().unwrap_err();
    assert!(err.try_into_panic().is_ok());
    let err = rt.spawn_blocking(|| panic!("job boom")).join().unwrap_err();
    assert!(err.is_panic());
}

#[test]
fn a_cancellation_says_whether_its_handle_or_the_shutdown_did_it() {
    let rt = runtime();
    // A fiber cancelled through its handle.
    let (tx, rx) = spindle::sync::channel::<()>(1);
    let parked = rt.spawn(move || rx.recv().ok());
    std::thread::sleep(Duration::from_millis(20));
    parked.cancel();
    let err = parked.join().unwrap_err();
    assert_eq!(reason(&err), Some(CancelReason::Handle));
    assert!(err.to_string().contains("through its handle"), "{err}");
    drop(tx);
    // A task aborted through its handle.
    let task = rt.spawn_async(spindle::time::sleep_future(Duration::from_secs(60)));
    task.abort();
    assert_eq!(reason(&task.join().unwrap_err()), Some(CancelReason::Handle));
    // A fiber and a task still parked when the runtime shuts down.
    let (tx, rx) = spindle::sync::channel::<()>(1);
    let fiber = rt.spawn(move || rx.recv().ok());
    let task = rt.spawn_async(spindle::time::sleep_future(Duration::from_secs(60)));
    std::thread::sleep(Duration::from_millis(20));
    drop(rt);
    let err = fiber.join().unwrap_err();
    assert_eq!(reason(&err), Some(CancelReason::Shutdown));
    assert_eq!(err.to_string(), "cancelled: its runtime shut down");
    assert_eq!(reason(&task.join().unwrap_err()), Some(CancelReason::Shutdown));
    drop(tx);
    // A cancellation re-raised keeps its reason.
    let payload = JoinError::try_into_panic(err).unwrap_err().into_panic();
    assert_eq!(
        payload.downcast_ref::<spindle::Cancelled>().map(|c| c.reason()),
        Some(CancelReason::Shutdown)
    );
}

/// A fiber handle waited on with a timeout from a plain thread, then awaited by a task: the
/// completion wakes the task (the timed wait registered a forwarder, which the await retargets).
#[test]
fn a_fiber_handle_timed_out_on_a_thread_can_then_be_awaited_by_a_task() {
    let rt = runtime();
    let (go_tx, go_rx) = spindle::sync::channel::<()>(1);
    let fiber = rt.spawn(move || {
        go_rx.recv().unwrap();
        7u32
    });
    let fiber = fiber.join_timeout(Duration::from_millis(10)).unwrap_err();
    let task = rt.spawn_async(async move { fiber.await.unwrap() * 6 });
    std::thread::sleep(Duration::from_millis(10));
    go_tx.send(()).unwrap();
    assert_eq!(task.join().unwrap(), 42);
}

/// A task handle polled once by one task, then joined by a fiber; and a blocking job's handle
/// timed out in a fiber, then joined on a plain thread.
#[test]
fn task_and_blocking_handles_move_between_waiters() {
    let rt = runtime();
    let (go_tx, go_rx) = spindle::sync::oneshot::<u32>();
    let inner = rt.spawn_async(async move { go_rx.await.unwrap() });
    let handed = rt
        .spawn_async(async move {
            let mut inner = inner;
            // One poll registers this task's waker, then the handle moves on.
            assert!(PollOnce(&mut inner).await, "pending until the oneshot fires");
            // In a Vec: the task's output is the handle itself, not something to await.
            vec![inner]
        })
        .join()
        .unwrap()
        .pop()
        .unwrap();
    let joiner = rt.spawn(move || handed.join().unwrap());
    std::thread::sleep(Duration::from_millis(10));
    go_tx.send(5).unwrap();
    assert_eq!(joiner.join().unwrap(), 5);

    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let job = rt.spawn_blocking(move || {
        go_rx.recv().unwrap();
        9u32
    });
    let job = rt.spawn(move || job.join_timeout(Duration::from_millis(5)).unwrap_err()).join().unwrap();
    go_tx.send(()).unwrap();
    assert_eq!(job.join().unwrap(), 9);
}
