//! What a worker held too long is doing, for the watchdog's warning: computing, or blocked in
//! the kernel by a foreign call (a std lock, another executor's `block_on`, a blocking read),
//! read from `/proc/self/task/<tid>/syscall` (the system call a thread is blocked in, or
//! `running`). Reading another thread's entry is allowed within one process; where `/proc`
//! is missing the warning just says less.
//!
//! Invariant: read only, on the watchdog thread, after a stall was seen; never on a worker.

/// The calling thread's kernel id.
pub(crate) fn this_thread_tid() -> i32 {
    // SAFETY: gettid takes no argument and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    i32::try_from(tid).unwrap_or(0)
}

/// A clause for the watchdog's warning about the thread `tid`: what it is blocked in, or
/// that it is computing. `None` when it cannot be told.
pub(crate) fn describe(tid: i32) -> Option<String> {
    if tid <= 0 {
        return None;
    }
    let line = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let first = line.split_whitespace().next()?;
    if first == "running" {
        return Some(
            "it is running (a computation without a yield: call spindle::yield_now in the loop, or \
             move it to spawn_blocking)"
                .to_owned(),
        );
    }
    let number: i64 = first.parse().ok()?;
    if number < 0 {
        return None; // blocked, but not in a system call
    }
    let (name, cause) = syscall_name(number);
    Some(format!(
        "it is blocked in the kernel in `{name}`, a foreign blocking call that parks the whole worker \
         instead of the fiber ({cause})"
    ))
}

/// The name of system call `number` and the usual culprits behind it.
fn syscall_name(number: i64) -> (String, &'static str) {
    let known: &[(i64, &str, &str)] = &[
        (
            libc::SYS_futex,
            "futex",
            "a std Mutex, RwLock or Condvar held or waited on across a park, std::sync::mpsc, \
             a thread join, or another executor's block_on: use spindle::sync's primitives, \
             spindle::task::block_on, or spawn_blocking",
        ),
        (
            libc::SYS_read,
            "read",
            "a blocking read of a socket, pipe or file: use spindle::net, spindle::fs, or the `hook` feature",
        ),
        (libc::SYS_recvfrom, "recvfrom", "a blocking socket read: use spindle::net or the `hook` feature"),
        (libc::SYS_recvmsg, "recvmsg", "a blocking socket read: use spindle::net or the `hook` feature"),
        (libc::SYS_write, "write", "a blocking write: use spindle::net, spindle::fs, or the `hook` feature"),
        (libc::SYS_sendto, "sendto", "a blocking socket write: use spindle::net or the `hook` feature"),
        (libc::SYS_connect, "connect", "a blocking connect: use spindle::net or the `hook` feature"),
        (libc::SYS_accept4, "accept4", "a blocking accept: use spindle::net or the `hook` feature"),
        (
            libc::SYS_clock_nanosleep,
            "clock_nanosleep",
            "std::thread::sleep: use spindle::time::sleep, or the `hook` feature",
        ),
        (
            libc::SYS_ppoll,
            "ppoll",
            "a foreign event loop or poll: use spindle's sockets, or the `hook` feature",
        ),
        (
            libc::SYS_epoll_pwait,
            "epoll_pwait",
            "a foreign event loop (another runtime's block_on): use spindle::task::block_on",
        ),
        (libc::SYS_wait4, "wait4", "a blocking wait for a child process: use spindle::process"),
        (libc::SYS_fsync, "fsync", "file I/O on the worker: use spindle::fs"),
        (libc::SYS_openat, "openat", "file I/O on the worker: use spindle::fs"),
    ];
    #[cfg(target_arch = "x86_64")]
    let legacy: &[(i64, &str, &str)] = &[
        (
            libc::SYS_nanosleep,
            "nanosleep",
            "std::thread::sleep: use spindle::time::sleep, or the `hook` feature",
        ),
        (
            libc::SYS_poll,
            "poll",
            "a foreign event loop or poll: use spindle's sockets, or the `hook` feature",
        ),
        (
            libc::SYS_epoll_wait,
            "epoll_wait",
            "a foreign event loop (another runtime's block_on): use spindle::task::block_on",
        ),
        (libc::SYS_accept, "accept", "a blocking accept: use spindle::net or the `hook` feature"),
        (libc::SYS_select, "select", "a foreign event loop or select: the `hook` feature"),
    ];
    #[cfg(not(target_arch = "x86_64"))]
    let legacy: &[(i64, &str, &str)] = &[];
    known
        .iter()
        .chain(legacy)
        .find(|(n, _, _)| *n == number)
        .map(|(_, name, cause)| ((*name).to_owned(), *cause))
        .unwrap_or_else(|| (format!("system call {number}"), "a call that spindle does not park"))
}

#[cfg(test)]
mod tests {
    /// A thread blocked on a std mutex is named as blocked in `futex`.
    #[test]
    fn a_thread_blocked_on_a_std_mutex_is_in_futex() {
        let lock = std::sync::Arc::new(std::sync::Mutex::new(()));
        let held = lock.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let l = lock.clone();
        let t = std::thread::spawn(move || {
            tx.send(super::this_thread_tid()).unwrap();
            drop(l.lock().unwrap());
        });
        let tid = rx.recv().unwrap();
        let mut seen = None;
        for _ in 0..2000 {
            seen = super::describe(tid);
            if seen.as_deref().is_some_and(|s| s.contains("futex")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(held);
        t.join().unwrap();
        let seen = seen.expect("/proc/self/task/<tid>/syscall is readable");
        assert!(seen.contains("`futex`") && seen.contains("std Mutex"), "{seen}");
    }
}
