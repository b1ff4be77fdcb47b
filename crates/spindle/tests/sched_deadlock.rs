//! "All fibers are asleep - deadlock!": a runtime whose every fiber waits for what nothing
//! can bring fails its `block_on` with the fiber dump instead of hanging; a fiber waiting on a
//! thread outside the runtime is left alone; a local runtime's worker held by a std lock is
//! named by its watchdog.
//!
//! Its own `main` (no test harness): the rule declares a deadlock only when the process has no
//! thread besides the runtime's, and the harness runs tests on threads of its own. An alarm
//! ends the process if a case hangs (a watchdog thread of the test's would count as a thread
//! outside the runtime).

use std::io::{BufRead, BufReader};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use spindle::sync::{channel, oneshot};
use spindle::JoinHandle;

const CHILD: &str = "SPINDLE_DEADLOCK_CHILD";

fn builder() -> spindle::Builder {
    let mut b = spindle::Builder::new();
    // The tokio bridge's thread would count as a thread outside the runtime.
    #[cfg(feature = "tokio-compat")]
    b.tokio_context(false);
    b.long_running_budget(Some(Duration::from_millis(40)));
    b
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs `f`, which must panic with a deadlock report; returns the report.
fn deadlock_report(what: &str, f: impl FnOnce()) -> String {
    let report = panic_message(catch_unwind(AssertUnwindSafe(f)).expect_err(what));
    assert!(report.contains("all fibers are asleep - deadlock!"), "{what}: {report}");
    report
}

fn two_fibers_joining_each_other() {
    let rt = builder().worker_threads(2).build().unwrap();
    let report = deadlock_report("a join cycle", || {
        rt.block_on(|| {
            let (to_a, a_gets) = oneshot::<JoinHandle<()>>();
            let (to_b, b_gets) = oneshot::<JoinHandle<()>>();
            let a = spindle::fiber::Builder::new()
                .name("alice")
                .spawn(move || a_gets.recv().unwrap().join().unwrap())
                .unwrap();
            let b = spindle::fiber::Builder::new()
                .name("bob")
                .spawn(move || b_gets.recv().unwrap().join().unwrap())
                .unwrap();
            // Each gets the other's handle.
            to_a.send(b).unwrap();
            to_b.send(a).unwrap();
            spindle::fiber::park(); // nothing wakes the body either
        })
    });
    for needle in ["\"alice\"", "\"bob\"", "waiting on join", "\"block_on\"", "sched_deadlock.rs"] {
        assert!(report.contains(needle), "the dump names {needle}: {report}");
    }
    // The runtime is still usable, and its drop cancels the parked fibers.
    assert_eq!(rt.block_on(|| 1 + 1), 2);
}

fn a_lost_wake_up_on_a_local_runtime() {
    let rt = builder().build_local().unwrap();
    let report = deadlock_report("a park nobody ends", || {
        rt.block_on(|| {
            let _lonely = spindle::fiber::Builder::new().name("lonely").spawn(spindle::fiber::park).unwrap();
            spindle::fiber::park();
        })
    });
    assert!(report.contains("\"lonely\"") && report.contains("waiting on park"), "{report}");
    assert_eq!(rt.block_on(|| 3), 3, "the local runtime stays usable");
}

fn a_forgotten_sender() {
    let rt = builder().worker_threads(1).build().unwrap();
    let report = deadlock_report("a sender kept but never used", || {
        rt.block_on(|| {
            let (tx, rx) = channel::<u8>(1);
            let got = rx.recv();
            drop(tx);
            got.unwrap();
        })
    });
    assert!(report.contains("waiting on channel recv"), "{report}");
}

/// A sender on a plain thread outside the runtime may still send: no report, the value comes.
fn a_sender_on_an_outside_thread_is_no_deadlock() {
    let rt = builder().worker_threads(1).build().unwrap();
    let (tx, rx) = channel::<u8>(1);
    let outside = std::thread::spawn(move || {
        // Several of the watchdog's looks pass meanwhile.
        std::thread::sleep(Duration::from_millis(400));
        tx.send(9).unwrap();
    });
    assert_eq!(rt.block_on(move || rx.recv().unwrap()), 9);
    outside.join().unwrap();
}

/// A sleeping fiber has a timer: no report.
fn a_timer_is_no_deadlock() {
    let rt = builder().worker_threads(1).build().unwrap();
    rt.block_on(|| spindle::time::sleep(Duration::from_millis(300)));
}

/// In a child: a local runtime's worker blocked on a std mutex whose guard a parked fiber
/// holds. It never returns; the parent reads the watchdog's line and kills it.
fn child_std_lock_across_a_park() {
    let rt = builder().build_local().unwrap();
    let lock = std::sync::Arc::new(std::sync::Mutex::new(0));
    rt.block_on(move || {
        let l = lock.clone();
        let holder = spindle::spawn(move || {
            let _guard = l.lock().unwrap();
            spindle::time::sleep(Duration::from_millis(50)); // parks, holding the guard
        });
        spindle::yield_now();
        let _blocked = lock.lock().unwrap(); // blocks the worker's thread for good
        holder.join().unwrap();
    });
}

fn the_watchdog_names_a_local_worker_held_by_a_std_lock() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(CHILD, "std-lock")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    for line in stderr.lines() {
        let line = line.unwrap();
        let found = line.contains("has held worker 0") && line.contains("`futex`");
        seen.push(line);
        if found || Instant::now() > deadline {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let last = seen.last().cloned().unwrap_or_default();
    assert!(last.contains("`futex`") && last.contains("std Mutex"), "the watchdog's line: {seen:?}");
}

fn main() {
    // SAFETY: alarm only arms a timer whose signal ends the process if a case hangs.
    unsafe { libc::alarm(240) };
    if std::env::var(CHILD).as_deref() == Ok("std-lock") {
        child_std_lock_across_a_park();
        return;
    }
    let cases: [(&str, fn()); 6] = [
        ("two_fibers_joining_each_other", two_fibers_joining_each_other),
        ("a_lost_wake_up_on_a_local_runtime", a_lost_wake_up_on_a_local_runtime),
        ("a_forgotten_sender", a_forgotten_sender),
        ("a_sender_on_an_outside_thread_is_no_deadlock", a_sender_on_an_outside_thread_is_no_deadlock),
        ("a_timer_is_no_deadlock", a_timer_is_no_deadlock),
        (
            "the_watchdog_names_a_local_worker_held_by_a_std_lock",
            the_watchdog_names_a_local_worker_held_by_a_std_lock,
        ),
    ];
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let mut passed = 0;
    for (name, case) in cases {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        case();
        println!("test {name} ... ok");
        passed += 1;
    }
    println!("\ntest result: ok. {passed} passed; 0 failed");
}
