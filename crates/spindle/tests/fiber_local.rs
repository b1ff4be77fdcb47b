//! `fiber_local!`: one value per fiber (not per worker thread), created lazily, dropped on the
//! fiber when it finishes; a value per plain thread outside fibers; a clear panic in tasks.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};

static DROPS: AtomicUsize = AtomicUsize::new(0);

struct CountsDrop;

impl Drop for CountsDrop {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

spindle::fiber_local! {
    static COUNTER: Cell<u32> = Cell::new(0);
    static LOG: RefCell<Vec<u32>> = RefCell::new(Vec::new());
    static DROPPED: CountsDrop = CountsDrop;
}

#[test]
fn each_fiber_has_its_own_value_across_parks() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let results = rt.block_on(|| {
        let handles: Vec<_> = (0..10u32)
            .map(|i| {
                spindle::spawn(move || {
                    for _ in 0..5 {
                        COUNTER.with(|c| c.set(c.get() + i));
                        // A RefCell borrow in a fiber-local is safe across a park: no other
                        // fiber sees this RefCell.
                        LOG.with(|l| {
                            let mut l = l.borrow_mut();
                            l.push(i);
                            spindle::yield_now();
                            l.push(i);
                        });
                    }
                    (COUNTER.get().get(), LOG.with(|l| l.borrow().clone()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    for (i, (count, log)) in results.into_iter().enumerate() {
        assert_eq!(count, 5 * i as u32);
        assert_eq!(log, vec![i as u32; 10]);
    }
}

#[test]
fn values_are_dropped_when_their_fiber_finishes() {
    let rt = spindle::Runtime::new().unwrap();
    let before = DROPS.load(Ordering::SeqCst);
    rt.block_on(move || {
        let handles: Vec<_> = (0..4).map(|_| spindle::spawn(|| DROPPED.with(|_| ()))).collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        // Joined fibers have dropped theirs (before completing).
        assert_eq!(DROPS.load(Ordering::SeqCst) - before, 4);
    });
}

#[test]
fn plain_threads_get_their_own_value() {
    COUNTER.set(7);
    let other = std::thread::spawn(|| COUNTER.get().get()).join().unwrap();
    assert_eq!(other, 0);
    assert_eq!(COUNTER.get().get(), 7);
}

#[test]
fn access_from_an_async_task_is_a_clear_panic() {
    let rt = spindle::Runtime::new().unwrap();
    let err = rt.spawn_async(async { COUNTER.get().get() }).join().unwrap_err();
    let err = err.into_panic();
    let msg =
        err.downcast_ref::<String>().cloned().or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()));
    assert!(msg.unwrap_or_default().contains("fiber_local! value was accessed from an async task"));
}
