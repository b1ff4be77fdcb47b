//! spindle::process: children started from fibers, tasks and plain threads; waits that park
//! only the fiber (pidfd readiness); piped streams as spindle streams; std's exit statuses.

use std::io::{self, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use spindle::process::{Command, Stdio};
use spindle::{Builder, Runtime};

#[path = "support/hang_guard.rs"]
mod hang_guard;
use hang_guard::returns_within_hang_limit;

fn runtime(workers: usize) -> Runtime {
    Builder::new().worker_threads(workers).build().unwrap()
}

const SCRIPT: &str = "echo out; echo err >&2; exit 3";

fn check_output(out: &std::process::Output) {
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.status.code(), Some(3));
    assert!(!out.status.success());
}

#[test]
fn output_collects_stdout_stderr_and_status_in_a_fiber() {
    let rt = runtime(1);
    let out = rt.block_on(|| Command::new("sh").args(["-c", SCRIPT]).output().unwrap());
    check_output(&out);
}

#[test]
fn output_on_a_plain_thread_and_from_a_task() {
    check_output(&Command::new("sh").args(["-c", SCRIPT]).output().unwrap());
    let rt = runtime(1);
    let out = rt
        .spawn_async(async { Command::new("sh").args(["-c", SCRIPT]).output_async().await.unwrap() })
        .join()
        .unwrap();
    check_output(&out);
}

#[test]
fn status_and_env_and_current_dir_reach_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(1);
    let d = dir.path().to_owned();
    let out = rt.block_on(move || {
        let status = Command::new("sh").args(["-c", "exit 7"]).status().unwrap();
        assert_eq!(status.code(), Some(7));
        Command::new("sh")
            .args(["-c", "echo \"$A $B\"; pwd; echo \"${HOME:-none}\""])
            .env_clear()
            .env("A", "a")
            .envs([("B", "b"), ("HOME", "h")])
            .env_remove("HOME")
            .current_dir(&d)
            .output()
            .unwrap()
    });
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "a b");
    assert_eq!(Path::new(lines[1]).canonicalize().unwrap(), dir.path().canonicalize().unwrap());
    assert_eq!(lines[2], "none");
}

/// The child (`cat FIFO`) cannot exit before someone writes to the FIFO, and the only writer
/// is a second fiber on the same single worker, started after the wait begins. If `wait`
/// blocked the worker, that fiber would never run and the child never exit: the test would
/// hang (the hang guard fails it). A child that exits by itself (`sleep 0.2`) could not show
/// this, since a blocking wait would end too.
#[test]
fn wait_parks_only_its_fiber() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("gate");
    mkfifo(&fifo);
    let (status, opener_ran) = returns_within_hang_limit("a child wait whose exit needs another fiber", {
        move || {
            let rt = runtime(1);
            let ran = Arc::new(AtomicBool::new(false));
            let status = rt.block_on({
                let ran = ran.clone();
                move || {
                    let mut child = Command::new("cat")
                        .arg(&fifo)
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap();
                    let opener = spindle::spawn(move || {
                        ran.store(true, Ordering::SeqCst);
                        spindle::fs::write(&fifo, b"go\n").unwrap();
                    });
                    let status = child.wait().unwrap();
                    opener.join().unwrap();
                    status
                }
            });
            (status, ran.load(Ordering::SeqCst))
        }
    });
    assert!(opener_ran);
    assert!(status.success());
}

/// 1 MiB through `cat`, written by one fiber and read back by another on one worker. A pipe
/// holds 64 KiB: if a full-pipe write or an empty-pipe read blocked the worker, the other
/// fiber could not run and both would wait for ever (the hang guard fails the test).
#[test]
fn a_mebibyte_through_cat_with_a_writer_and_a_reader_fiber() {
    let payload: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 241) as u8).collect();
    let want = payload.clone();
    let (got, status) = returns_within_hang_limit("1 MiB through cat on one worker", move || {
        let rt = runtime(1);
        rt.block_on(move || {
            let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let mut stdout = child.stdout.take().unwrap();
            let writer = spindle::spawn(move || stdin.write_all(&payload).unwrap());
            let reader = spindle::spawn(move || {
                let mut got = Vec::new();
                stdout.read_to_end(&mut got).unwrap();
                got
            });
            writer.join().unwrap();
            let got = reader.join().unwrap();
            (got, child.wait().unwrap())
        })
    });
    assert!(status.success());
    assert_eq!(got.len(), want.len());
    assert!(got == want, "cat gave back other bytes");
}

/// The flags of `fd` (fcntl F_GETFL) in this process.
fn fd_flags(fd: &impl std::os::fd::AsRawFd) -> libc::c_int {
    // SAFETY: F_GETFL reads the flags of an open descriptor and touches no memory.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) }
}

/// The child's ends of its pipes are blocking (read from `/proc/<child>/fdinfo`), while the
/// parent's ends are not.
#[test]
fn the_child_gets_blocking_pipe_ends_and_the_parent_non_blocking_ones() {
    let rt = runtime(1);
    let (text, parent_flags) = rt.block_on(|| {
        let child = Command::new("sh")
            .args(["-c", "for fd in 0 1 2; do grep '^flags' /proc/$$/fdinfo/$fd; done"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let flags = [
            fd_flags(child.stdin.as_ref().unwrap()),
            fd_flags(child.stdout.as_ref().unwrap()),
            fd_flags(child.stderr.as_ref().unwrap()),
        ];
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        (String::from_utf8(out.stdout).unwrap(), flags)
    });
    for flags in parent_flags {
        assert_ne!(flags & libc::O_NONBLOCK, 0, "a parent end is blocking");
    }
    let child_flags: Vec<u32> = text
        .lines()
        .map(|l| u32::from_str_radix(l.trim_start_matches("flags:").trim(), 8).unwrap())
        .collect();
    assert_eq!(child_flags.len(), 3, "{text}");
    for (fd, flags) in child_flags.iter().enumerate() {
        assert_eq!(flags & libc::O_NONBLOCK as u32, 0, "the child's fd {fd} is non-blocking: {text}");
    }
}

/// A spindle pipe end handed to a second child (`printf | tr`) reaches it in blocking mode.
#[test]
fn a_pipe_end_passed_to_another_child_is_blocking_again() {
    let rt = runtime(1);
    let out = rt.block_on(|| {
        let mut first = Command::new("sh")
            .args(["-c", "grep '^flags' /proc/$$/fdinfo/1 >&2; printf hello"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pipe = Stdio::try_from(first.stdout.take().unwrap()).unwrap();
        let second = Command::new("tr").args(["a-z", "A-Z"]).stdin(pipe).output().unwrap();
        let first = first.wait_with_output().unwrap();
        assert!(first.status.success());
        (second, first.stderr)
    });
    assert_eq!(out.0.stdout, b"HELLO");
    let flags = String::from_utf8(out.1).unwrap();
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("flags:").trim(), 8).unwrap();
    assert_eq!(flags & libc::O_NONBLOCK as u32, 0);
}

#[test]
fn kill_then_wait_reports_the_signal() {
    let rt = runtime(1);
    let (before, status, after) = rt.block_on(|| {
        let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
        let before = child.try_wait().unwrap();
        child.kill().unwrap();
        let status = child.wait().unwrap();
        (before, status, child.try_wait().unwrap())
    });
    assert_eq!(before, None, "sleep 1000 had not exited");
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert_eq!(status.code(), None);
    assert_eq!(after, Some(status), "the status is kept once reaped");
}

#[test]
fn a_hundred_children_at_once_on_two_workers() {
    let rt = runtime(2);
    let results = rt.block_on(|| {
        let fibers: Vec<_> = (0..100)
            .map(|i| {
                spindle::spawn(move || {
                    let out = Command::new("sh")
                        .args(["-c", "echo $0; exit $(($0 % 5))"])
                        .arg(i.to_string())
                        .output();
                    let out = out.unwrap();
                    (i, out)
                })
            })
            .collect();
        fibers.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(results.len(), 100);
    for (i, out) in results {
        assert_eq!(out.stdout, format!("{i}\n").into_bytes());
        assert_eq!(out.status.code(), Some(i % 5));
    }
}

#[path = "support/fifo.rs"]
mod fifo;
#[path = "support/futures_io_util.rs"]
mod futures_io_util;
use fifo::mkfifo;

/// From tasks: piped streams through futures-io (a writer task and a reader task, 1 MiB, so
/// each must wait on the other), `wait_async`, `status_async`.
#[test]
fn async_forms_from_tasks() {
    use futures_io_util::{read_to_end, write_all};
    let rt = runtime(2);
    let payload: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 239) as u8).collect();
    let want = payload.clone();
    let (got, status, code) = rt
        .spawn_async(async move {
            let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let mut stdout = child.stdout.take().unwrap();
            let writer = spindle::task::spawn_async(async move { write_all(&mut stdin, &payload).await });
            let got = read_to_end(&mut stdout).await.unwrap();
            writer.await.unwrap().unwrap();
            let status = child.wait_async().await.unwrap();
            let code = Command::new("sh").args(["-c", "exit 4"]).status_async().await.unwrap().code();
            (got, status, code)
        })
        .join()
        .unwrap();
    assert!(status.success());
    assert_eq!(code, Some(4));
    assert!(got == want, "cat gave back other bytes");
}

#[test]
fn a_blocking_wait_in_a_task_panics_naming_wait_async() {
    let rt = runtime(1);
    let err = rt
        .spawn_async(async {
            let mut child = Command::new("true").spawn().unwrap();
            let _ = child.wait();
        })
        .join()
        .unwrap_err();
    let payload = err.into_panic();
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(message.contains("`child wait` is a blocking-style call"), "{message}");
    assert!(message.contains("wait_async"), "{message}");
}

#[test]
fn spawn_errors_are_std_errors() {
    let rt = runtime(1);
    let kind = rt.block_on(|| Command::new("/nonexistent/program").output().unwrap_err().kind());
    assert_eq!(kind, std::process::Command::new("/nonexistent/program").output().unwrap_err().kind());
    assert_eq!(kind, io::ErrorKind::NotFound);
}
