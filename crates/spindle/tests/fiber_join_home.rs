//! Joins "at home" (module `park::completion`): a fiber joining a fiber that can only run on
//! its own worker registers itself uncounted, with plain stores. These tests cover the ways
//! out of such a join other than completion, and joins at home racing everything else.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use spindle::fiber::{self, Fiber};
use spindle::sync::channel;
use spindle::JoinHandle;

fn one_worker() -> spindle::Runtime {
    spindle::Builder::new().worker_threads(1).build().unwrap()
}

/// What a fiber of [`body`] does. One closure type for both jobs, so that a fiber spawned
/// for the second takes the memory the first one's control block gave back (the block cache
/// hands out the block freed last, by layout).
enum Job {
    Join(JoinHandle<()>),
    Park { me: spindle::sync::Sender<Fiber>, woken: Arc<AtomicBool> },
}

fn body(job: Job) -> impl FnOnce() + Send + 'static {
    move || match job {
        Job::Join(h) => {
            let _ = h.join();
        }
        Job::Park { me, woken } => {
            me.send(fiber::current()).unwrap();
            fiber::park();
            woken.store(true, Ordering::SeqCst);
        }
    }
}

/// A joiner cancelled while it waits at home takes its registration back: the fiber it
/// joined, finishing later, must not wake whatever fiber now lives where the joiner did.
#[test]
fn a_joiner_cancelled_at_home_is_not_woken_once_it_is_gone() {
    let rt = one_worker();
    rt.block_on(|| {
        let (go, wait) = channel::<()>(1);
        let joined = spindle::spawn(move || {
            let _ = wait.recv();
        });
        spindle::yield_now(); // `joined` starts here and parks on the channel
        let joiner = spindle::spawn(body(Job::Join(joined)));
        spindle::yield_now(); // the joiner joins at home (`joined` started on this worker)
        joiner.cancel();
        let err = joiner.join().unwrap_err();
        assert!(err.is_cancelled(), "the joiner was cancelled in its join: {err}");

        // The joiner's block is free now; the next fiber of the same closure type takes it.
        let (me_tx, me_rx) = channel(1);
        let woken = Arc::new(AtomicBool::new(false));
        let parked = spindle::spawn(body(Job::Park { me: me_tx, woken: woken.clone() }));
        let parked_fiber = me_rx.recv().unwrap();
        spindle::yield_now(); // it parks

        go.send(()).unwrap(); // `joined` finishes
        for _ in 0..10 {
            spindle::yield_now();
        }
        assert!(
            !woken.load(Ordering::SeqCst),
            "the finished fiber woke a fiber that never joined it (the cancelled joiner's stale registration)"
        );
        parked_fiber.unpark();
        parked.join().unwrap();
        assert!(woken.load(Ordering::SeqCst));
    });
}

/// A joiner at home that is cancelled before the fiber it joins has even started: the
/// joined fiber still runs (it is not the one cancelled) and nothing is woken for the gone
/// joiner.
#[test]
fn a_joiner_cancelled_before_its_joined_fiber_starts_leaves_that_fiber_running() {
    let rt = one_worker();
    rt.block_on(|| {
        let ran = Arc::new(AtomicBool::new(false));
        let (joiner_tx, joiner_rx) = channel::<Fiber>(1);
        let r = ran.clone();
        let joiner = spindle::spawn(move || {
            joiner_tx.send(fiber::current()).unwrap();
            let child = spindle::spawn(move || r.store(true, Ordering::SeqCst));
            // The spawn just before the join: unstarted, the newest of the queue.
            child.join()
        });
        let joiner_fiber = joiner_rx.recv().unwrap();
        // The joiner is now parked in its join; the child is queued but has not run (one
        // worker, and this fiber has not switched away since the joiner parked).
        joiner.cancel();
        drop(joiner_fiber);
        let err = joiner.join().unwrap_err();
        assert!(err.is_cancelled());
        for _ in 0..10 {
            spindle::yield_now();
        }
        assert!(ran.load(Ordering::SeqCst), "the child of a cancelled joiner still runs");
    });
}

/// Many fibers on two workers spawn children and join them at once (joins at home: the
/// spawn just before), or after the child started elsewhere or here, while other fibers
/// cancel some of the joiners: every join gets its child's result, every cancelled joiner
/// says so, and the children all finish.
#[test]
fn joins_at_home_and_away_under_cancellation() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let children_done = Arc::new(AtomicUsize::new(0));
    let joined_ok = Arc::new(AtomicUsize::new(0));
    let cancelled = Arc::new(AtomicUsize::new(0));
    const PARENTS: usize = 200;
    const CHILDREN: usize = 20;
    rt.block_on({
        let (children_done, joined_ok, cancelled) =
            (children_done.clone(), joined_ok.clone(), cancelled.clone());
        move || {
            let mut parents = Vec::new();
            for p in 0..PARENTS {
                let (children_done, joined_ok) = (children_done.clone(), joined_ok.clone());
                parents.push(spindle::spawn(move || {
                    for c in 0..CHILDREN {
                        let done = children_done.clone();
                        let child = spindle::spawn(move || {
                            for _ in 0..(p + c) % 3 {
                                spindle::yield_now();
                            }
                            done.fetch_add(1, Ordering::SeqCst);
                            p * 1000 + c
                        });
                        if c % 4 == 0 {
                            spindle::yield_now(); // let it start, here or elsewhere
                        }
                        assert_eq!(child.join().unwrap(), p * 1000 + c);
                        joined_ok.fetch_add(1, Ordering::SeqCst);
                    }
                }));
            }
            for (p, parent) in parents.into_iter().enumerate() {
                if p % 7 == 3 {
                    parent.cancel();
                }
                match parent.join() {
                    Ok(()) => {}
                    Err(e) => {
                        assert!(e.is_cancelled(), "parent {p}: {e}");
                        cancelled.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
    });
    drop(rt); // every child has finished or been cancelled by now
    let ok = joined_ok.load(Ordering::SeqCst);
    let cancelled = cancelled.load(Ordering::SeqCst);
    assert!(ok >= (PARENTS - PARENTS.div_ceil(7)) * CHILDREN, "joins that completed: {ok}");
    assert!(cancelled <= PARENTS.div_ceil(7));
    assert!(children_done.load(Ordering::SeqCst) >= ok);
}
