//! The control block's allocation (module `fiber::block`): blocks are counted, freed by the
//! last reference on whichever thread drops it, and their memory is reused by later spawns.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A result that counts its drops.
struct Counted(Arc<AtomicUsize>, u64);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn handles_dropped_on_another_thread_free_each_result_once_and_blocks_are_reused() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    for round in 0..3u64 {
        let d = drops.clone();
        // Spawned on a worker: the blocks come from (and, for the joined ones, go back to)
        // that worker thread's cache; the others are freed on the thread below.
        let handles = rt.block_on(move || {
            (0..200u64)
                .map(|i| {
                    spindle::spawn({
                        let d = d.clone();
                        move || Counted(d, round * 1000 + i)
                    })
                })
                .collect::<Vec<_>>()
        });
        let joined = std::thread::spawn(move || {
            let mut sum = 0;
            for (i, h) in handles.into_iter().enumerate() {
                if i % 2 == 0 {
                    sum += h.join().unwrap().1; // the result dropped here
                } else {
                    drop(h); // detached: the last reference is the handle or the fiber's
                }
            }
            sum
        })
        .join()
        .unwrap();
        let expected: u64 = (0..200u64).step_by(2).map(|i| round * 1000 + i).sum();
        assert_eq!(joined, expected, "every joined result is the one its fiber returned");
    }
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), 600, "each result dropped exactly once");
}

#[test]
fn a_fiber_spawned_after_another_of_the_same_type_finished_gets_a_fresh_cell() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        for i in 0..100u64 {
            let name = format!("fiber-{i}");
            let h = spindle::fiber::Builder::new()
                .name(name.clone())
                .spawn(move || (spindle::fiber::current().name().map(str::to_owned), i))
                .unwrap();
            assert!(h.name() == Some(name.as_str()));
            let (seen, value) = h.join().unwrap();
            assert_eq!(seen.as_deref(), Some(name.as_str()), "the header is the new fiber's");
            assert_eq!(value, i, "the result is the new fiber's");
        }
    });
}

#[test]
fn cancel_through_a_handle_reaches_the_fiber_and_frees_it() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(move || {
        let guard = Counted(d, 0);
        let h = spindle::spawn(move || {
            let _guard = guard;
            loop {
                spindle::fiber::park();
            }
        });
        spindle::yield_now(); // it starts and parks
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
    });
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the cancelled fiber's frame was unwound");
}

#[test]
fn fibers_whose_closures_are_large_spawn_and_join_as_others() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        for i in 0..50u8 {
            // A cell larger than the block cache keeps: from and to the allocator.
            let big = [i; 8192];
            let h = spindle::spawn(move || big.iter().map(|&b| u64::from(b)).sum::<u64>());
            assert_eq!(h.join().unwrap(), u64::from(i) * 8192);
        }
    });
}

/// Moves the whole value into the closure that calls this (a closure that read a field
/// would capture only the field).
fn value(c: Counted) -> u64 {
    c.1
}

/// A spawn reads its closure once, from where the spawner holds it, into the block
/// (`fiber::spawn::Moving`): each closure is dropped exactly once, whether the spawn failed
/// before the read (an invalid stack size), the fiber ran, or it was cancelled unrun.
#[test]
fn each_spawned_closure_is_dropped_once_whatever_happens_to_its_spawn() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(move || {
        let bad = || spindle::fiber::Builder::new().stack_size(100);
        let captured = Counted(d.clone(), 0);
        assert!(bad().spawn(move || value(captured)).is_err());
        let captured = Counted(d.clone(), 0);
        assert!(bad().spawn_local(move || value(captured)).is_err());
        assert_eq!(d.load(Ordering::SeqCst), 2, "a failed spawn drops its closure at once");

        let captured = Counted(d.clone(), 7);
        let h = spindle::fiber::Builder::new().spawn_local(move || value(captured)).unwrap();
        assert_eq!(h.join().unwrap(), 7);
        assert_eq!(d.load(Ordering::SeqCst), 3, "a closure that ran is dropped once");

        let captured = Counted(d.clone(), 8);
        let h = spindle::fiber::Builder::new().spawn_local(move || value(captured)).unwrap();
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(d.load(Ordering::SeqCst), 4, "a closure cancelled unrun is dropped once");

        // spawn_now from a task: a failure, then one that runs at once.
        let d2 = d.clone();
        let task = spindle::task::spawn_local(async move {
            let captured = Counted(d2.clone(), 0);
            assert!(bad().spawn_now(move || value(captured)).is_err());
            let captured = Counted(d2.clone(), 9);
            let h = spindle::fiber::Builder::new().spawn_now(move || value(captured)).unwrap();
            assert!(h.is_finished(), "it did not park");
            h.await.unwrap()
        });
        assert_eq!(task.join().unwrap(), 9);
        assert_eq!(d.load(Ordering::SeqCst), 6);
    });
    assert_eq!(drops.load(Ordering::SeqCst), 6);
}
