//! Ctrl-C (SIGINT), SIGTERM and SIGHUP during a tournament: what the harness started is
//! stopped before it exits, so no server or benchmark outlives it.
//!
//! Protocol:
//!
//! 1. [`install`] (once, at the start) sets a handler for the three signals that only writes
//!    one byte to a pipe (async-signal-safe), and starts a watcher thread that reads it.
//! 2. Whatever the harness starts registers itself ([`register`]: a pid and the signal that
//!    stops it; [`register_group`]: a process group to kill) and deregisters once it is
//!    stopped the ordinary way ([`deregister`]).
//! 3. On a signal, the watcher sends each registered process its signal (each group
//!    SIGKILL), waits up to 10 s for them to end, removes the registered directories, and
//!    exits with 128 + the signal's number, as a shell reports a process killed by it.

use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What one registration stops.
enum Target {
    /// A process and the signal that stops it.
    Process(u32, libc::c_int),
    /// A process group, killed.
    Group(u32),
    /// A directory, removed once the processes are gone.
    Dir(PathBuf),
}

/// A registration, to deregister.
#[derive(Debug)]
pub struct Token(u64);

static REGISTERED: Mutex<Vec<(u64, Target)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);
/// The pipe's write end, for the handler (-1 before [`install`]).
static PIPE: AtomicI32 = AtomicI32::new(-1);

fn add(target: Target) -> Token {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).push((id, target));
    Token(id)
}

/// Registers process `pid`, stopped with `signal` on an interruption.
pub fn register(pid: u32, signal: libc::c_int) -> Token {
    add(Target::Process(pid, signal))
}

/// Registers the process group `pgid`, killed on an interruption.
pub fn register_group(pgid: u32) -> Token {
    add(Target::Group(pgid))
}

/// Registers a directory, removed on an interruption once the processes are stopped.
pub fn register_dir(dir: PathBuf) -> Token {
    add(Target::Dir(dir))
}

/// Forgets a registration (its target was stopped the ordinary way).
pub fn deregister(token: Token) {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).retain(|(id, _)| *id != token.0);
}

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = PIPE.load(Ordering::Relaxed);
    let byte = signal as u8;
    // SAFETY: write(2) is async-signal-safe; `byte` lives through the call; a failed write
    // (a full pipe: a signal is already pending) loses nothing.
    unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
}

/// Step 1 of the module doc. Idempotent.
pub fn install() {
    if PIPE.load(Ordering::Relaxed) >= 0 {
        return;
    }
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2(2) writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    PIPE.store(fds[1], Ordering::Relaxed);
    let read_end = fds[0];
    std::thread::spawn(move || {
        let mut byte = 0u8;
        // SAFETY: `byte` is valid for a one-byte write by read(2).
        while unsafe { libc::read(read_end, (&raw mut byte).cast(), 1) } != 1 {}
        stop_everything();
        std::process::exit(128 + i32::from(byte));
    });
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: an all-zero sigaction is valid (empty mask, no flags) before its fields are set.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: the action is fully initialised and the handler only writes to a pipe.
        unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
    }
}

/// Step 3 of the module doc.
fn stop_everything() {
    let targets: Vec<Target> = std::mem::take(&mut *REGISTERED.lock().unwrap_or_else(|e| e.into_inner()))
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    let mut pids = Vec::new();
    for target in &targets {
        match *target {
            Target::Process(pid, signal) => {
                crate::sys::signal(pid, signal);
                pids.push(pid);
            }
            Target::Group(pgid) => {
                crate::sys::kill_group(pgid, crate::sys::SIGKILL);
            }
            Target::Dir(_) => {}
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&pid| crate::sys::alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for target in targets {
        if let Target::Dir(dir) = target {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
