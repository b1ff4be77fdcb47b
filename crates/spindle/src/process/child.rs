//! [`Child`]: a running child process, waited for through its pidfd on the reactor.
//!
//! # Invariants
//!
//! - **Waiting parks, never blocks a worker.** Right after the spawn the child's pidfd
//!   (`pidfd_open(2)`) is wrapped as an `IoSource` (module `net::source`): it becomes readable
//!   when the child exits, so a wait is "try `waitpid(WNOHANG)`; on not-yet, wait for
//!   readability" — the loop a socket read runs, parking the fiber or registering the task's
//!   waker. The child is reaped by std's `Child::try_wait` (which records the status, so a
//!   later `wait`, `try_wait` or `kill` behaves as std's).
//! - **No pid reuse.** The pidfd is opened while the child cannot have been reaped yet (only
//!   this `Child` reaps it), so it refers to this child even if it has already exited.
//! - **Without pidfds** (a kernel before 5.3, or a sandbox that forbids the call) a wait polls
//!   `waitpid(WNOHANG)` with a growing pause (1 ms up to 50 ms) that parks the fiber or
//!   sleeps the task: correct, only slower to notice the exit.
//! - **Drop is std's.** Dropping a `Child` neither kills nor reaps it: the process runs on, and
//!   once it exits it stays a zombie until this process exits (or reaps it some other way),
//!   as with std's `Child`. Wait for children you start.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::{ExitStatus, Output};
use std::task::Poll;
use std::time::Duration;

use socket2::Socket;

use super::pipe::{poll_read_to_end, ChildStderr, ChildStdin, ChildStdout};
use crate::net::IoSource;
use crate::reactor::io::Direction;
use crate::sched::caller::{blocking_caller, Caller};

/// A child process started by [`Command::spawn`](super::Command::spawn) (or taken over from
/// std with [`from_std`](Self::from_std)). Its piped standard streams are the public fields,
/// as in std.
pub struct Child {
    std: std::process::Child,
    /// Readable once the child has exited; `None` where pidfds are unavailable.
    pidfd: Option<IoSource>,
    /// The write end of the child's standard input, if it was piped.
    pub stdin: Option<ChildStdin>,
    /// The read end of the child's standard output, if it was piped.
    pub stdout: Option<ChildStdout>,
    /// The read end of the child's standard error, if it was piped.
    pub stderr: Option<ChildStderr>,
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child").field("pid", &self.std.id()).field("pidfd", &self.pidfd.is_some()).finish()
    }
}

/// `pidfd_open(pid, 0)`: a descriptor (close-on-exec) that becomes readable when `pid` exits.
fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags by value and touches no memory of ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0 as libc::c_long) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the call just returned this descriptor, open and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The child's status if it has exited (and reaps it), `WouldBlock` if it has not.
fn exited(child: &mut std::process::Child) -> io::Result<ExitStatus> {
    child.try_wait()?.ok_or_else(|| io::ErrorKind::WouldBlock.into())
}

/// The pauses of a wait without pidfd.
const FIRST_PAUSE: Duration = Duration::from_millis(1);
const LONGEST_PAUSE: Duration = Duration::from_millis(50);

impl Child {
    /// Takes over a child started by std: its piped streams become spindle streams. For
    /// `CommandExt` options, [`Command::as_std_mut`](super::Command::as_std_mut) keeps the
    /// spindle builder instead.
    pub fn from_std(mut std: std::process::Child) -> io::Result<Child> {
        let stdin = std.stdin.take().map(ChildStdin::from_std).transpose()?;
        let stdout = std.stdout.take().map(ChildStdout::from_std).transpose()?;
        let stderr = std.stderr.take().map(ChildStderr::from_std).transpose()?;
        let pidfd = match pidfd_open(std.id()) {
            Ok(fd) => Some(IoSource::new(Socket::from(fd), false)?),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM | libc::EACCES)) => None,
            Err(e) => return Err(e),
        };
        Ok(Child { std, pidfd, stdin, stdout, stderr })
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.std.id()
    }

    /// Sends `SIGKILL` to the child ([`std::process::Child::kill`]); a child already reaped
    /// is not signalled (its pid may belong to another process by now).
    pub fn kill(&mut self) -> io::Result<()> {
        self.std.kill()
    }

    /// The exit status if the child has exited (reaping it), `None` if it is still running.
    /// Never waits.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.std.try_wait()
    }

    /// Waits for the child to exit and returns its status, closing its standard input first
    /// (as std does, so that a child reading it sees end of file). In a fiber the fiber parks
    /// until the child's pidfd reports the exit; on a plain thread the thread blocks.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use [`wait_async`](Self::wait_async) there.
    #[track_caller]
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        if let Caller::Thread = blocking_caller("child wait") {
            return self.std.wait();
        }
        match &self.pidfd {
            Some(pidfd) => pidfd.blocking(Direction::Read, None, |_| exited(&mut self.std)),
            None => {
                let mut pause = FIRST_PAUSE;
                loop {
                    if let Some(status) = self.std.try_wait()? {
                        return Ok(status);
                    }
                    crate::time::sleep(pause);
                    pause = (pause * 2).min(LONGEST_PAUSE);
                }
            }
        }
    }

    /// The future-side [`wait`](Self::wait), for async tasks (polled on a spindle worker).
    pub async fn wait_async(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        match &self.pidfd {
            Some(pidfd) => poll_fn(|cx| pidfd.poll_io(cx, Direction::Read, |_| exited(&mut self.std))).await,
            None => {
                let mut pause = FIRST_PAUSE;
                loop {
                    if let Some(status) = self.std.try_wait()? {
                        return Ok(status);
                    }
                    crate::time::sleep_future(pause).await;
                    pause = (pause * 2).min(LONGEST_PAUSE);
                }
            }
        }
    }

    /// Closes the child's standard input, reads its standard output and error to their ends
    /// (both at once, so that neither pipe fills and stalls the child), then waits for it.
    /// Streams that were not piped come back empty.
    ///
    /// # Panics
    ///
    /// In an async task on a spindle worker: use
    /// [`wait_with_output_async`](Self::wait_with_output_async) there.
    #[track_caller]
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        match blocking_caller("child wait") {
            // In a fiber: the future, polled by the parking fiber.
            Caller::Fiber(_) => crate::task::block_on(self.wait_with_output_async()),
            // On a plain thread: standard error on a second thread, as std does.
            Caller::Thread => {
                drop(self.stdin.take());
                let (stdout, stderr) = (self.stdout.take(), self.stderr.take());
                let (stdout, stderr) = std::thread::scope(|s| {
                    let err = s.spawn(move || read_all(stderr));
                    let out = read_all(stdout);
                    (out, err.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                });
                let status = self.std.wait()?;
                Ok(Output { status, stdout: stdout?, stderr: stderr? })
            }
        }
    }

    /// The future-side [`wait_with_output`](Self::wait_with_output), for async tasks.
    pub async fn wait_with_output_async(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let (stdout, stderr) = (self.stdout.take(), self.stderr.take());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut out_done, mut err_done) = (stdout.is_none(), stderr.is_none());
        poll_fn(|cx| {
            if let (false, Some(s)) = (out_done, &stdout) {
                match poll_read_to_end(&s.source, cx, &mut out) {
                    Poll::Ready(Ok(())) => out_done = true,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {}
                }
            }
            if let (false, Some(s)) = (err_done, &stderr) {
                match poll_read_to_end(&s.source, cx, &mut err) {
                    Poll::Ready(Ok(())) => err_done = true,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {}
                }
            }
            if out_done && err_done {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
        .await?;
        let status = self.wait_async().await?;
        Ok(Output { status, stdout: out, stderr: err })
    }
}

/// Reads a piped stream to its end (blocking-style); nothing if it was not piped.
fn read_all(stream: Option<impl io::Read>) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(mut stream) = stream {
        stream.read_to_end(&mut out)?;
    }
    Ok(out)
}
