//! spindle::signal: real signals sent to this test process, waited for by fibers, threads and
//! tasks. Each test uses its own signal (the handlers are process-wide) and installs its
//! listener before the signal is sent, so no default action (such as SIGTERM's exit) can run.

use std::io;
use std::time::Duration;

use spindle::signal::{signal, SignalKind};
use spindle::Runtime;

fn send(kind: SignalKind) {
    // SAFETY: kill(2) on our own pid with a signal whose handler is installed.
    let rc = unsafe { libc::kill(libc::getpid(), kind.as_raw()) };
    assert_eq!(rc, 0);
}

#[test]
fn a_fiber_waits_for_sighup() {
    let rt = Runtime::new().unwrap();
    let mut hup = signal(SignalKind::hangup()).unwrap();
    let waiter = rt.spawn(move || {
        hup.recv();
        "got it"
    });
    send(SignalKind::hangup());
    assert_eq!(waiter.join().unwrap(), "got it");
}

#[test]
fn a_task_awaits_sigusr1_and_every_listener_sees_it() {
    let rt = Runtime::new().unwrap();
    let mut a = signal(SignalKind::user_defined1()).unwrap();
    let mut b = signal(SignalKind::user_defined1()).unwrap();
    let task = rt.spawn_async(async move { a.recv_async().await });
    let thread = std::thread::spawn(move || b.recv());
    send(SignalKind::user_defined1());
    task.join().unwrap();
    thread.join().unwrap();
}

#[test]
fn sigterm_is_caught_not_fatal_and_no_delivery_is_lost() {
    let rt = Runtime::new().unwrap();
    let mut term = signal(SignalKind::terminate()).unwrap();
    let rounds = rt.block_on(move || {
        for _ in 0..20 {
            send(SignalKind::terminate());
            term.recv();
        }
        20
    });
    assert_eq!(rounds, 20);
}

#[test]
fn sigint_wakes_a_fiber_that_listened_first() {
    let rt = Runtime::new().unwrap();
    // Install the handler first: the fiber's listener installs it too, but only once it runs.
    let _installed = signal(SignalKind::interrupt()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = rt.spawn(move || {
        let mut int = signal(SignalKind::interrupt()).unwrap();
        tx.send(()).unwrap();
        int.recv();
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    send(SignalKind::interrupt());
    waiter.join().unwrap();
}

#[test]
fn signals_that_cannot_be_caught_are_rejected() {
    for raw in [libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV, libc::SIGBUS, 0, 1000] {
        let err = signal(SignalKind::from_raw(raw)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "signal {raw}");
    }
}

#[test]
fn a_signal_triggers_the_runtime_shutdown_token() {
    let rt = Runtime::new().unwrap();
    let token = rt.shutdown_token();
    token.trigger_on_signals(&[SignalKind::user_defined2()]).unwrap();
    let server = rt.spawn(|| {
        let token = spindle::shutdown::token();
        token.wait();
        "stopped"
    });
    send(SignalKind::user_defined2());
    assert_eq!(server.join().unwrap(), "stopped");
    assert!(token.is_triggered());
    assert!(rt.shutdown_timeout(Duration::from_secs(5)));
}
