//! A worker that computes without parking (or that the kernel preempted) does not hold up a
//! task's socket: the task's socket is in the runtime's shared task reactor, which the idle
//! worker watches, so the idle worker receives the event and runs the task itself. (Sockets registered with a worker's own reactor are read for a busy owner by an
//! idle worker: `reactor_reads_for_others`.)

use std::future::poll_fn;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the computing fiber spins at most: reached only if the read is held up.
const SPIN_LIMIT: Duration = Duration::from_secs(10);

#[test]
fn a_computing_worker_does_not_hold_up_its_sockets() {
    let rt = spindle::Builder::new().worker_threads(2).thread_name("unread").build().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let server = spindle::net::TcpStream::from_std(listener.accept().unwrap().0).unwrap();
    let registered = Arc::new(AtomicBool::new(false));
    let read_done = Arc::new(AtomicBool::new(false));
    let first_poll_on: Arc<Mutex<Option<String>>> = Arc::default();
    let (reg, done, first) = (registered.clone(), read_done.clone(), first_poll_on.clone());
    // Worker 0: a fiber spawns the reading task (it lands on worker 0's queue, and its socket
    // registers with the shared task reactor), waits until the task is waiting, then computes.
    let spinner = spindle::fiber::Builder::new()
        .worker(0)
        .spawn_on(&rt, move || {
            let (task_reg, task_done) = (reg.clone(), done.clone());
            let reader = spindle::task::spawn_async(async move {
                let (reg, done) = (task_reg, task_done);
                let mut server = server;
                let mut buf = [0u8; 5];
                let n = poll_fn(|cx| {
                    if first.lock().unwrap().is_none() {
                        *first.lock().unwrap() = std::thread::current().name().map(str::to_owned);
                    }
                    let polled = futures_io::AsyncRead::poll_read(Pin::new(&mut server), cx, &mut buf);
                    if polled.is_pending() {
                        reg.store(true, Ordering::SeqCst);
                    }
                    polled
                })
                .await
                .unwrap();
                done.store(true, Ordering::SeqCst);
                n
            });
            while !reg.load(Ordering::SeqCst) {
                spindle::yield_now();
            }
            let deadline = Instant::now() + SPIN_LIMIT;
            while !done.load(Ordering::SeqCst) {
                if Instant::now() > deadline {
                    return (false, reader);
                }
                std::hint::spin_loop();
            }
            (true, reader)
        })
        .unwrap();
    while !registered.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Worker 0 is computing now (or about to); the data arrives.
    client.write_all(b"hello").unwrap();
    let (released, reader) = spinner.join().unwrap();
    assert!(released, "the read completed while worker 0 computed");
    assert_eq!(rt.block_on(reader).unwrap(), 5);
    assert!(first_poll_on.lock().unwrap().is_some());
}
