//! Observability: per-worker counters, the fiber dump with wait reasons, and the watchdog's
//! warning for a fiber that does not yield.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use spindle::Builder;

#[test]
fn counters_move_with_the_work_done() {
    let rt = Builder::new().worker_threads(2).build().unwrap();
    let before: u64 = rt.metrics().iter().map(|m| m.fibers_resumed).sum();
    rt.block_on(|| {
        let hs: Vec<_> = (0..100).map(|_| spindle::spawn(spindle::yield_now)).collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    let _ = rt.spawn_async(async {}).join();
    // A fiber parked on a channel and woken from this thread: a remote wake-up of its worker.
    // (New work from outside goes to the injector and wakes a worker only if one is idle, so
    // block_on and spawn_async alone need not count one.)
    let (tx, rx) = spindle::sync::channel::<u8>(1);
    let reader = spindle::fiber::Builder::new().name("reader").spawn_on(&rt, move || rx.recv()).unwrap();
    while !rt.dump_fibers().iter().any(|f| f.name.as_deref() == Some("reader") && f.waiting_on != "runnable")
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    tx.send(7).unwrap();
    assert_eq!(reader.join().unwrap().unwrap(), 7);
    let m = rt.metrics();
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].index, 0);
    assert_eq!(m[1].index, 1);
    let resumed: u64 = m.iter().map(|m| m.fibers_resumed).sum();
    let started: u64 = m.iter().map(|m| m.fibers_started).sum();
    assert!(resumed >= before + 102, "every one of the 102 fibers was resumed at least once");
    assert!(started >= 102);
    assert!(m.iter().map(|m| m.tasks_polled).sum::<u64>() >= 1);
    assert!(m.iter().map(|m| m.remote_wakeups).sum::<u64>() >= 1, "the reader was woken from outside");
    assert!(m.iter().all(|m| m.live_fibers == 0 || m.live_fibers < 5));
}

#[test]
fn the_dump_names_parked_fibers_and_what_they_wait_on() {
    let rt = Builder::new().worker_threads(1).build().unwrap();
    let (tx, rx) = spindle::sync::channel::<u8>(1);
    let _reader = spindle::fiber::Builder::new().name("reader").spawn_on(&rt, move || rx.recv()).unwrap();
    let _sleeper = spindle::fiber::Builder::new()
        .name("sleeper")
        .spawn_on(&rt, || spindle::time::sleep(Duration::from_secs(3600)))
        .unwrap();
    // Wait until both have parked.
    let dump = loop {
        let dump = rt.dump_fibers();
        if dump.iter().filter(|f| f.waiting_on != "runnable" && f.waiting_on != "not started").count() == 2 {
            break dump;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let find = |n: &str| dump.iter().find(|f| f.name.as_deref() == Some(n)).unwrap().clone();
    assert_eq!(find("reader").waiting_on, "channel recv");
    assert_eq!(find("sleeper").waiting_on, "sleep");
    assert_eq!(find("reader").worker, 0);
    drop(tx);
}

struct Capture(Arc<Mutex<Vec<String>>>);
impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        if record.level() <= log::Level::Warn {
            self.0.lock().unwrap().push(record.args().to_string());
        }
    }
    fn flush(&self) {}
}

/// A fiber that has only yielded, never parked, is in the dump (as runnable) and counted live:
/// a worker registers a fiber at its first switch away, which comes before the dump's task
/// can run on that worker, not at its first run.
#[test]
fn the_dump_lists_a_fiber_that_only_yields() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let rt = Builder::new().worker_threads(1).build().unwrap();
    let (started, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let spinner = {
        let (started, stop) = (started.clone(), stop.clone());
        spindle::fiber::Builder::new()
            .name("spinner")
            .spawn_on(&rt, move || {
                started.store(true, Ordering::Relaxed);
                while !stop.load(Ordering::Relaxed) {
                    spindle::yield_now();
                }
            })
            .unwrap()
    };
    while !started.load(Ordering::Relaxed) {
        std::thread::yield_now();
    }
    assert_eq!(rt.metrics()[0].live_fibers, 1, "started and unfinished");
    let dump = rt.dump_fibers();
    let spinner_info =
        dump.iter().find(|f| f.name.as_deref() == Some("spinner")).expect("the spinner is listed");
    assert_eq!(spinner_info.waiting_on, "runnable");
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
}

#[test]
fn the_watchdog_warns_about_a_fiber_that_does_not_yield() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    log::set_logger(Box::leak(Box::new(Capture(lines.clone())))).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let rt = Builder::new()
        .worker_threads(1)
        .long_running_budget(Some(Duration::from_millis(20)))
        .build()
        .unwrap();
    let spawned_at = std::panic::Location::caller().line() + 1;
    let id = rt.block_on(|| {
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(200) {
            std::hint::spin_loop(); // never yields
        }
        spindle::fiber::current().id().as_u64()
    });
    let lines = lines.lock().unwrap();
    assert!(
        lines.iter().any(|l| l.contains(&format!("fiber {id} has held worker 0 for"))
            && l.contains("without yielding")
            && l.contains(&format!("spawned at {}:{spawned_at}:", file!()))),
        "the warning names the fiber and the line that spawned it: {lines:?}"
    );
}

const CHILD_ENV: &str = "SPINDLE_TEST_WATCHDOG_CHILD";

/// Run by the test below in a child process, where no logger is installed.
#[test]
fn watchdog_child_without_a_logger() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let rt = Builder::new()
        .worker_threads(1)
        .long_running_budget(Some(Duration::from_millis(20)))
        .build()
        .unwrap();
    let id = rt.block_on(|| {
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(200) {
            std::hint::spin_loop(); // never yields
        }
        spindle::fiber::current().id().as_u64()
    });
    eprintln!("CHILD FIBER {id}");
}

#[test]
fn without_a_logger_the_watchdog_writes_to_stderr() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["watchdog_child_without_a_logger", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("CHILD FIBER "))
        .unwrap_or_else(|| panic!("child printed no fiber id:\n{stderr}"));
    assert!(
        stderr.contains(&format!("[spindle WARN] spindle: fiber {id} has held worker 0 for")),
        "no watchdog line on stderr:\n{stderr}"
    );
}
