//! `JoinSet`: fibers and tasks joined in the order they finish, results kept until taken,
//! aborts, and the drop that cancels everything still in the set.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use spindle::task::JoinSet;
use spindle::Builder;

fn paused() -> spindle::Runtime {
    Builder::new().start_paused(true).build().unwrap()
}

/// Counts its drops: a fiber or task that holds one and is cancelled drops it as it unwinds.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn fibers_and_tasks_are_joined_in_the_order_they_finish() {
    let rt = paused();
    let order = rt.block_on(|| {
        let mut set = JoinSet::new();
        for s in [3u64, 1, 2] {
            set.spawn_fiber(move || {
                spindle::time::sleep(Duration::from_secs(s));
                s
            });
            set.spawn(async move {
                spindle::time::sleep_future(Duration::from_secs(s) + Duration::from_millis(500)).await;
                s * 10
            });
        }
        assert_eq!(set.len(), 6);
        let mut order = Vec::new();
        while let Some(r) = set.join_next() {
            order.push(r.unwrap());
        }
        assert!(set.is_empty());
        order
    });
    assert_eq!(order, [1, 10, 2, 20, 3, 30]);
}

#[test]
fn results_stay_in_the_set_until_taken() {
    let rt = Builder::new().worker_threads(2).build().unwrap();
    rt.block_on(|| {
        let done = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        for i in 0..50u32 {
            let d = done.clone();
            set.spawn_fiber(move || {
                d.fetch_add(1, Ordering::SeqCst);
                i
            });
            let d = done.clone();
            set.spawn(async move {
                d.fetch_add(1, Ordering::SeqCst);
                i + 100
            });
        }
        // Everything finishes while nobody takes anything.
        while done.load(Ordering::SeqCst) < 100 {
            spindle::yield_now();
        }
        assert_eq!(set.len(), 100);
        // A member that reported may still be publishing its result: try again until then.
        let first = loop {
            if let Some(r) = set.try_join_next() {
                break r.unwrap();
            }
            spindle::yield_now();
        };
        let mut got = vec![first];
        while let Some(r) = set.join_next() {
            got.push(r.unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, (0..50).chain(100..150).collect::<Vec<u32>>());
        assert!(set.join_next().is_none());
    });
}

#[test]
fn join_next_async_from_a_task() {
    let rt = spindle::Runtime::new().unwrap();
    let h = rt.spawn_async(async {
        let mut set = JoinSet::new();
        for i in 1..=10u64 {
            set.spawn(async move {
                spindle::task::yield_now().await;
                i
            });
            set.spawn_fiber(move || i * 100);
        }
        let mut total = 0;
        while let Some(r) = set.join_next_async().await {
            total += r.unwrap();
        }
        total
    });
    assert_eq!(h.join().unwrap(), 55 + 5500);
}

#[test]
fn a_dropped_join_next_future_loses_nothing() {
    let rt = paused();
    let h = rt.spawn_async(async {
        let mut set = JoinSet::new();
        set.spawn(async {
            spindle::time::sleep_future(Duration::from_secs(1)).await;
            7
        });
        // A first wait that gives up before the member finishes.
        let early = spindle::time::timeout(Duration::from_millis(10), set.join_next_async()).await;
        assert!(early.is_err());
        assert_eq!(set.len(), 1);
        set.join_next_async().await.unwrap().unwrap()
    });
    assert_eq!(h.join().unwrap(), 7);
}

#[test]
fn abort_all_gives_cancelled_results() {
    let rt = paused();
    rt.block_on(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        for _ in 0..3 {
            let guard = DropCount(dropped.clone());
            set.spawn_fiber(move || {
                let _guard = guard;
                spindle::time::sleep(Duration::from_secs(3600));
            });
            let guard = DropCount(dropped.clone());
            set.spawn(async move {
                let _guard = guard;
                spindle::time::sleep_future(Duration::from_secs(3600)).await;
            });
        }
        spindle::yield_now();
        set.abort_all();
        let mut cancelled = 0;
        while let Some(r) = set.join_next() {
            assert!(r.unwrap_err().is_cancelled());
            cancelled += 1;
        }
        assert_eq!(cancelled, 6);
        assert_eq!(dropped.load(Ordering::SeqCst), 6);
    });
}

#[test]
fn dropping_the_set_cancels_everything_in_it() {
    let rt = paused();
    rt.block_on(|| {
        let dropped = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        for _ in 0..4 {
            let guard = DropCount(dropped.clone());
            set.spawn_fiber(move || {
                let _guard = guard;
                spindle::time::sleep(Duration::from_secs(3600));
            });
            let guard = DropCount(dropped.clone());
            set.spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            });
        }
        spindle::yield_now(); // some have started, some not: both kinds are cancelled
        drop(set);
        while dropped.load(Ordering::SeqCst) < 8 {
            spindle::time::sleep(Duration::from_millis(1));
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 8);
    });
}

#[test]
fn a_panicking_member_gives_its_panic() {
    let rt = spindle::Runtime::new().unwrap();
    rt.block_on(|| {
        let mut set = JoinSet::new();
        set.spawn_fiber(|| -> u8 { panic!("fiber boom") });
        set.spawn(async { panic!("task boom") });
        let mut messages: Vec<String> = (0..2)
            .map(|_| {
                let err = set.join_next().unwrap().unwrap_err();
                assert!(err.is_panic());
                err.into_panic().downcast_ref::<&str>().unwrap().to_string()
            })
            .collect();
        messages.sort();
        assert_eq!(messages, ["fiber boom", "task boom"]);
    });
}

#[test]
fn join_next_timeout_and_shutdown() {
    let rt = paused();
    rt.block_on(|| {
        let mut set = JoinSet::new();
        set.spawn_fiber(|| spindle::time::sleep(Duration::from_secs(10)));
        assert!(set.join_next_timeout(Duration::from_secs(1)).is_err());
        assert_eq!(set.len(), 1);
        assert!(set.join_next_timeout(Duration::from_secs(60)).unwrap().unwrap().is_ok());
        assert!(matches!(set.join_next_timeout(Duration::from_secs(1)), Ok(None)));
        set.spawn_fiber(|| spindle::time::sleep(Duration::from_secs(3600)));
        set.spawn(std::future::pending());
        set.shutdown();
        assert!(set.is_empty());
    });
}

#[test]
fn an_empty_set_joins_none_at_once() {
    let mut set = JoinSet::<()>::new();
    assert!(set.join_next().is_none());
    assert!(set.try_join_next().is_none());
}
