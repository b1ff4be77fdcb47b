//! Async tasks on the worker's loop: results, panics, wakers from other threads, abort,
//! JoinHandle as a future, sockets and timers from tasks, shutdown.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::Duration;

use spindle::Runtime;

#[test]
fn tasks_return_results_and_join_from_fibers_threads_and_futures() {
    let rt = Runtime::new().unwrap();
    let h = rt.spawn_async(async { 40 + 2 });
    assert_eq!(h.join().unwrap(), 42); // from a plain thread
    let v = rt.block_on(|| {
        let inner = spindle::task::spawn_async(async { 5 });
        let outer = spindle::task::spawn_async(async move { inner.await.unwrap() * 2 });
        outer.join().unwrap() // from a fiber: parks it
    });
    assert_eq!(v, 10);
}

#[test]
fn a_panicking_task_reports_the_panic_and_the_worker_keeps_going() {
    let rt = Runtime::new().unwrap();
    let h = rt.spawn_async(async { panic!("task boom") });
    let err = h.join().unwrap_err();
    let err = err.into_panic();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"task boom"));
    assert_eq!(rt.spawn_async(async { 1 }).join().unwrap(), 1);
}

#[test]
fn a_task_woken_from_another_thread_runs_again() {
    let rt = Runtime::new().unwrap();
    let slot: Arc<Mutex<(bool, Option<Waker>)>> = Arc::default();
    let s2 = slot.clone();
    let h = rt.spawn_async(poll_fn(move |cx| {
        let mut s = s2.lock().unwrap();
        if s.0 {
            Poll::Ready("woken")
        } else {
            s.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }));
    let waker = loop {
        if let Some(w) = slot.lock().unwrap().1.take() {
            break w;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    slot.lock().unwrap().0 = true;
    std::thread::spawn(move || waker.wake()).join().unwrap();
    assert_eq!(h.join().unwrap(), "woken");
}

struct DropFlag(Arc<AtomicUsize>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn abort_drops_the_future_and_join_reports_cancelled() {
    let rt = Runtime::new().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let flag = DropFlag(dropped.clone());
    let h = rt.spawn_async(async move {
        let _flag = flag;
        spindle::time::sleep_future(Duration::from_secs(3600)).await;
    });
    std::thread::sleep(Duration::from_millis(20));
    assert!(!h.is_finished());
    h.abort();
    let err = h.join().unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn tasks_use_timers_and_sockets() {
    let rt = Runtime::new().unwrap();
    let got = rt.block_on(|| {
        let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = spindle::task::spawn_async(async move {
            let (mut conn, _) = poll_fn(|cx| listener.poll_accept(cx)).await.unwrap();
            spindle::time::sleep_future(Duration::from_millis(10)).await;
            let mut buf = [0u8; 3];
            let n = poll_fn(|cx| futures_io::AsyncRead::poll_read(Pin::new(&mut conn), cx, &mut buf))
                .await
                .unwrap();
            buf[..n].to_vec()
        });
        let mut client = spindle::net::TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(&mut client, b"abc").unwrap();
        server.join().unwrap()
    });
    assert_eq!(got, b"abc");
}

#[test]
fn ten_thousand_tasks_complete() {
    let rt = Runtime::new().unwrap();
    let sum = rt.block_on(|| {
        let handles: Vec<_> = (0..10_000u64)
            .map(|i| {
                spindle::task::spawn_async(async move {
                    // Yield once through the scheduler.
                    let mut first = true;
                    poll_fn(|cx| {
                        if std::mem::take(&mut first) {
                            cx.waker().wake_by_ref();
                            Poll::Pending
                        } else {
                            Poll::Ready(())
                        }
                    })
                    .await;
                    i
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(sum, 9999 * 10_000 / 2);
}

#[test]
fn shutdown_cancels_pending_tasks_and_their_joins_return() {
    let rt = Runtime::new().unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let flag = DropFlag(dropped.clone());
    let h = rt.spawn_async(async move {
        let _flag = flag;
        std::future::pending::<()>().await;
    });
    std::thread::sleep(Duration::from_millis(20));
    drop(rt);
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn a_blocking_call_inside_a_task_is_a_clear_panic_not_a_deadlock() {
    let rt = Runtime::new().unwrap();
    let h = rt.spawn_async(async {
        let (_tx, rx) = spindle::sync::channel::<u8>(1);
        rx.recv().ok() // would block the worker: must panic instead
    });
    let err = h.join().unwrap_err();
    let err = err.into_panic();
    let msg = err.downcast_ref::<String>().cloned().or(err.downcast_ref::<&str>().map(|s| s.to_string()));
    assert!(msg.unwrap_or_default().contains("async task"), "clear message expected");
    assert_eq!(rt.spawn_async(async { 3 }).join().unwrap(), 3, "the worker keeps serving");
}

#[test]
fn join_handle_is_a_future_with_a_timeout() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let slow = spindle::task::spawn_async(spindle::time::sleep_future(Duration::from_secs(3600)));
        let r = spindle::task::block_on(spindle::time::timeout(Duration::from_millis(10), slow));
        assert!(r.is_err(), "timed out waiting for the handle");
        let fut = spindle::task::spawn_async(async { "ok" });
        assert_eq!(spindle::task::block_on(fut).unwrap(), "ok");
    });
}

#[test]
fn yield_now_lets_the_other_queued_tasks_run_first() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let order = rt.block_on(|| {
        let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let (a, b) = (log.clone(), log.clone());
        let first = spindle::task::spawn_local(async move {
            a.borrow_mut().push("a1");
            spindle::task::yield_now().await;
            a.borrow_mut().push("a2");
        });
        let second = spindle::task::spawn_local(async move {
            b.borrow_mut().push("b1");
        });
        first.join().unwrap();
        second.join().unwrap();
        let order = log.borrow().clone();
        order
    });
    assert_eq!(order, ["a1", "b1", "a2"]);
}
