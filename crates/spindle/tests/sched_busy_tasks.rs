//! A worker kept busy by tasks that keep waking (themselves or each other) never reaches its
//! idle pass, where it fires timers and reads its reactor: it must still look at both now
//! and then (module `sched::worker::task_queue`, "busy with tasks, still reading the
//! reactor"). On a runtime of one worker nobody else reads them for it; before the fix a
//! task looping on a self-wake kept every timer and socket of its worker waiting for ever
//! (both tests hit their 10 s limit).

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Wakes itself at every poll until `done` is set (then `true`) or 10 s have passed
/// (then `false`): a task that is never idle and never parks, like an async loop that
/// yields cooperatively.
struct Spin {
    done: Arc<AtomicBool>,
    started: Instant,
}

impl Future for Spin {
    type Output = bool;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        if self.done.load(Ordering::Relaxed) {
            return Poll::Ready(true);
        }
        if self.started.elapsed() > Duration::from_secs(10) {
            return Poll::Ready(false);
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn one_worker() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

#[test]
fn a_timer_fires_while_a_task_keeps_waking_itself() {
    let rt = one_worker();
    let done = Arc::new(AtomicBool::new(false));
    let (spin_done, sleep_done) = (done.clone(), done.clone());
    let spun_until_done = rt
        .spawn_async(async move {
            let spinner = spindle::task::spawn_async(Spin { done: spin_done, started: Instant::now() });
            let sleeper = spindle::task::spawn_async(async move {
                spindle::time::sleep_future(Duration::from_millis(10)).await;
                sleep_done.store(true, Ordering::Relaxed);
            });
            let spun = spinner.await.unwrap();
            sleeper.await.unwrap();
            spun
        })
        .join()
        .unwrap();
    assert!(spun_until_done, "the sleeper's timer did not fire while the other task spun");
}

#[test]
fn a_socket_read_completes_while_a_task_keeps_waking_itself() {
    let rt = one_worker();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let (spin_done, read_done) = (done.clone(), done.clone());
    // The peer writes once the reader has had time to wait for it.
    let writer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        s.write_all(b"ping").unwrap();
        s
    });
    let stream = spindle::net::TcpStream::from_std(std::net::TcpStream::connect(addr).unwrap()).unwrap();
    let (spun_until_done, got) = rt
        .spawn_async(async move {
            let spinner = spindle::task::spawn_async(Spin { done: spin_done, started: Instant::now() });
            let reader = spindle::task::spawn_async(async move {
                let mut stream = stream;
                let mut buf = [0u8; 4];
                let n = std::future::poll_fn(|cx| {
                    futures_io::AsyncRead::poll_read(Pin::new(&mut stream), cx, &mut buf)
                })
                .await
                .unwrap();
                read_done.store(true, Ordering::Relaxed);
                buf[..n].to_vec()
            });
            let spun = spinner.await.unwrap();
            (spun, reader.await.unwrap())
        })
        .join()
        .unwrap();
    drop(writer.join().unwrap());
    assert!(spun_until_done, "the read did not complete while the other task spun");
    assert_eq!(got, b"ping");
}
