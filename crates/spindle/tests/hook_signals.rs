//! The `hook` feature and signals: off a fiber, a signal interrupts a blocking call with
//! `EINTR` exactly as without spindle; on a fiber, a signal delivered to the worker thread
//! neither breaks the fiber's parked call nor the worker's loop (module doc of `hook`,
//! "signals do not interrupt a parked call").

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

#[path = "support/hang_guard.rs"]
mod hang_guard;

static SIGNALS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn count_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// Installs a SIGUSR1 handler without `SA_RESTART`: an interrupted blocking call fails with
/// `EINTR` instead of restarting.
fn install_interrupting_handler() {
    // SAFETY: a zeroed sigaction is valid; the handler only touches an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = count_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = 0;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()), 0);
    }
}

/// The calling thread's pthread id.
fn this_thread() -> libc::pthread_t {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() }
}

fn signal(thread: libc::pthread_t) {
    // SAFETY: the thread is alive (it waits for this signal's effect).
    assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR1) }, 0);
}

#[test]
fn off_a_fiber_a_signal_interrupts_a_blocking_read_with_eintr() {
    install_interrupting_handler();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (_quiet, _) = listener.accept().unwrap();
    let (tid_tx, tid_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        tid_tx.send(this_thread()).unwrap();
        let mut b = [0u8; 1];
        // SAFETY: `b` is valid for one byte; the descriptor is the client's.
        let n = unsafe { libc::recv(client.as_raw_fd(), b.as_mut_ptr().cast(), 1, 0) };
        (n, std::io::Error::last_os_error().raw_os_error())
    });
    let tid = tid_rx.recv().unwrap();
    // Signal until the read returns: the first signal may come before the thread blocks.
    let (n, errno) = loop {
        signal(tid);
        std::thread::sleep(Duration::from_millis(20));
        if reader.is_finished() {
            break reader.join().unwrap();
        }
    };
    assert_eq!(n, -1);
    assert_eq!(errno, Some(libc::EINTR), "the plain call's EINTR");
}

#[test]
fn on_a_fiber_a_signal_to_the_worker_leaves_the_parked_read_waiting_for_its_data() {
    install_interrupting_handler();
    let before = SIGNALS.load(Ordering::SeqCst);
    let got = hang_guard::returns_within_hang_limit("the signalled runtime", move || {
        let rt = spindle::Builder::new().worker_threads(1).build().unwrap();
        let out = rt.block_on(move || {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let parked = Arc::new(AtomicUsize::new(0));
            let p = parked.clone();
            let reader = spindle::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                p.store(1, Ordering::SeqCst);
                let mut b = [0u8; 5];
                s.read_exact(&mut b).map(|()| b)
            });
            let (mut peer, _) = listener.accept().unwrap();
            while parked.load(Ordering::SeqCst) == 0 {
                spindle::yield_now();
            }
            let worker = this_thread();
            // Signals to the worker while the reader is parked (and the worker waits in its
            // reactor between them), from a plain thread.
            let signaller = std::thread::spawn(move || {
                for _ in 0..5 {
                    signal(worker);
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
            // Wait with spindle's sleep, so that the worker sleeps in its reactor meanwhile.
            while !signaller.is_finished() {
                spindle::time::sleep(Duration::from_millis(5));
            }
            signaller.join().unwrap();
            peer.write_all(b"after").unwrap();
            reader.join().unwrap()
        });
        rt.shutdown_timeout(Duration::from_secs(5));
        out
    });
    assert_eq!(&got.expect("the read was not broken by the signals"), b"after");
    assert!(SIGNALS.load(Ordering::SeqCst) >= before + 5, "the signals were delivered");
}
