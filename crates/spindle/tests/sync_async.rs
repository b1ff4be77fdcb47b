//! The sync primitives awaited from async tasks: channel send/recv futures, oneshot, mutex,
//! wait group and fiber join handles, without blocking the worker (a task and a fiber on a
//! single-worker runtime make progress together).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use spindle::sync::{channel, oneshot, Mutex, RecvError, WaitGroup};

fn one_worker() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

#[test]
fn task_and_fiber_ping_pong_over_channels_on_one_worker() {
    let rt = one_worker();
    let (ping_tx, ping_rx) = channel::<u32>(1);
    let (pong_tx, pong_rx) = channel::<u32>(1);
    let task = rt.spawn_async(async move {
        for i in 0..200 {
            ping_tx.send_async(i).await.unwrap();
            assert_eq!(pong_rx.recv_async().await, Ok(i + 1));
        }
    });
    let fiber = rt.spawn(move || {
        while let Ok(v) = ping_rx.recv() {
            pong_tx.send(v + 1).unwrap();
        }
    });
    task.join().unwrap();
    fiber.join().unwrap();
}

#[test]
fn async_recv_reports_closing_and_send_gives_the_value_back() {
    let rt = one_worker();
    let (tx, rx) = channel::<String>(1);
    let h = rt.spawn_async(async move {
        let first = rx.recv_async().await;
        let second = rx.recv_async().await;
        (first, second)
    });
    tx.send("x".into()).unwrap();
    drop(tx);
    assert_eq!(h.join().unwrap(), (Ok("x".to_string()), Err(RecvError)));

    let (tx, rx) = channel::<String>(1);
    drop(rx);
    let h = rt.spawn_async(async move { tx.send_async("back".into()).await.unwrap_err().0 });
    assert_eq!(h.join().unwrap(), "back");
}

/// Polls `fut` once (so that it queues its waker) and reports whether it completed.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx).is_ready())).await
}

#[test]
fn a_recv_future_dropped_after_its_wakeup_passes_it_on() {
    // The loser is first in the queue and is woken by the send, but drops its future without
    // taking the value: the wake-up must pass to the winner, queued behind it.
    let rt = one_worker();
    let (tx, rx) = channel::<u32>(1);
    let rx2 = rx.clone();
    let (ready_tx, ready_rx) = channel::<&str>(2);
    let (go_tx, go_rx) = oneshot::<()>();
    let (result_tx, result_rx) = channel::<Result<u32, RecvError>>(1);
    let ready = ready_tx.clone();
    let _loser = rt.spawn_async(async move {
        let mut recv = rx.recv_async();
        assert!(!poll_once(&mut recv).await);
        ready.send_async("loser").await.unwrap();
        go_rx.await.unwrap();
        drop(recv);
    });
    assert_eq!(ready_rx.recv(), Ok("loser"));
    let _winner = rt.spawn_async(async move {
        let mut recv = rx2.recv_async();
        if !poll_once(&mut recv).await {
            ready_tx.send_async("winner").await.unwrap();
        }
        result_tx.send_async(recv.await).await.unwrap();
    });
    assert_eq!(ready_rx.recv(), Ok("winner"));
    tx.send(11).unwrap(); // wakes the loser, first in line
    go_tx.send(()).unwrap();
    assert_eq!(result_rx.recv_timeout(Duration::from_secs(10)), Ok(Ok(11)), "the wake-up was lost");
}

#[test]
fn oneshot_receiver_is_a_future() {
    let rt = one_worker();
    let (tx, rx) = oneshot::<u8>();
    let h = rt.spawn_async(rx);
    rt.spawn(move || tx.send(4).unwrap()).join().unwrap();
    assert_eq!(h.join().unwrap(), Ok(4));
    let (tx, rx) = oneshot::<u8>();
    drop(tx);
    assert_eq!(rt.spawn_async(rx).join().unwrap(), Err(RecvError));
}

#[test]
fn mutex_lock_async_excludes_tasks_and_fibers() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let m = Arc::new(Mutex::new(0u64));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let m = m.clone();
        tasks.push(rt.spawn_async(async move {
            for _ in 0..100 {
                let mut g = m.lock_async().await;
                let v = *g;
                spindle::task::yield_now().await;
                *g = v + 1;
            }
        }));
    }
    let mut fibers = Vec::new();
    for _ in 0..4 {
        let m = m.clone();
        fibers.push(rt.spawn(move || {
            for _ in 0..100 {
                let mut g = m.lock();
                let v = *g;
                spindle::yield_now();
                *g = v + 1;
            }
        }));
    }
    tasks.into_iter().for_each(|t| t.join().unwrap());
    fibers.into_iter().for_each(|f| f.join().unwrap());
    assert_eq!(*m.lock(), 1200);
}

#[test]
fn fiber_join_handle_is_awaitable_from_a_task() {
    let rt = one_worker();
    let (tx, rx) = channel::<()>(1);
    let fiber = rt.spawn(move || {
        rx.recv().unwrap();
        "fiber result"
    });
    let task = rt.spawn_async(async move { fiber.await.unwrap() });
    rt.spawn(move || tx.send(()).unwrap()).join().unwrap();
    assert_eq!(task.join().unwrap(), "fiber result");

    let panicking = rt.spawn(|| panic!("boom"));
    assert!(rt.spawn_async(panicking).join().unwrap().is_err());
}

#[test]
fn waitgroup_wait_async() {
    let rt = one_worker();
    let wg = WaitGroup::new();
    wg.add(3);
    let w = wg.clone();
    let waiter = rt.spawn_async(async move { w.wait_async().await });
    for _ in 0..3 {
        let wg = wg.clone();
        rt.spawn(move || wg.done());
    }
    waiter.join().unwrap();
    assert_eq!(wg.count(), 0);
}

#[test]
fn a_blocking_wait_from_a_task_panics_naming_the_async_form() {
    let rt = one_worker();
    let (tx, rx) = channel::<u32>(1);
    tx.send(1).unwrap();
    // Even with a value ready: the misuse is reported at once, not only when it would park.
    let err = rt.spawn_async(async move { rx.recv_timeout(Duration::from_millis(1)) }).join().unwrap_err();
    let err = err.into_panic();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("async task") && msg.contains("recv_async"), "{msg}");
    let sem = Arc::new(spindle::sync::Semaphore::new(1));
    let err = rt.spawn_async(async move { drop(sem.acquire()) }).join().unwrap_err();
    let err = err.into_panic();
    assert!(err.downcast_ref::<String>().is_some_and(|m| m.contains("async task")));
}
