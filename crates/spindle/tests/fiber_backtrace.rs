//! Fiber stacks are linked for unwinders (x86_64, DWARF CFI on the fiber's first frame): a
//! backtrace taken in a fiber goes on into the worker's loop and the thread that runs it, as
//! a debugger's `bt` does, instead of stopping at the fiber's entry.
#![cfg(target_arch = "x86_64")]

/// A backtrace in a fiber of a local runtime reaches the caller of `block_on`: this very test
/// function, on the other side of the switch. After a park too (the fiber was resumed by a
/// direct switch or by the loop).
#[test]
fn a_backtrace_in_a_fiber_reaches_the_thread_that_runs_it() {
    let rt = spindle::Builder::new().build_local().unwrap();
    let (before, after) = rt.block_on(|| {
        let inner = spindle::spawn(|| {
            let before = std::backtrace::Backtrace::force_capture().to_string();
            spindle::yield_now();
            spindle::time::sleep(std::time::Duration::from_millis(1));
            (before, std::backtrace::Backtrace::force_capture().to_string())
        });
        inner.join().unwrap()
    });
    for trace in [before, after] {
        assert!(trace.contains("fiber_entry"), "the fiber's own frames: {trace}");
        assert!(trace.contains("run_loop"), "on into the worker's loop: {trace}");
        assert!(
            trace.contains("a_backtrace_in_a_fiber_reaches_the_thread_that_runs_it"),
            "and into the frames of the thread that called block_on: {trace}"
        );
    }
}

/// On a worker thread, a backtrace reaches the loop and the thread's start.
#[test]
fn a_backtrace_on_a_worker_reaches_the_worker_loop() {
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let trace = rt.block_on(|| std::backtrace::Backtrace::force_capture().to_string());
    assert!(trace.contains("run_loop"), "{trace}");
}
