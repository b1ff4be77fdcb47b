//! Child processes for fibers and tasks: std's [`Command`](std::process::Command) surface,
//! with waits that park the fiber (a pidfd on the reactor) and piped standard streams that are
//! spindle streams (non-blocking pipe ends on the reactor).
//!
//! - **Fibers** call [`Command::output`], [`Command::status`], [`Child::wait`], and
//!   `Read`/`Write` on the pipes: the fiber parks, its worker runs others.
//! - **Async tasks** use [`Command::output_async`], [`Command::status_async`],
//!   [`Child::wait_async`], [`Child::wait_with_output_async`] and `futures-io`'s
//!   `AsyncRead`/`AsyncWrite` on the pipes.
//!
//! ```
//! use spindle::process::Command;
//!
//! let rt = spindle::Runtime::new().unwrap();
//! let out = rt.block_on(|| Command::new("sh").args(["-c", "echo hi; exit 3"]).output()).unwrap();
//! assert_eq!(out.stdout, b"hi\n");
//! assert_eq!(out.status.code(), Some(3));
//! ```

// # Invariants
//
// - **The spawn is std's.** [`Command`] wraps a [`std::process::Command`], which starts the
//   child (every descriptor it opens is close-on-exec, so the child inherits only its three
//   standard streams and what was explicitly passed). The spawn runs on the calling thread,
//   as std's and tokio's do: the parent waits only until the child has called `exec` (or
//   failed to), not for the child to run.
// - **The child gets blocking streams.** Only the parent's pipe ends are made non-blocking
//   (module `pipe`); a spindle pipe end passed on to another child is made blocking first.
// - **Waits never block a worker**: the pidfd of module `child`, waited on like a socket.
// - **A dropped `Child` is neither killed nor reaped**, as with std (module `child`).

mod child;
mod pipe;

pub use child::Child;
pub use pipe::{ChildStderr, ChildStdin, ChildStdout};
pub use std::process::{ExitStatus, Output, Stdio};

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::Path;

use crate::sched::caller::blocking_caller;

/// A process builder ([`std::process::Command`]'s surface): program, arguments, environment,
/// working directory and standard streams; [`spawn`](Self::spawn) starts a [`Child`],
/// [`output`](Self::output) and [`status`](Self::status) also wait for it.
///
/// ```
/// use std::io::{Read, Write};
/// use spindle::process::{Command, Stdio};
///
/// let rt = spindle::Runtime::new().unwrap();
/// let upper = rt.block_on(|| {
///     let mut child =
///         Command::new("tr").arg("a-z").arg("A-Z").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
///     child.stdin.take().unwrap().write_all(b"fiber")?; // dropped: tr sees end of input
///     let mut upper = String::new();
///     child.stdout.take().unwrap().read_to_string(&mut upper)?;
///     assert!(child.wait()?.success());
///     std::io::Result::Ok(upper)
/// });
/// assert_eq!(upper.unwrap(), "FIBER");
/// ```
pub struct Command {
    std: std::process::Command,
    /// Which streams the caller chose; the others take the default of the call (inherited for
    /// `spawn` and `status`; null stdin and piped stdout and stderr for `output`).
    stdin_set: bool,
    stdout_set: bool,
    stderr_set: bool,
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.std.fmt(f)
    }
}

impl From<std::process::Command> for Command {
    /// Takes over a std builder; streams it set count as chosen only if set again here.
    fn from(std: std::process::Command) -> Command {
        Command { std, stdin_set: false, stdout_set: false, stderr_set: false }
    }
}

impl Command {
    /// A builder for running `program` (looked up in `PATH` if it has no `/`), with no
    /// arguments, the parent's environment and working directory.
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command::from(std::process::Command::new(program))
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.std.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.std.args(args);
        self
    }

    /// Sets an environment variable of the child.
    pub fn env(&mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> &mut Command {
        self.std.env(key, val);
        self
    }

    /// Sets environment variables of the child.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.std.envs(vars);
        self
    }

    /// Removes an environment variable from the child's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.std.env_remove(key);
        self
    }

    /// Clears the child's environment (variables set after this are kept).
    pub fn env_clear(&mut self) -> &mut Command {
        self.std.env_clear();
        self
    }

    /// Sets the child's working directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.std.current_dir(dir);
        self
    }

    /// The child's standard input: [`Stdio::piped`] for a [`ChildStdin`], `null`, `inherit`,
    /// or a descriptor (a spindle pipe end converts with `Stdio::try_from`).
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stdin(cfg);
        self.stdin_set = true;
        self
    }

    /// The child's standard output ([`Stdio::piped`] for a [`ChildStdout`]).
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stdout(cfg);
        self.stdout_set = true;
        self
    }

    /// The child's standard error ([`Stdio::piped`] for a [`ChildStderr`]).
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.std.stderr(cfg);
        self.stderr_set = true;
        self
    }

    /// The std builder, for what this one does not wrap (`CommandExt`: `uid`, `process_group`,
    /// `pre_exec`, …).
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.std
    }

    /// The std builder.
    pub fn as_std(&self) -> &std::process::Command {
        &self.std
    }

    /// Starts the child (on the calling thread, as std does: module doc). Streams not chosen
    /// are inherited. Callable from fibers, tasks and threads alike: it does not wait for the
    /// child.
    pub fn spawn(&mut self) -> io::Result<Child> {
        Child::from_std(self.std.spawn()?)
    }

    /// Starts the child with `output`'s defaults for the streams not chosen (null stdin, piped
    /// stdout and stderr), then puts back `spawn`'s defaults (inherited) for later calls.
    fn spawn_for_output(&mut self) -> io::Result<Child> {
        let (stdin, stdout, stderr) = (self.stdin_set, self.stdout_set, self.stderr_set);
        if !stdin {
            self.std.stdin(Stdio::null());
        }
        if !stdout {
            self.std.stdout(Stdio::piped());
        }
        if !stderr {
            self.std.stderr(Stdio::piped());
        }
        let spawned = self.std.spawn();
        if !stdin {
            self.std.stdin(Stdio::inherit());
        }
        if !stdout {
            self.std.stdout(Stdio::inherit());
        }
        if !stderr {
            self.std.stderr(Stdio::inherit());
        }
        Child::from_std(spawned?)
    }

    /// Runs the child to its end and collects its status, standard output and standard error
    /// (piped unless chosen otherwise; standard input is null unless chosen). The fiber parks
    /// meanwhile.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`output_async`](Self::output_async) there.
    #[track_caller]
    pub fn output(&mut self) -> io::Result<Output> {
        blocking_caller("child wait");
        self.spawn_for_output()?.wait_with_output()
    }

    /// The future-side [`output`](Self::output); the child starts at the first poll.
    pub async fn output_async(&mut self) -> io::Result<Output> {
        self.spawn_for_output()?.wait_with_output_async().await
    }

    /// Runs the child to its end (streams inherited unless chosen) and returns its status.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`status_async`](Self::status_async) there.
    #[track_caller]
    pub fn status(&mut self) -> io::Result<ExitStatus> {
        blocking_caller("child wait");
        self.spawn()?.wait()
    }

    /// The future-side [`status`](Self::status); the child starts at the first poll.
    pub async fn status_async(&mut self) -> io::Result<ExitStatus> {
        self.spawn()?.wait_async().await
    }
}
