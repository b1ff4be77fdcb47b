//! `fiber::Builder::spawn_now`: from an async task's poll the new fiber runs at once, until it
//! first parks or finishes; from a fiber it is queued.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

/// Polls `fut` once with a waker that does nothing.
fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    Pin::new(fut).poll(&mut cx)
}

#[test]
fn from_a_task_a_fiber_that_does_not_park_has_finished_when_spawn_now_returns() {
    let rt = runtime();
    let out = rt
        .spawn_async(async {
            let ran = Rc::new(Cell::new(false)); // not Send: the fiber runs on this thread
            let r = ran.clone();
            let mut h = spindle::fiber::Builder::new()
                .name("now")
                .spawn_now(move || {
                    r.set(true);
                    spindle::fiber::current().name().map(str::to_owned)
                })
                .unwrap();
            assert!(ran.get(), "the fiber ran inside spawn_now");
            assert!(h.is_finished());
            let Poll::Ready(name) = poll_once(&mut h) else { panic!("a finished fiber's handle is ready") };
            name.unwrap()
        })
        .join()
        .unwrap();
    assert_eq!(out.as_deref(), Some("now"));
}

#[test]
fn from_a_task_a_fiber_that_parks_returns_to_the_task_and_finishes_later() {
    let rt = runtime();
    let out = rt
        .spawn_async(async {
            let started = Arc::new(AtomicBool::new(false));
            let s = started.clone();
            let h = spindle::fiber::Builder::new()
                .spawn_now(move || {
                    s.store(true, Ordering::SeqCst);
                    spindle::time::sleep(Duration::from_millis(20));
                    7
                })
                .unwrap();
            assert!(started.load(Ordering::SeqCst), "the fiber started inside spawn_now");
            assert!(!h.is_finished(), "it parked in its sleep, and the task went on");
            h.await.unwrap()
        })
        .join()
        .unwrap();
    assert_eq!(out, 7);
}

#[test]
fn from_a_fiber_spawn_now_queues() {
    let rt = runtime();
    let (ran_early, out) = rt.block_on(|| {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let h = spindle::fiber::Builder::new()
            .spawn_now(move || {
                r.store(true, Ordering::SeqCst);
                3
            })
            .unwrap();
        let early = ran.load(Ordering::SeqCst);
        (early, h.join().unwrap())
    });
    assert!(!ran_early, "a fiber cannot run another inside itself");
    assert_eq!(out, 3);
}

#[test]
fn a_panic_in_a_spawn_now_fiber_goes_to_its_handle() {
    let rt = runtime();
    let err = rt
        .spawn_async(async {
            let h = spindle::fiber::Builder::new()
                .spawn_now(|| -> u32 { panic!("spawn_now panic (expected by the test)") })
                .unwrap();
            h.await
        })
        .join()
        .unwrap();
    assert!(err.is_err());
}
