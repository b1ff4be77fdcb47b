//! Fibers through the public API: spawning, joining, panics, names, stack sizes, yielding,
//! parking, and shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::fiber;
use spindle::sync::{channel, WaitGroup};
use spindle::Runtime;

#[test]
fn block_on_returns_the_value() {
    let rt = Runtime::new().unwrap();
    assert_eq!(rt.block_on(|| 6 * 7), 42);
    // The runtime is reusable.
    assert_eq!(rt.block_on(|| "again"), "again");
}

#[test]
fn spawned_fibers_return_their_results() {
    let rt = Runtime::new().unwrap();
    let results = rt.block_on(|| {
        let handles: Vec<_> = (0..100u64).map(|i| spindle::spawn(move || i * 2)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(results, (0..100u64).map(|i| i * 2).collect::<Vec<_>>());
}

#[test]
fn runtime_spawn_from_outside_and_join_from_a_thread() {
    let rt = Runtime::new().unwrap();
    let handle = rt.spawn(|| {
        spindle::yield_now();
        String::from("from a fiber")
    });
    assert_eq!(handle.join().unwrap(), "from a fiber");
}

#[test]
fn a_panic_is_caught_and_returned_by_join() {
    let rt = Runtime::new().unwrap();
    let (message, after) = rt.block_on(|| {
        let h = spindle::spawn(|| -> u32 { panic!("boom in a fiber") });
        let err = h.join().unwrap_err();
        let err = err.into_panic();
        let message = err.downcast_ref::<&str>().map(|s| s.to_string());
        // The worker keeps running fibers after a panic.
        let after = spindle::spawn(|| 5).join().unwrap();
        (message, after)
    });
    assert_eq!(message.as_deref(), Some("boom in a fiber"));
    assert_eq!(after, 5);
}

#[test]
fn a_panic_in_block_on_resumes_on_the_caller() {
    let rt = Runtime::new().unwrap();
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(|| panic!("root fiber"))));
    let payload = result.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"root fiber"));
    assert_eq!(rt.block_on(|| 1), 1, "the runtime survives a panicking root fiber");
}

#[test]
fn fibers_have_names_ids_and_stack_sizes() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let h = fiber::Builder::new()
            .name("named-one")
            .stack_size(100 * 1024)
            .spawn(|| {
                let me = fiber::current();
                (me.name().map(str::to_owned), me.stack_size(), me.id())
            })
            .unwrap();
        let handle_id = h.id();
        assert_eq!(h.name(), Some("named-one"));
        let (name, size, id) = h.join().unwrap();
        assert_eq!(name.as_deref(), Some("named-one"));
        assert_eq!(size, 100 * 1024);
        assert_eq!(id, handle_id);
        let unnamed = spindle::spawn(|| fiber::current().name().map(str::to_owned));
        assert_eq!(unnamed.join().unwrap(), None);
        assert_eq!(fiber::current().stack_size(), spindle::DEFAULT_STACK_SIZE);
    });
}

#[test]
fn stack_size_is_validated_and_used() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let err = fiber::Builder::new().stack_size(100).spawn(|| ()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        // A 4 MiB stack holds a frame chain that a small one could not.
        let h = fiber::Builder::new().stack_size(4 << 20).spawn(|| recurse(2000)).unwrap();
        assert_eq!(h.join().unwrap(), 2000);
    });
    let mut builder = spindle::Builder::new();
    assert!(builder.stack_size(1).build().is_err());
    let rt = builder.stack_size(64 * 1024).build().unwrap();
    assert_eq!(rt.block_on(|| fiber::current().stack_size()), 64 * 1024);
}

#[inline(never)]
fn recurse(n: u32) -> u32 {
    let pad = std::hint::black_box([0u8; 512]);
    if n == 0 {
        pad[0] as u32
    } else {
        1 + recurse(n - 1) + std::hint::black_box(pad[1]) as u32
    }
}

#[test]
fn yield_now_round_robins() {
    // One worker: the order of a FIFO run queue is only defined within a worker.
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let order = rt.block_on(|| {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let handles: Vec<_> = (0..3)
            .map(|id| {
                let log = log.clone();
                spindle::spawn(move || {
                    for round in 0..3 {
                        log.lock().unwrap().push((round, id));
                        spindle::yield_now();
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        Arc::try_unwrap(log).unwrap().into_inner().unwrap()
    });
    let expected: Vec<_> = (0..3).flat_map(|round| (0..3).map(move |id| (round, id))).collect();
    assert_eq!(order, expected);
}

#[test]
fn park_and_unpark_across_threads_keeps_the_permit() {
    let rt = Runtime::new().unwrap();
    let woken = rt.block_on(|| {
        // A spindle oneshot parks this fiber; a std channel would block the only worker.
        let (tx, rx) = spindle::sync::oneshot();
        let h = spindle::spawn(move || {
            tx.send(fiber::current()).unwrap();
            fiber::park();
            true
        });
        let me = rx.recv().unwrap();
        // Unpark from a plain thread, possibly before the fiber parks: never lost.
        std::thread::spawn(move || me.unpark()).join().unwrap();
        h.join().unwrap()
    });
    assert!(woken);
}

#[test]
fn a_fiber_never_changes_thread() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let handles: Vec<_> = (0..50)
            .map(|_| {
                spindle::spawn(|| {
                    let first = std::thread::current().id();
                    for _ in 0..20 {
                        spindle::yield_now();
                        assert_eq!(std::thread::current().id(), first);
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
    });
}

struct CountDrop(Arc<AtomicUsize>);
impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn shutdown_cancels_parked_and_unstarted_fibers_and_runs_destructors() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::new().unwrap();
    let (tx, rx) = channel::<u32>(1);
    let parked: Vec<_> = (0..10)
        .map(|_| {
            let rx = rx.clone();
            let guard = CountDrop(dropped.clone());
            rt.spawn(move || {
                let _guard = guard;
                rx.recv() // parks forever: nobody sends
            })
        })
        .collect();
    // Let them start and park.
    let wg = WaitGroup::new();
    wg.add(1);
    let wg2 = wg.clone();
    rt.spawn(move || wg2.done());
    wg.wait();
    std::thread::sleep(Duration::from_millis(20));
    drop(rt);
    assert_eq!(dropped.load(Ordering::SeqCst), 10, "every parked fiber unwound and dropped its locals");
    for h in parked {
        let err = h.join().unwrap_err();
        assert!(err.is_cancelled());
    }
    drop(tx);
}

#[test]
fn join_from_a_thread_after_shutdown_does_not_hang() {
    let rt = Runtime::new().unwrap();
    let h = rt.spawn(|| loop {
        fiber::park();
    });
    std::thread::sleep(Duration::from_millis(10));
    drop(rt);
    assert!(h.join().unwrap_err().is_cancelled());
}
