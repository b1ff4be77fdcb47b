//! A `Drop` that panics while its fiber is being cancelled (here: at runtime shutdown) is a
//! panic during unwinding, which Rust turns into an abort; the report must say so and keep the
//! panic's own message. Runs in a child process (this test binary re-executed), which aborts.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

const CHILD_ENV: &str = "SPINDLE_TEST_CANCEL_DROP_PANIC_CHILD";

struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the bomb's drop panicked");
    }
}

#[test]
fn cancel_drop_panic_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
    let (_tx, rx) = spindle::sync::channel::<u8>(1);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let _handle = spindle::fiber::Builder::new()
        .name("holds-a-bomb")
        .spawn_on(&rt, move || {
            let _bomb = Bomb;
            ready_tx.send(()).unwrap();
            let _ = rx.recv(); // parked until the runtime cancels it
        })
        .unwrap();
    ready_rx.recv().unwrap();
    drop(rt); // cancels the fiber: its unwinding drops the bomb
    unreachable!("a panic during cancellation aborts");
}

#[test]
fn a_panicking_drop_during_cancellation_is_reported_with_its_message() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["cancel_drop_panic_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "the process aborts:\n{stderr}");
    assert!(stderr.contains("the bomb's drop panicked"), "the panic's own message is kept:\n{stderr}");
    assert!(
        stderr.contains("(holds-a-bomb) panicked while it was being cancelled"),
        "the report names the fiber and the cancellation:\n{stderr}"
    );
}
