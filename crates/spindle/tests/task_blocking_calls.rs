//! A blocking-style spindle call made from an async task panics at once, naming the async
//! alternative, instead of stalling every fiber and task of its worker.

use std::io::Read;
use std::time::{Duration, Instant};

#[path = "support/hang_guard.rs"]
mod hang_guard;
use hang_guard::returns_within_hang_limit;

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn runtime() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

#[test]
fn sleep_in_a_task_panics_and_names_sleep_future() {
    // A sleep that never ends: the join returning at all shows that the task panicked instead
    // of sleeping (blocking its worker or parking). If it slept, the guard reports the hang.
    let err =
        returns_within_hang_limit("an endless `sleep` in a task (it slept instead of panicking)", || {
            let rt = runtime();
            rt.spawn_async(async { spindle::time::sleep(Duration::MAX) }).join()
        })
        .unwrap_err();
    let message = panic_message(err.into_panic());
    assert!(message.contains("`sleep` is a blocking-style call"), "{message}");
    assert!(message.contains("sleep_future"), "{message}");
}

#[test]
fn sleep_until_and_timeout_fiber_in_a_task_panic() {
    let rt = runtime();
    let err = rt
        .spawn_async(async { spindle::time::sleep_until(Instant::now() + Duration::from_secs(5)) })
        .join()
        .unwrap_err();
    assert!(panic_message(err.into_panic()).contains("sleep_until_future"));
    let err = rt
        .spawn_async(async { spindle::time::timeout_fiber(Duration::from_secs(5), || 1) })
        .join()
        .unwrap_err();
    let message = panic_message(err.into_panic());
    assert!(message.contains("spindle::time::timeout(duration, future).await"), "{message}");
}

#[test]
fn a_blocking_socket_read_in_a_task_panics_and_names_async_read() {
    let rt = runtime();
    let listener = spindle::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::net::TcpStream::connect(addr).unwrap();
    let (stream, _) = rt.block_on(move || listener.accept().unwrap());
    let err = rt
        .spawn_async(async move {
            let mut stream = stream;
            let mut buf = [0u8; 16];
            stream.read(&mut buf)
        })
        .join()
        .unwrap_err();
    let message = panic_message(err.into_panic());
    assert!(message.contains("`socket read` is a blocking-style call"), "{message}");
    assert!(message.contains("AsyncRead"), "{message}");
    drop(client);
}

#[test]
fn joins_and_channel_waits_in_a_task_panic_with_the_call_named() {
    let rt = runtime();
    // A finished fiber too: the misuse shows every time, not only when the join would wait.
    let fiber = rt.spawn(|| 5);
    std::thread::sleep(Duration::from_millis(20));
    let err = rt
        .spawn_async(async move {
            let _ = fiber.join();
        })
        .join()
        .unwrap_err();
    let message = panic_message(err.into_panic());
    assert!(
        message.contains("`join` is a blocking-style call") && message.contains("handle.await"),
        "{message}"
    );
    let (_tx, rx) = spindle::sync::channel::<u8>(1);
    let err = rt
        .spawn_async(async move {
            let _ = rx.recv();
        })
        .join()
        .unwrap_err();
    assert!(panic_message(err.into_panic()).contains("`channel recv` is a blocking-style call"));
}

#[test]
fn the_worker_keeps_serving_after_such_a_panic() {
    let rt = runtime();
    let _ = rt.spawn_async(async { spindle::time::sleep(Duration::from_millis(1)) }).join();
    assert_eq!(rt.block_on(|| spindle::spawn(|| 3).join().unwrap()), 3);
}

/// In builds with debug assertions the waits whose fast path takes no park (a lock that is
/// free, a channel with room or a value) panic from a task too, whether or not they would
/// wait: the misuse shows on the first run, not only under contention. An unbounded send
/// never waits and is no blocking-style call.
#[cfg(debug_assertions)]
#[test]
fn blocking_style_waits_in_a_task_panic_even_when_they_would_not_wait() {
    use spindle::sync::{channel, unbounded, Mutex, Semaphore, WaitGroup};
    let rt = runtime();
    let message =
        |f: fn() -> ()| panic_message(rt.spawn_async(async move { f() }).join().unwrap_err().into_panic());
    let lock = message(|| drop(Mutex::new(1).lock()));
    assert!(lock.contains("`mutex lock` is a blocking-style call") && lock.contains("lock_async"), "{lock}");
    let send = message(|| channel(4).0.send(1).unwrap());
    assert!(send.contains("`channel send`"), "{send}");
    let recv = message(|| {
        let (tx, rx) = channel(4);
        tx.try_send(1).unwrap();
        rx.recv().unwrap();
    });
    assert!(recv.contains("`channel recv`"), "{recv}");
    let acquire = message(|| drop(Semaphore::new(1).acquire()));
    assert!(acquire.contains("`semaphore acquire`"), "{acquire}");
    let wait = message(|| WaitGroup::new().wait());
    assert!(wait.contains("`wait group`"), "{wait}");
    let unbounded_send = rt
        .spawn_async(async {
            let (tx, rx) = unbounded();
            tx.send(3).unwrap();
            rx.try_recv().unwrap()
        })
        .join()
        .unwrap();
    assert_eq!(unbounded_send, 3);
}
