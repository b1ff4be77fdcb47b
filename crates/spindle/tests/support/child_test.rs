//! Runs one test of the current test binary again, in a child process with environment
//! variables of its own: for what a process reads once from its environment (the system-roots
//! tests of spindle-http and spindle-grpc set `SSL_CERT_FILE` there), never set in the test
//! process itself, whose other tests run on threads beside.
//!
//! The test is its own child: it calls [`role`] first; `Some` means it runs in the child and
//! does the client's part, then calls [`done`]; `None`, it sets up (servers, files) and calls
//! [`run`].

#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Tells a test that it runs as the child of [`run`]; its value is the role.
pub const ROLE: &str = "SPINDLE_TEST_CHILD_ROLE";

/// The role of this process, when it is such a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE).ok()
}

/// Said by the child once its part passed: [`run`] checks that the test it named ran.
pub fn done(test: &str) {
    println!("spindle-child-test passed: {test}");
}

/// Runs test `test` (its exact name) of this binary in a child process, with `env` and
/// [`ROLE`] set to `role`, and returns what it printed. Panics, showing that output, unless the
/// child passed and said [`done`]; a child still running after `limit` (a hang guard, not a
/// timing claim) is killed and fails the test.
pub fn run(test: &str, role: &str, env: &[(&str, &OsStr)], limit: Duration) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = Command::new(exe);
    command.args([test, "--exact", "--nocapture"]).env(ROLE, role);
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning the test binary");
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().unwrap()));
    let stderr = read_all(Box::new(child.stderr.take().unwrap()));
    let end = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break Some(status);
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let shown = format!("--- child stdout ---\n{stdout}\n--- child stderr ---\n{stderr}");
    let Some(status) = status else {
        panic!("{test} ({role}): the child was still running after {limit:?}, killed\n{shown}");
    };
    assert!(status.success(), "{test} ({role}): the child failed: {status}\n{shown}");
    assert!(
        stdout.contains(&format!("spindle-child-test passed: {test}\n")),
        "{test} ({role}): the child did not run the test\n{shown}"
    );
    stdout
}
