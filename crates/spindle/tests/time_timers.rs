//! Timers: sleeps that never end early, timeouts that fire and ones that are cancelled, many
//! timers at once, and timers at runtime shutdown.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use spindle::time::{sleep, sleep_future, timeout, Elapsed};
use spindle::Runtime;

#[path = "support/hang_guard.rs"]
mod hang_guard;
use hang_guard::returns_within_hang_limit;

#[test]
fn sleep_in_a_fiber_parks_it_and_never_ends_early() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let t0 = Instant::now();
        let sleeper = spindle::spawn(move || {
            sleep(Duration::from_millis(30));
            t0.elapsed()
        });
        // While it sleeps, this fiber keeps running: the worker is not blocked.
        let mut spins = 0u64;
        while !sleeper.is_finished() {
            spins += 1;
            spindle::yield_now();
        }
        assert!(spins > 0);
        assert!(sleeper.join().unwrap() >= Duration::from_millis(30));
    });
}

#[test]
fn many_timers_fire_in_deadline_order() {
    let rt = Runtime::new().unwrap();
    let order = rt.block_on(|| {
        let (tx, rx) = spindle::sync::unbounded();
        for ms in [50u64, 10, 40, 20, 30, 0] {
            let tx = tx.clone();
            spindle::spawn(move || {
                sleep(Duration::from_millis(ms));
                tx.send(ms).unwrap();
            });
        }
        drop(tx);
        rx.iter().collect::<Vec<_>>()
    });
    assert_eq!(order, vec![0, 10, 20, 30, 40, 50]);
}

/// Wraps a future and records what became of it: polled at least once, completed.
struct Watched<F> {
    inner: Pin<Box<F>>,
    polled: Arc<AtomicBool>,
    completed: Arc<AtomicBool>,
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.polled.store(true, Ordering::SeqCst);
        let poll = self.inner.as_mut().poll(cx);
        if poll.is_ready() {
            self.completed.store(true, Ordering::SeqCst);
        }
        poll
    }
}

#[test]
fn timeout_fires_on_a_slow_future_and_passes_a_fast_one() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let (polled, completed) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let slow = Watched {
            inner: Box::pin(sleep_future(Duration::from_secs(30))),
            polled: polled.clone(),
            completed: completed.clone(),
        };
        let slow = timeout(Duration::from_millis(20), slow);
        let t0 = Instant::now();
        assert_eq!(spindle::task::block_on(slow), Err(Elapsed));
        assert!(t0.elapsed() >= Duration::from_millis(20));
        // The timeout's own timer won the race: the 30 s sleep was armed (polled) but never
        // completed, and the timeout dropped it (cancelling its timer) when it returned.
        assert!(polled.load(Ordering::SeqCst), "the timeout never polled the slow future");
        assert!(!completed.load(Ordering::SeqCst), "the 30 s timer must not be waited for");
        let fast = timeout(Duration::from_secs(30), async { 7 });
        assert_eq!(spindle::task::block_on(fast), Ok(7));
    });
}

#[test]
fn a_hundred_thousand_timers_cancelled_and_fired() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        // Each future registers a far timer and is dropped (cancelling it) after one poll.
        for i in 0..100_000u64 {
            let mut s = std::pin::pin!(sleep_future(Duration::from_secs(3600 + i)));
            let waker = std::task::Waker::noop();
            let mut cx = std::task::Context::from_waker(waker);
            assert!(s.as_mut().poll(&mut cx).is_pending());
        }
        let handles: Vec<_> =
            (0..1000).map(|i| spindle::spawn(move || sleep(Duration::from_millis(i % 7)))).collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
    });
}

#[test]
fn shutdown_cancels_sleeping_fibers() {
    let rt = Runtime::new().unwrap();
    let unwound = Arc::new(AtomicBool::new(false));
    let flag = Flag(unwound.clone());
    let (asleep_tx, asleep_rx) = std::sync::mpsc::channel();
    let h = rt.spawn(move || {
        let _flag = flag;
        asleep_tx.send(()).unwrap();
        sleep(Duration::from_secs(3600));
    });
    // The fiber runs, and goes to sleep next.
    asleep_rx.recv().unwrap();
    // A shutdown that waited for the sleeper would take an hour: a hang, guarded as one.
    returns_within_hang_limit("dropping a runtime with a fiber asleep for an hour", move || drop(rt));
    assert!(h.join().unwrap_err().is_cancelled());
    assert!(unwound.load(Ordering::SeqCst), "the sleeping fiber unwound, running its destructors");
}

#[test]
fn sleep_on_a_plain_thread_sleeps_the_thread() {
    let t0 = Instant::now();
    sleep(Duration::from_millis(5));
    assert!(t0.elapsed() >= Duration::from_millis(5));
}

struct Flag(Arc<AtomicBool>);
impl Drop for Flag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn timeout_fiber_cancels_blocking_code_at_its_suspension_point() {
    use spindle::time::timeout_fiber;
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        // In time: the result comes back.
        assert_eq!(timeout_fiber(Duration::from_secs(10), || 5), Ok(5));
        // Too slow: the op is unwound (its destructors run) and Elapsed is returned.
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Flag(dropped.clone());
        let (_tx, rx) = spindle::sync::channel::<u8>(1);
        let t0 = Instant::now();
        let r = timeout_fiber(Duration::from_millis(20), move || {
            let _flag = flag;
            rx.recv().ok() // parks forever: nobody sends
        });
        assert_eq!(r, Err(Elapsed));
        assert!(t0.elapsed() >= Duration::from_millis(20));
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst), "the op's destructors ran");
    });
}

#[test]
fn join_handle_cancel_stops_a_parked_fiber_from_another_thread() {
    let rt = Runtime::new().unwrap();
    let h = rt.spawn(|| sleep(Duration::from_secs(3600)));
    std::thread::sleep(Duration::from_millis(10));
    h.cancel();
    assert!(h.join().unwrap_err().is_cancelled());
    // Cancelled before it starts: the closure never runs.
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ran2 = ran.clone();
    let h = rt.block_on(move || {
        let h = spindle::spawn(move || ran2.store(true, std::sync::atomic::Ordering::SeqCst));
        h.cancel();
        h
    });
    assert!(h.join().unwrap_err().is_cancelled());
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
}

/// A sleep future polled again and again before its deadline (its task woken for other
/// reasons, as a server's idle timer is at every request) keeps waiting without reading the
/// clock while its worker's wheel has not fired it, and still completes once the deadline
/// passes, never before: each spurious poll answers from the wheel's last advance, and the
/// wheel's own firing wakes it at the end.
#[test]
fn a_sleep_future_polled_spuriously_still_ends_at_its_deadline_and_not_before() {
    /// Polls the sleep, and while it is pending wakes its own task (a spurious wake-up for
    /// the sleep) every time, counting the polls. The sleep is made at the first poll, so that
    /// a slow start (a loaded machine, a sanitizer) does not eat its time before any poll.
    struct Spurious {
        sleep: Option<Pin<Box<spindle::time::Sleep>>>,
        deadline: Option<Instant>,
        polls: u64,
    }
    impl Future for Spurious {
        type Output = (u64, Instant);
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<(u64, Instant)> {
            self.polls += 1;
            let deadline = *self.deadline.get_or_insert_with(|| Instant::now() + Duration::from_millis(100));
            let sleep =
                self.sleep.get_or_insert_with(|| Box::pin(spindle::time::sleep_until_future(deadline)));
            match sleep.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready((self.polls, deadline)),
                Poll::Pending => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            }
        }
    }

    for workers in [1, 2] {
        let rt = spindle::Builder::new().worker_threads(workers).build().unwrap();
        for _ in 0..5 {
            let (polls, deadline) =
                rt.spawn_async(Spurious { sleep: None, deadline: None, polls: 0 }).join().unwrap();
            assert!(Instant::now() >= deadline, "ended before its deadline");
            assert!(polls > 2, "the task was polled spuriously ({polls} polls)");
        }
        // And one woken only by its timer.
        let deadline = Instant::now() + Duration::from_millis(5);
        rt.spawn_async(spindle::time::sleep_until_future(deadline)).join().unwrap();
        assert!(Instant::now() >= deadline);
    }
}

/// A duration too long for an `Instant` (`Duration::MAX`) means "never": no overflow panic,
/// and the timer never ends anything early. A sleep that long loses every race, a timeout that
/// long lets its work finish, a fiber sleeping that long sleeps until it is cancelled.
#[test]
fn durations_too_long_for_an_instant_mean_never() {
    let rt = Runtime::new().unwrap();
    rt.block_on(|| {
        let won = spindle::task::block_on(async {
            spindle::select_async! {
                _ = sleep_future(Duration::MAX) => "forever",
                _ = sleep_future(Duration::from_millis(5)) => "short",
            }
        });
        assert_eq!(won, "short");
        assert_eq!(
            spindle::task::block_on(timeout(Duration::MAX, sleep_future(Duration::from_millis(5)))),
            Ok(())
        );
        assert_eq!(spindle::time::timeout_fiber(Duration::MAX, || 8), Ok(8));
        let sleeper = spindle::spawn(|| sleep(Duration::MAX));
        sleep(Duration::from_millis(5));
        assert!(!sleeper.is_finished(), "a sleep of Duration::MAX ended");
        sleeper.cancel();
        assert!(sleeper.join().unwrap_err().is_cancelled());
    });
    assert!(rt.shutdown_timeout(Duration::MAX), "nothing was in flight");
}
