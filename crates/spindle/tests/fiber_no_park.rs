//! The debug-build detector for state held across a park (`fiber::no_park`, `watch::Ref`).
#![cfg(debug_assertions)]

use std::time::Duration;

fn panic_message(err: Box<dyn std::any::Any + Send>) -> String {
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn parking_inside_a_no_park_section_panics_naming_it() {
    let rt = spindle::Runtime::new().unwrap();
    let err = rt
        .spawn(|| {
            let _section = spindle::fiber::no_park("the config RefCell borrow");
            // A sleep that is sure to park: the check runs where the fiber parks, and a
            // 1 ms sleep whose deadline had passed by the time it looked (a loaded CI run
            // under ASan) returned without parking, and without the panic. The panic
            // unwinds out of the park at once: the test does not wait an hour.
            spindle::time::sleep(Duration::from_secs(3600));
        })
        .join()
        .unwrap_err();
    let msg = panic_message(err.into_panic());
    assert!(msg.contains("the config RefCell borrow") && msg.contains("sleep"), "{msg}");

    // After the section ends, parking is fine again, and other fibers are unaffected.
    rt.block_on(|| {
        {
            let _section = spindle::fiber::no_park("short");
        }
        spindle::yield_now();
        spindle::time::sleep(Duration::from_millis(1));
    });
}

#[test]
fn a_watch_ref_held_across_a_wait_panics() {
    let rt = spindle::Runtime::new().unwrap();
    let (tx, rx) = spindle::sync::watch::channel(1);
    let err = rt
        .spawn(move || {
            let value = rx.borrow();
            spindle::yield_now();
            *value
        })
        .join()
        .unwrap_err();
    assert!(panic_message(err.into_panic()).contains("watch::Ref"));
    drop(tx);
}

#[test]
fn plain_threads_are_not_checked() {
    let _section = spindle::fiber::no_park("on a thread");
    std::thread::sleep(Duration::from_millis(1));
    spindle::yield_now();
}
