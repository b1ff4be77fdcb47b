//! `LocalRuntime`: the building thread is the one worker, inside `block_on` only; what is
//! left between two calls goes on in the next; the drop cancels it on the same thread.

use std::io::{Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use spindle::net::{TcpListener, TcpStream};
use spindle::{Builder, LocalRuntime};

/// The names of this process's threads (`/proc/self/task/*/comm`).
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

#[test]
fn fibers_and_tasks_run_on_the_calling_thread_and_no_worker_thread_starts() {
    // Without a watchdog (its thread is the only one a local runtime starts by default).
    let rt = Builder::new().thread_name("lrt-a").long_running_budget(None).build_local().unwrap();
    let me = thread::current().id();
    let (ids, names) = rt.block_on(|| {
        let fibers: Vec<_> = (0..10).map(|_| spindle::spawn(|| thread::current().id())).collect();
        let task = spindle::task::spawn_async(async { thread::current().id() });
        let mut ids: Vec<ThreadId> = fibers.into_iter().map(|f| f.join().unwrap()).collect();
        ids.push(task.join().unwrap());
        ids.push(thread::current().id());
        (ids, thread_names())
    });
    assert_eq!(ids.len(), 12);
    assert!(ids.iter().all(|id| *id == me), "every fiber and task ran on the caller's thread");
    // Pool threads start on demand (with the `hook` feature, `thread_names`' own file reads
    // on the fiber start a file pool thread); no worker or watchdog thread ever does.
    let pool = |n: &str| n.starts_with("lrt-a-file") || n.starts_with("lrt-a-blocking");
    assert!(
        !names.iter().any(|n| n.starts_with("lrt-a") && !pool(n)),
        "no worker or watchdog thread of the runtime started: {names:?}"
    );
    assert_eq!(rt.block_on(async { 2 + 2 }), 4);
}

#[test]
fn what_is_parked_when_block_on_returns_goes_on_in_the_next() {
    let rt = LocalRuntime::new().unwrap();
    let (tx, rx) = spindle::sync::channel::<u32>(1);
    let (waiter, sleeper) = rt.block_on(move || {
        let waiter = spindle::spawn(move || rx.recv().unwrap() * 2);
        let sleeper = spindle::spawn(|| {
            spindle::time::sleep(Duration::from_millis(20));
            "slept"
        });
        (waiter, sleeper)
    });
    assert!(!waiter.is_finished() && !sleeper.is_finished(), "nothing runs between two calls");
    let (doubled, slept) = rt.block_on(move || {
        tx.send(21).unwrap();
        (waiter.join().unwrap(), sleeper.join().unwrap())
    });
    assert_eq!((doubled, slept), (42, "slept"));
}

#[test]
fn sockets_work_between_fibers_of_one_local_runtime() {
    let rt = LocalRuntime::new().unwrap();
    let echoed = rt.block_on(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = spindle::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 64];
            loop {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).unwrap();
            }
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let mut got = Vec::new();
        for i in 0..100u8 {
            c.write_all(&[i; 10]).unwrap();
            let mut buf = [0u8; 10];
            c.read_exact(&mut buf).unwrap();
            got.extend_from_slice(&buf);
        }
        drop(c);
        server.join().unwrap();
        got
    });
    let want: Vec<u8> = (0..100u8).flat_map(|i| [i; 10]).collect();
    assert_eq!(echoed, want);
}

#[test]
fn a_panic_resumes_on_the_caller_and_the_runtime_stays_usable() {
    let rt = LocalRuntime::new().unwrap();
    let err =
        catch_unwind(AssertUnwindSafe(|| rt.block_on(|| -> u32 { panic!("boom in block_on") }))).unwrap_err();
    assert_eq!(err.downcast_ref::<&str>(), Some(&"boom in block_on"));
    assert_eq!(rt.block_on(|| spindle::spawn(|| 5).join().unwrap()), 5);
}

/// Fibers that only ever yield to each other never hand the thread back to the loop: the
/// `block_on` fiber's end must still make the loop leave.
#[test]
fn block_on_returns_while_other_fibers_keep_switching() {
    let rt = LocalRuntime::new().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let spinners = rt.block_on({
        let stop = stop.clone();
        move || {
            let spinners: Vec<_> = (0..2)
                .map(|_| {
                    let stop = stop.clone();
                    spindle::spawn(move || {
                        let mut yields = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            spindle::yield_now();
                            yields += 1;
                        }
                        yields
                    })
                })
                .collect::<Vec<_>>();
            // Let them start switching among themselves.
            for _ in 0..10 {
                spindle::yield_now();
            }
            spinners
        }
    });
    stop.store(true, Ordering::Relaxed);
    let yields = rt.block_on(move || spinners.into_iter().map(|s| s.join().unwrap()).collect::<Vec<_>>());
    assert!(yields.iter().all(|&y| y > 0), "the spinners ran: {yields:?}");
}

/// The `block_on` fiber may end after a fiber started inside a task's poll (`spawn_now`)
/// switched to it directly: the scheduler context then resumes inside that poll, and must
/// still leave the loop rather than sleep in the reactor with nothing left to wake it (it
/// slept until the next timer or idle trim, 200 ms here, or for good). Nothing here waits on
/// I/O or a timer, so the worker never sleeps.
#[test]
fn block_on_returns_when_its_fiber_ends_inside_a_tasks_poll() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let rt = LocalRuntime::new().unwrap();
        let got = rt.block_on(|| {
            let (tx, rx) = spindle::sync::channel::<u32>(1);
            let task = spindle::task::spawn_async(async move {
                // Runs in the task's poll; its send wakes the parked block_on fiber, which
                // runs next, straight from this fiber's end.
                spindle::fiber::Builder::new().spawn_now(move || tx.send(7).unwrap()).unwrap();
            });
            let got = rx.recv().unwrap();
            drop(task);
            got
        });
        done_tx.send((got, rt.metrics()[0].sleeps)).unwrap();
    });
    let (got, sleeps) =
        done_rx.recv_timeout(Duration::from_secs(10)).expect("block_on did not return: the loop slept");
    assert_eq!(got, 7);
    assert_eq!(sleeps, 0, "the loop slept in the reactor after the block_on fiber had ended");
}

#[test]
fn the_drop_cancels_what_is_left_on_this_thread() {
    struct Guard(Arc<Mutex<Option<ThreadId>>>);
    impl Drop for Guard {
        fn drop(&mut self) {
            *self.0.lock().unwrap() = Some(thread::current().id());
        }
    }
    let dropped_on = Arc::new(Mutex::new(None));
    let rt = LocalRuntime::new().unwrap();
    let (tx, rx) = spindle::sync::channel::<()>(1);
    let parked = rt.block_on({
        let dropped_on = dropped_on.clone();
        move || {
            spindle::spawn(move || {
                let _guard = Guard(dropped_on);
                let _ = rx.recv();
                unreachable!("the sender is kept until the runtime is gone");
            })
        }
    });
    drop(rt);
    assert_eq!(*dropped_on.lock().unwrap(), Some(thread::current().id()), "unwound here, destructors run");
    assert!(parked.join().unwrap_err().is_cancelled());
    drop(tx);
}

#[test]
fn spawns_from_another_thread_run_in_the_next_block_on() {
    let rt = LocalRuntime::new().unwrap();
    let handle = rt.handle();
    let (fiber, task) = thread::spawn(move || {
        (handle.spawn(|| thread::current().id()), handle.spawn_async(async { thread::current().id() }))
    })
    .join()
    .unwrap();
    let me = thread::current().id();
    let ids = rt.block_on(move || (fiber.join().unwrap(), spindle::task::block_on(task).unwrap()));
    assert_eq!(ids, (me, me));
}

#[test]
fn a_blocking_job_wakes_the_waiting_fiber() {
    let rt = Builder::new().thread_name("lrt-b").build_local().unwrap();
    let got = rt.block_on(|| {
        spindle::spawn_blocking(|| {
            thread::sleep(Duration::from_millis(10));
            thread::current().name().map(str::to_owned)
        })
        .join()
        .unwrap()
    });
    assert_eq!(got.as_deref(), Some("lrt-b-blocking"));
}

#[test]
fn block_on_inside_a_fiber_panics_with_a_clear_message() {
    let rt = spindle::Runtime::new().unwrap();
    let msg = rt.block_on(|| {
        let local = LocalRuntime::new().unwrap();
        let err = catch_unwind(AssertUnwindSafe(|| local.block_on(|| 1))).unwrap_err();
        err.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| err.downcast_ref::<String>().cloned())
    });
    let msg = msg.expect("a panic message");
    assert!(msg.contains("LocalRuntime::block_on called inside a spindle runtime"), "{msg}");
}

#[test]
fn build_local_refuses_more_than_one_worker() {
    let err = Builder::new().worker_threads(2).build_local().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("worker_threads"), "{err}");
    assert!(Builder::new().worker_threads(1).build_local().is_ok());
}

/// `LocalRuntime::dump_fibers` lists the fibers waiting for the next `block_on`, and a
/// runtime's `Handle::dump_fibers` lists them from any thread.
#[test]
fn dump_fibers_on_a_local_runtime_and_through_a_handle() {
    let rt = Builder::new().build_local().unwrap();
    let (tx, rx) = spindle::sync::channel::<u8>(1);
    let waiter = rt.block_on(move || {
        let waiter =
            spindle::fiber::Builder::new().name("local-waiter").spawn(move || rx.recv().unwrap()).unwrap();
        spindle::yield_now();
        waiter
    });
    let dump = rt.dump_fibers();
    let mine = dump.iter().find(|f| f.name.as_deref() == Some("local-waiter")).expect("listed");
    assert_eq!(mine.waiting_on, "channel recv");
    assert!(mine.spawned_at.file().ends_with("sched_local_runtime.rs"), "{}", mine.spawned_at);
    assert_eq!(
        rt.block_on(move || {
            tx.send(4).unwrap();
            waiter.join().unwrap()
        }),
        4
    );
    assert!(rt.dump_fibers().iter().all(|f| f.name.as_deref() != Some("local-waiter")));

    let multi = spindle::Runtime::new().unwrap();
    let (tx, rx) = spindle::sync::channel::<u8>(1);
    let parked = multi.spawn(move || rx.recv().unwrap());
    let handle = multi.handle();
    let found = (0..500).find_map(|_| {
        let dump = handle.dump_fibers();
        let hit = dump.into_iter().find(|f| f.waiting_on == "channel recv");
        if hit.is_none() {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        hit
    });
    assert!(found.is_some(), "the parked fiber is listed through the handle");
    tx.send(1).unwrap();
    parked.join().unwrap();
}
