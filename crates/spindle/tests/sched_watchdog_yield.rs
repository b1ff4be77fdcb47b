//! The watchdog counts a yield as progress even when nothing else was runnable (the yield
//! then keeps the fiber running without a switch): a fiber that yields often holds nobody
//! up, and the warning says "without yielding". Its own test binary: it installs the
//! process's one logger.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spindle::Builder;

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

#[test]
fn a_fiber_that_yields_alone_is_not_reported_as_holding_its_worker() {
    let lines = Arc::new(Mutex::new(Vec::new()));
    log::set_logger(Box::leak(Box::new(Capture(lines.clone())))).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    // Generous, so that a worker thread the OS deschedules for a while on a loaded machine
    // does not draw a (justified) warning of its own.
    let budget = Duration::from_millis(200);
    let rt = Builder::new().worker_threads(1).long_running_budget(Some(budget)).build().unwrap();
    let (id, yields) = rt.block_on(move || {
        // Alone on its worker: every yield finds nothing else runnable. Work in slices of
        // 1 ms, far inside the budget, for five budgets in all.
        let start = Instant::now();
        let mut yields = 0u32;
        while start.elapsed() < budget * 5 {
            let slice = Instant::now();
            while slice.elapsed() < Duration::from_millis(1) {
                std::hint::spin_loop();
            }
            spindle::yield_now();
            yields += 1;
        }
        (spindle::fiber::current().id().as_u64(), yields)
    });
    assert!(yields >= 10, "the fiber yielded only {yields} times");
    let lines = lines.lock().unwrap();
    assert!(
        !lines.iter().any(|l| l.contains(&format!("fiber {id} has held worker"))),
        "a fiber that yielded every millisecond was reported: {lines:?}"
    );
}
