//! The detector for state held across a park (`fiber::no_park`, `watch::Ref`), in debug and
//! release builds alike.

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

/// A fiber that joins itself panics at once, naming itself, rather than waiting forever (its
/// own handle reaches it through a oneshot; the panic is caught in the fiber and reported).
#[test]
fn a_fiber_joining_itself_panics_at_once() {
    let rt = spindle::Runtime::new().unwrap();
    let msg = rt.block_on(|| {
        let (own_tx, own_rx) = spindle::sync::oneshot::<spindle::JoinHandle<()>>();
        let (msg_tx, msg_rx) = spindle::sync::oneshot::<String>();
        let me = spindle::fiber::Builder::new()
            .name("narcissus")
            .spawn(move || {
                let own = own_rx.recv().unwrap();
                let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| own.join()));
                msg_tx.send(panic_message(caught.unwrap_err())).unwrap();
            })
            .unwrap();
        own_tx.send(me).unwrap();
        msg_rx.recv().unwrap()
    });
    assert!(msg.contains("narcissus") && msg.contains("joined itself"), "{msg}");
}
