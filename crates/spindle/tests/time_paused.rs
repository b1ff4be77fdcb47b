//! Paused time: `pause`, `advance`, `resume`, the auto-advance when every fiber and task
//! waits, `start_paused`, and intervals' missed ticks measured on the paused clock (exact
//! durations, whatever the machine's speed).

use std::future::poll_fn;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;
use spindle::time::{self, MissedTickBehavior};
use spindle::Builder;

const MS: Duration = Duration::from_millis(1);

fn paused() -> spindle::Runtime {
    Builder::new().start_paused(true).build().unwrap()
}

#[test]
fn a_fiber_sleep_auto_advances_exactly() {
    let rt = paused();
    rt.block_on(|| {
        assert!(time::is_paused());
        let t0 = time::now();
        time::sleep(Duration::from_secs(24 * 3600));
        assert_eq!(time::now() - t0, Duration::from_secs(24 * 3600));
    });
}

#[test]
fn sleeps_of_many_fibers_and_tasks_end_in_deadline_order_on_the_paused_clock() {
    let rt = paused();
    let order = rt.block_on(|| {
        let t0 = time::now();
        let (tx, rx) = spindle::sync::unbounded();
        for s in [50u64, 10, 40] {
            let tx = tx.clone();
            spindle::spawn(move || {
                time::sleep(Duration::from_secs(s));
                tx.send((s, time::now() - t0)).unwrap();
            });
        }
        for s in [20u64, 30] {
            let tx = tx.clone();
            spindle::task::spawn_async(async move {
                time::sleep_future(Duration::from_secs(s)).await;
                tx.send((s, time::now() - t0)).unwrap();
            });
        }
        drop(tx);
        rx.iter().collect::<Vec<_>>()
    });
    let want: Vec<_> = [10u64, 20, 30, 40, 50].iter().map(|&s| (s, Duration::from_secs(s))).collect();
    assert_eq!(order, want);
}

#[test]
fn timeouts_elapse_as_soon_as_nothing_else_can_happen() {
    let rt = paused();
    rt.block_on(|| {
        let t0 = time::now();
        let (_tx, rx) = spindle::sync::channel::<u8>(1);
        assert!(rx.recv_timeout(Duration::from_secs(30)).is_err());
        assert_eq!(time::now() - t0, Duration::from_secs(30));
        let lock = Arc::new(spindle::sync::Mutex::new(()));
        let held = lock.lock();
        let lock2 = lock.clone();
        let other = spindle::spawn(move || lock2.lock_timeout(Duration::from_secs(5)).is_none());
        assert!(other.join().unwrap(), "the lock stayed held past the timeout");
        drop(held);
        assert_eq!(time::now() - t0, Duration::from_secs(35));
        let slow = spindle::spawn(|| time::sleep(Duration::from_secs(3600)));
        let slow = slow.join_timeout(Duration::from_secs(60)).unwrap_err();
        assert_eq!(time::now() - t0, Duration::from_secs(95));
        slow.abort();
        assert!(slow.join().unwrap_err().is_cancelled());
    });
}

#[test]
fn advance_fires_what_is_due_and_nothing_later() {
    let rt = paused();
    rt.block_on(|| {
        let rang = Arc::new(AtomicBool::new(false));
        let r = rang.clone();
        let alarm = spindle::spawn(move || {
            time::sleep(Duration::from_secs(10));
            r.store(true, Ordering::Relaxed);
        });
        spindle::yield_now();
        time::advance(Duration::from_secs(9));
        assert!(!rang.load(Ordering::Relaxed));
        time::advance(Duration::from_secs(1));
        assert!(rang.load(Ordering::Relaxed), "advance yields to what it woke");
        alarm.join().unwrap();
    });
}

#[test]
fn advance_async_from_a_task() {
    let rt = paused();
    // In a task: its yields let the other task run (a future in `block_on`'s fiber would
    // find its own wake-up and go on at once).
    let got = rt.spawn_async(async {
        let t0 = time::now();
        let timer = spindle::task::spawn_async(async move {
            time::sleep_future(Duration::from_millis(1500)).await;
            time::now() - t0
        });
        spindle::task::yield_now().await; // the timer task registers its timer
        time::advance_async(Duration::from_secs(2)).await;
        assert!(timer.is_finished(), "advance_async yields to what it woke");
        timer.await.unwrap()
    });
    // The clock jumped to 2 s at once; the timer due at 1.5 s fired there.
    assert_eq!(got.join().unwrap(), Duration::from_secs(2));
}

#[test]
fn a_running_blocking_job_holds_the_auto_advance() {
    let rt = paused();
    rt.block_on(|| {
        let t0 = time::now();
        let (tx, rx) = spindle::sync::channel(1);
        // The job ends on real time; the fiber's timeout must not fire before its answer.
        let job = spindle::spawn_blocking(move || {
            std::thread::sleep(20 * MS);
            tx.send("answer").unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(3600)), Ok("answer"));
        assert!(time::now() - t0 < Duration::from_secs(3600));
        job.join().unwrap();
    });
}

#[test]
fn resume_runs_on_from_the_paused_reading() {
    let rt = paused();
    rt.block_on(|| {
        let t0 = time::now();
        time::advance(Duration::from_secs(3600));
        time::resume();
        assert!(!time::is_paused());
        let t1 = time::now();
        assert!(t1 - t0 >= Duration::from_secs(3600));
        time::sleep(MS); // a real millisecond on the shifted clock
        assert!(time::now() >= t1 + MS);
        time::pause();
        assert!(time::is_paused());
    });
}

#[test]
fn pause_needs_a_runtime_of_one_worker() {
    let rt = Builder::new().worker_threads(2).build().unwrap();
    let err = rt.block_on(|| std::panic::catch_unwind(time::pause)).unwrap_err();
    let msg = err.downcast_ref::<String>().unwrap();
    assert!(msg.contains("one worker"), "{msg}");
    assert!(Builder::new().worker_threads(2).start_paused(true).build().is_err());
    assert_eq!(Builder::new().start_paused(true).build().unwrap().worker_threads(), 1);
}

#[test]
fn a_local_runtime_pauses_too() {
    let rt = Builder::new().start_paused(true).build_local().unwrap();
    let waited = rt.block_on(|| {
        let t0 = time::now();
        time::sleep(Duration::from_secs(7));
        time::now() - t0
    });
    assert_eq!(waited, Duration::from_secs(7));
}

#[spindle::test(start_paused = true)]
fn the_test_attribute_starts_paused() {
    assert!(time::is_paused());
    let t0 = time::now();
    time::sleep(Duration::from_secs(3600));
    assert_eq!(time::now() - t0, Duration::from_secs(3600));
}

#[spindle::test(flavor = "local", start_paused = true)]
async fn an_async_local_test_starts_paused() {
    let t0 = time::now();
    time::sleep_future(Duration::from_secs(60)).await;
    assert_eq!(time::now() - t0, Duration::from_secs(60));
}

/// Takes `n` ticks, working `work` (on the paused clock) before each; the ticks' offsets from
/// the start.
fn ticks(behavior: MissedTickBehavior, work: Duration, n: usize) -> Vec<u64> {
    let rt = paused();
    rt.block_on(move || {
        let t0 = time::now();
        let mut interval = time::interval(10 * MS);
        interval.set_missed_tick_behavior(behavior);
        (0..n)
            .map(|_| {
                time::sleep(work);
                let due = interval.tick();
                assert!(due <= time::now(), "a tick is never early");
                (time::now() - t0).as_millis() as u64
            })
            .collect()
    })
}

#[test]
fn interval_ticks_at_its_period_when_on_time() {
    for b in [MissedTickBehavior::Burst, MissedTickBehavior::Delay, MissedTickBehavior::Skip] {
        assert_eq!(ticks(b, Duration::ZERO, 4), [0, 10, 20, 30], "{b:?}");
    }
}

#[test]
fn missed_ticks_burst_delay_or_skip() {
    // 25 ms of work before each tick of a 10 ms interval.
    assert_eq!(ticks(MissedTickBehavior::Burst, 25 * MS, 4), [25, 50, 75, 100]);
    assert_eq!(ticks(MissedTickBehavior::Delay, 25 * MS, 4), [25, 50, 75, 100]);
    assert_eq!(ticks(MissedTickBehavior::Skip, 25 * MS, 4), [25, 50, 75, 100]);
    // A long stall once, then on time: burst catches up at once, delay restarts the schedule
    // from the late tick, skip drops the missed ticks and keeps the grid.
    let stall_once = |b| {
        let rt = paused();
        rt.block_on(move || {
            let t0 = time::now();
            let mut interval = time::interval(10 * MS);
            interval.set_missed_tick_behavior(b);
            interval.tick();
            time::sleep(35 * MS);
            (0..4).map(|_| (interval.tick() - t0).as_millis() as u64).collect::<Vec<_>>()
        })
    };
    // Burst: the ticks due at 10, 20, 30 come at once (at 35), then 40 on time.
    assert_eq!(stall_once(MissedTickBehavior::Burst), [10, 20, 30, 40]);
    // Delay: the late tick (due 10, taken at 35), then every 10 ms from 35.
    assert_eq!(stall_once(MissedTickBehavior::Delay), [10, 45, 55, 65]);
    // Skip: the late tick, then the grid's next tick still ahead (40), and on.
    assert_eq!(stall_once(MissedTickBehavior::Skip), [10, 40, 50, 60]);
}

#[test]
fn an_interval_is_a_stream_and_a_future_in_tasks() {
    let rt = paused();
    let got = rt.block_on(async {
        let t0 = time::now();
        let mut interval = time::interval(Duration::from_secs(1));
        let mut offsets = vec![interval.tick_async().await - t0];
        let mut stream = pin!(interval);
        for _ in 0..2 {
            let due = poll_fn(|cx| stream.as_mut().poll_next(cx)).await.unwrap();
            offsets.push(due - t0);
        }
        offsets
    });
    assert_eq!(got, [Duration::ZERO, Duration::from_secs(1), Duration::from_secs(2)]);
}

#[test]
fn interval_resets() {
    let rt = paused();
    rt.block_on(|| {
        let t0 = time::now();
        let mut interval = time::interval(10 * MS);
        interval.tick();
        interval.reset_after(3 * MS);
        assert_eq!(interval.tick() - t0, 3 * MS);
        interval.reset();
        assert_eq!(interval.tick() - t0, 13 * MS);
        interval.reset_immediately();
        assert_eq!(interval.tick() - t0, 13 * MS);
        assert_eq!(interval.tick() - t0, 23 * MS);
    });
}
