//! `join!` / `try_join!` (futures) and `join_fibers!` / `try_join_fibers!` (closures on
//! fibers): every value, the first error, the others cancelled, panics passed on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Sets its flag when dropped (a future or fiber that is cancelled drops it).
struct Flag(Arc<AtomicBool>);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn join_waits_for_every_future() {
    let rt = spindle::Builder::new().start_paused(true).build().unwrap();
    let got = rt.block_on(async {
        let t0 = spindle::time::now();
        let out = spindle::join!(
            async {
                spindle::time::sleep_future(Duration::from_secs(2)).await;
                "slow"
            },
            async { 1 },
            std::future::ready(2.5),
        );
        (out, spindle::time::now() - t0)
    });
    assert_eq!(got, (("slow", 1, 2.5), Duration::from_secs(2)));
}

#[test]
fn try_join_returns_the_first_error_and_drops_the_others() {
    let rt = spindle::Builder::new().start_paused(true).build().unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = Flag(dropped.clone());
    let got: Result<(u8, u8), &str> = rt.block_on(async move {
        spindle::try_join!(
            async move {
                let _flag = flag;
                spindle::time::sleep_future(Duration::from_secs(3600)).await;
                Ok(1)
            },
            async {
                spindle::time::sleep_future(Duration::from_secs(1)).await;
                Err("second failed")
            },
        )
    });
    assert_eq!(got, Err("second failed"));
    assert!(dropped.load(Ordering::SeqCst));
    let ok: Result<(u8, &str), ()> =
        rt.block_on(async { spindle::try_join!(async { Ok(1) }, async { Ok("two") }) });
    assert_eq!(ok, Ok((1, "two")));
}

#[test]
fn join_fibers_runs_each_closure_on_a_fiber() {
    let rt = spindle::Builder::new().worker_threads(2).build().unwrap();
    let (a, b, c) = rt.block_on(|| {
        let me = spindle::fiber::current().id();
        spindle::join_fibers!(
            move || spindle::fiber::current().id() != me,
            || {
                spindle::time::sleep(Duration::from_millis(1));
                2u8
            },
            || "three",
        )
    });
    assert!(a);
    assert_eq!((b, c), (2, "three"));
}

#[test]
fn a_panic_in_join_fibers_aborts_the_others_and_resumes() {
    let rt = spindle::Builder::new().start_paused(true).build().unwrap();
    let aborted = Arc::new(AtomicBool::new(false));
    let flag = Flag(aborted.clone());
    let caught = rt.block_on(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spindle::join_fibers!(
                move || {
                    let _flag = flag;
                    spindle::time::sleep(Duration::from_secs(3600));
                },
                || panic!("boom"),
            )
        }))
    });
    assert_eq!(*caught.unwrap_err().downcast_ref::<&str>().unwrap(), "boom");
    rt.block_on(move || {
        while !aborted.load(Ordering::SeqCst) {
            spindle::time::sleep(Duration::from_millis(1));
        }
    });
}

#[test]
fn try_join_fibers_stops_at_the_first_error() {
    let rt = spindle::Builder::new().start_paused(true).build().unwrap();
    let aborted = Arc::new(AtomicBool::new(false));
    let flag = Flag(aborted.clone());
    let got: Result<((), u8), String> = rt.block_on(move || {
        let t0 = spindle::time::now();
        let got = spindle::try_join_fibers!(
            move || {
                let _flag = flag;
                spindle::time::sleep(Duration::from_secs(3600));
                Ok(())
            },
            || {
                spindle::time::sleep(Duration::from_secs(1));
                Err("failed".to_string())
            },
        );
        assert_eq!(spindle::time::now() - t0, Duration::from_secs(1));
        got
    });
    assert_eq!(got, Err("failed".to_string()));
    rt.block_on(move || {
        while !aborted.load(Ordering::SeqCst) {
            spindle::time::sleep(Duration::from_millis(1));
        }
    });
    let ok: Result<(u8, u8), ()> = rt.block_on(|| spindle::try_join_fibers!(|| Ok(1), || Ok(2)));
    assert_eq!(ok, Ok((1, 2)));
}
