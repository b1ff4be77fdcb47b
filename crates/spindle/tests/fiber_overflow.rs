//! Stack overflow in a fiber: the guard page fault is recognised, the fiber is named in the
//! message, and the process aborts. Runs the overflowing code in a child process (this test
//! binary re-executed with an environment variable) and asserts on its stderr and exit.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

const CHILD_ENV: &str = "SPINDLE_TEST_OVERFLOW_CHILD";

#[inline(never)]
fn recurse(depth: u64, buf: &mut [u8; 512]) -> u64 {
    let mut local = [0u8; 512];
    local[(depth % 512) as usize] = depth as u8;
    buf[0] = local[0];
    // black_box keeps the frame and the recursion (no tail call, no folding).
    std::hint::black_box(&mut local);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1, &mut local) + std::hint::black_box(local[1]) as u64
}

/// The child's body: it overflows a 32 KiB fiber stack.
#[test]
fn overflow_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return; // only meaningful when re-executed by `overflow_aborts_with_a_message`
    }
    // One worker, one stack pool: the eight fibers parked first make the pool map stacks in
    // batches (one mmap for several stacks, guards installed together), so the overflowing
    // fiber runs on a stack from a batch with a live neighbour right below its guard page.
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    rt.block_on(|| {
        let release = spindle::sync::WaitGroup::new();
        release.add(1);
        let _parked: Vec<_> = (0..8)
            .map(|_| {
                let release = release.clone();
                spindle::fiber::Builder::new().stack_size(32 * 1024).spawn(move || release.wait()).unwrap()
            })
            .collect();
        spindle::yield_now(); // let them start (and take their stacks)
        let h = spindle::fiber::Builder::new()
            .name("deep-recursion")
            .stack_size(32 * 1024)
            .spawn(|| recurse(0, &mut [0; 512]))
            .unwrap();
        let _ = h.join();
    });
    unreachable!("the overflow must abort the process");
}

#[test]
fn overflow_aborts_with_a_message() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "overflow_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child must not succeed; stderr:\n{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc_sigabrt()),
        "expected SIGABRT; status {:?}, stderr:\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains("fiber 'deep-recursion'") && stderr.contains("has overflowed its stack"),
        "the message names the fiber; stderr:\n{stderr}"
    );
    assert!(stderr.contains("32 KiB"), "the message gives the stack size; stderr:\n{stderr}");
}

#[test]
fn faults_outside_fiber_guards_reach_the_previous_handler() {
    // A plain null dereference on a worker must not be reported as a fiber overflow: the
    // handler chains to the default action (SIGSEGV kills the child).
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["--exact", "segv_child", "--nocapture", "--test-threads=1"])
        .env("SPINDLE_TEST_SEGV_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(11), "expected SIGSEGV; status {:?}, stderr:\n{stderr}", out.status);
    assert!(!stderr.contains("overflowed its stack"), "misreported as an overflow:\n{stderr}");
}

#[test]
fn segv_child() {
    if std::env::var_os("SPINDLE_TEST_SEGV_CHILD").is_none() {
        return;
    }
    let rt = spindle::Runtime::new().unwrap();
    rt.block_on(|| {
        let p = std::hint::black_box(8usize) as *const u64;
        // SAFETY: not safe at all, on purpose: this child process must die of SIGSEGV.
        unsafe { std::ptr::read_volatile(p) }
    });
}

fn libc_sigabrt() -> i32 {
    6
}
