//! Child processes with captured output, timeouts, and process-group cleanup.
//!
//! Rules every child of the harness follows:
//!
//! - **Its own process group.** It runs in a process group of its own (`process_group(0)`), so the group id is the child's
//!   pid and a signal to the group reaches every process it started (a shell script's
//!   children, a server's workers).
//! - **Drained output.** Its stdin is `/dev/null`; stdout and stderr are drained by one thread each, so a chatty
//!   child never blocks on a full pipe.
//! - **No load left behind.** On timeout the whole group gets SIGKILL. When the child ends by itself the group still
//!   gets SIGKILL, to reap anything it left running in the background; a benchmark must not
//!   leave load behind for the next competitor.
//! - **No hang on a leaked pipe.** Output readers are joined with a deadline: a grandchild that escaped the group (setsid)
//!   and keeps a pipe open cannot hang the harness.

use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::sys;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal (not by the harness's timeout).
    Signal(i32),
    /// The harness killed it after this long.
    TimedOut(Duration),
}

impl Exit {
    fn from_status(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Code(-1),
        }
    }

    /// Whether the child exited with code 0.
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }

    /// A short phrase for a report row: "exited with status 3", "timed out after 300 s".
    pub fn describe(self) -> String {
        match self {
            Exit::Code(code) => format!("exited with status {code}"),
            Exit::Signal(signal) => format!("killed by signal {signal}"),
            Exit::TimedOut(after) => format!("timed out after {} s", after.as_secs_f64()),
        }
    }
}

/// A child that has ended, with its output.
#[derive(Debug, Clone)]
pub struct Finished {
    /// How it ended.
    pub exit: Exit,
    /// Everything it printed on stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything it printed on stderr (lossy UTF-8).
    pub stderr: String,
}

/// Why a step or run failed: a summary, and the tail of the process's stderr.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// What went wrong, in one line.
    pub what: String,
    /// The last lines of stderr, possibly empty.
    pub stderr: String,
}

/// Lines of stderr kept for a failure.
pub const STDERR_LINES: usize = 12;

impl Failure {
    /// A failure with the tail of `stderr`.
    pub fn new(what: impl Into<String>, stderr: impl AsRef<str>) -> Failure {
        Failure { what: what.into(), stderr: tail(stderr.as_ref(), STDERR_LINES) }
    }

    /// The summary, followed by the stderr tail when there is one.
    pub fn message(&self) -> String {
        if self.stderr.is_empty() {
            self.what.clone()
        } else {
            format!("{}; stderr: {}", self.what, self.stderr)
        }
    }
}

/// A running child whose output is being drained.
pub struct Running {
    child: Child,
    /// Its group, registered for an interruption ([`crate::interrupt`]) while it runs.
    registered: Option<crate::interrupt::Token>,
    pid: u32,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    started: Instant,
}

/// How long to wait for the output readers once the process group is gone.
const READER_GRACE: Duration = Duration::from_secs(5);

fn drain(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error ends the capture; what was read so far is kept.
            let _ = pipe.read_to_end(&mut bytes);
        }
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

impl Running {
    /// Spawns `cmd` under "its own process group" and "drained output".
    pub fn spawn(cmd: &mut Command) -> io::Result<Running> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let registered = Some(crate::interrupt::register_group(pid));
        Ok(Running { child, registered, pid, stdout, stderr, started: Instant::now() })
    }

    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The child's exit, if it has exited.
    pub fn try_exit(&mut self) -> Option<Exit> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(Exit::from_status(status)),
            Ok(None) => None,
            // The child cannot be waited for (already reaped): treat it as gone.
            Err(_) => Some(Exit::Code(-1)),
        }
    }

    /// Polls until the child exits or `deadline` passes; returns its exit if it exited.
    fn wait_until(&mut self, deadline: Instant) -> Option<Exit> {
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(exit) = self.try_exit() {
                return Some(exit);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Waits for the child to exit, killing its group once `timeout` has passed since spawn.
    pub fn wait_timeout(mut self, timeout: Duration) -> Finished {
        let exit = match self.wait_until(self.started + timeout) {
            Some(exit) => exit,
            None => {
                sys::kill_group(self.pid, sys::SIGKILL);
                let _ = self.child.wait();
                Exit::TimedOut(timeout)
            }
        };
        self.collect(exit)
    }

    /// Stops the child: SIGTERM to its group, then SIGKILL after `grace`.
    pub fn stop(mut self, grace: Duration) -> Finished {
        if let Some(exit) = self.try_exit() {
            return self.collect(exit);
        }
        sys::kill_group(self.pid, sys::SIGTERM);
        let exit = match self.wait_until(Instant::now() + grace) {
            Some(exit) => exit,
            None => {
                sys::kill_group(self.pid, sys::SIGKILL);
                match self.child.wait() {
                    Ok(status) => Exit::from_status(status),
                    Err(_) => Exit::Code(-1),
                }
            }
        };
        self.collect(exit)
    }

    /// Rules 3 and 4: reap the group, then gather the output.
    fn collect(self, exit: Exit) -> Finished {
        sys::kill_group(self.pid, sys::SIGKILL);
        let stdout = self.stdout.recv_timeout(READER_GRACE).unwrap_or_default();
        let stderr = self.stderr.recv_timeout(READER_GRACE).unwrap_or_default();
        Finished { exit, stdout, stderr }
    }
}

impl Drop for Running {
    /// Its group is no longer the harness's to kill on an interruption (reaped, or given up).
    fn drop(&mut self) {
        if let Some(token) = self.registered.take() {
            crate::interrupt::deregister(token);
        }
    }
}

/// Runs `cmd` to completion or until `timeout`, capturing its output.
pub fn run(cmd: &mut Command, timeout: Duration) -> io::Result<Finished> {
    Ok(Running::spawn(cmd)?.wait_timeout(timeout))
}

/// Resolves a manifest's program: a path with a `/` is relative to the manifest's directory;
/// a bare name is looked up on PATH by the OS.
pub fn resolve_program(program: &str, dir: &Path) -> PathBuf {
    let path = Path::new(program);
    if program.contains('/') && path.is_relative() {
        dir.join(path)
    } else {
        path.to_path_buf()
    }
}

/// A command for `step` (program and arguments) run in `dir`.
///
/// A `cargo` step builds into `dir/target`, whatever `CARGO_TARGET_DIR`, `CARGO_BUILD_TARGET_DIR`
/// or a cargo config file says: the manifests' run commands name their binaries there
/// (`target/release/...`), so a target directory set elsewhere (many users set one globally)
/// would build the peers where the tournament does not look for them.
pub fn command(step: &[String], dir: &Path) -> Command {
    let mut cmd = Command::new(resolve_program(&step[0], dir));
    cmd.args(&step[1..]).current_dir(dir);
    if step[0] == "cargo" {
        cmd.env("CARGO_TARGET_DIR", dir.join("target"));
    }
    cmd
}

/// Finds `name` on PATH (or, when it contains a `/`, relative to `dir`).
pub fn which(name: &str, dir: &Path) -> Option<PathBuf> {
    if name.contains('/') {
        let path = resolve_program(name, dir);
        return is_executable(&path).then_some(path);
    }
    let path_var = std::env::var_os("PATH")?;
    std::env::split_paths(&path_var).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// A command shown in backticks for messages.
pub fn show(step: &[String]) -> String {
    format!("`{}`", step.join(" "))
}

/// The last `max_lines` non-empty lines of `text`, each cut to 300 characters.
pub fn tail(text: &str, max_lines: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(max_lines);
    lines[start..]
        .iter()
        .map(|l| {
            if l.chars().count() > 300 {
                let cut: String = l.chars().take(300).collect();
                format!("{cut}…")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    #[test]
    fn cargo_steps_build_where_the_run_commands_look() {
        let dir = Path::new("/peers/rust");
        let target_dir = |cmd: &Command| {
            cmd.get_envs().find(|(k, _)| *k == "CARGO_TARGET_DIR").and_then(|(_, v)| v.map(PathBuf::from))
        };
        let step = ["cargo", "build", "--release"].map(String::from);
        // Set on the command itself, so it overrides the caller's CARGO_TARGET_DIR and configs.
        assert_eq!(target_dir(&command(&step, dir)), Some(dir.join("target")));
        let other = ["sh", "-c", "true"].map(String::from);
        assert_eq!(target_dir(&command(&other, dir)), None, "only cargo steps are redirected");
    }

    #[test]
    fn captures_output_and_exit_code() {
        let done = run(&mut sh("echo out; echo err >&2; exit 3"), Duration::from_secs(30)).unwrap();
        assert_eq!(done.exit, Exit::Code(3));
        assert_eq!(done.stdout, "out\n");
        assert_eq!(done.stderr, "err\n");
        assert!(!done.exit.success());
        assert_eq!(done.exit.describe(), "exited with status 3");
    }

    #[test]
    fn kills_the_whole_group_on_timeout() {
        // The background sleep holds stdout open; only a group kill lets the readers finish.
        let done = run(&mut sh("sleep 30 & echo started; sleep 30"), Duration::from_millis(300)).unwrap();
        assert_eq!(done.exit, Exit::TimedOut(Duration::from_millis(300)));
        assert_eq!(done.stdout, "started\n");
    }

    #[test]
    fn stop_sends_sigterm_to_the_group() {
        let mut running = Running::spawn(&mut sh("sleep 30")).unwrap();
        assert!(running.try_exit().is_none());
        let done = running.stop(Duration::from_secs(10));
        assert_eq!(done.exit, Exit::Signal(sys::SIGTERM));
    }

    #[test]
    fn resolves_relative_programs_against_the_manifest_dir() {
        let dir = Path::new("/peers/go");
        assert_eq!(resolve_program("bin/x", dir), PathBuf::from("/peers/go/bin/x"));
        assert_eq!(resolve_program("go", dir), PathBuf::from("go"));
        assert_eq!(resolve_program("/usr/bin/go", dir), PathBuf::from("/usr/bin/go"));
        assert!(which("sh", dir).is_some());
        assert!(which("definitely-not-a-program-7f3a", dir).is_none());
    }

    #[test]
    fn tail_keeps_last_non_empty_lines() {
        assert_eq!(tail("a\n\nb\nc\n\n", 2), "b\nc");
        assert_eq!(tail("", 3), "");
        let long = "x".repeat(400);
        assert_eq!(tail(&long, 1).chars().count(), 301);
    }
}
