//! The safety net: when a fiber holds its worker past the watchdog's budget (here a std
//! channel's blocking receive, which no hook turns into a park), the fibers queued on that
//! worker that have not started are handed to the other workers, and the warning names the
//! fiber, where it was spawned and what was handed off. Started fibers stay home.
//!
//! Shown by order, never by time: the held fiber waits for fibers that were queued behind it
//! on its own worker. Without the hand-off they could never run; the test then fails at the
//! hang guard's generous deadline instead of hanging.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[path = "support/hang_guard.rs"]
mod hang_guard;

#[path = "support/log_capture.rs"]
mod log_capture;

static LOG: log_capture::Capture = log_capture::Capture::new("spindle");

const QUEUED: usize = 10;

#[test]
fn a_held_worker_hands_its_unstarted_fibers_to_the_others_and_keeps_its_started_ones() {
    log::set_logger(&LOG).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let (stayed_home, received) = hang_guard::returns_within_hang_limit("the held worker's runtime", || {
        let rt = spindle::Builder::new()
            .worker_threads(2)
            .long_running_budget(Some(Duration::from_millis(20)))
            .build()
            .unwrap();
        let out = rt.block_on(|| {
            let spinning = Arc::new(AtomicBool::new(false));
            let release = Arc::new(AtomicBool::new(false));
            // Worker 1 computes while worker 0's fiber spawns, so that no worker is idle and
            // the new fibers stay in worker 0's run queue.
            let (s, r) = (spinning.clone(), release.clone());
            let spinner = spindle::fiber::Builder::new()
                .worker(1)
                .spawn(move || {
                    s.store(true, Ordering::SeqCst);
                    while !r.load(Ordering::SeqCst) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap();
            let holder = spindle::fiber::Builder::new()
                .name("holder")
                .worker(0)
                .spawn(move || {
                    while !spinning.load(Ordering::SeqCst) {
                        spindle::yield_now();
                    }
                    // A started fiber of worker 0, parked until the end: it must stay here.
                    let home = std::thread::current().id();
                    let (wake, parked) = spindle::sync::channel::<()>(1);
                    let resident = spindle::spawn(move || {
                        let started_on = std::thread::current().id();
                        parked.recv().unwrap();
                        (started_on, std::thread::current().id())
                    });
                    spindle::yield_now(); // let the resident start and park
                    let (tx, rx) = std::sync::mpsc::channel::<usize>();
                    for i in 0..QUEUED {
                        let tx = tx.clone();
                        spindle::spawn(move || tx.send(i).unwrap());
                    }
                    drop(tx);
                    release.store(true, Ordering::SeqCst);
                    // Holds worker 0: a std receive blocks the thread, and the fibers that
                    // send are queued behind this one on the same worker.
                    let received: usize = rx.iter().count();
                    wake.send(()).unwrap();
                    let (started_on, ended_on) = resident.join().unwrap();
                    (started_on == home && ended_on == home, received)
                })
                .unwrap();
            spinner.join().unwrap();
            holder.join().unwrap()
        });
        rt.shutdown_timeout(Duration::from_secs(5));
        out
    });
    assert_eq!(received, QUEUED, "every queued fiber ran, on the other worker");
    assert!(stayed_home, "the started fiber stayed on its worker");
    let warnings = LOG.warnings();
    assert!(
        warnings.iter().any(|w| w.contains("has held worker 0")
            && w.contains("spawned at")
            && w.contains(file!())
            && w.contains("fibers that had not started were handed to the other workers")),
        "the warning names the held worker, the fiber's spawn site and the hand-off: {warnings:#?}"
    );
}
