//! What every server here shares: a scratch directory, a free port, a child process in a
//! process group of its own with a parent-death signal, and its stop (a signal, a grace
//! period, SIGKILL to the group, the directory removed).

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::{error, Error, Result};

/// How long a server has to exit after its stop signal before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A free loopback port: bound on port 0, read, released (another process may take it in
/// between, as with any such probe; the server's start then fails and says so).
pub fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// A directory of its own under the system's temporary directory, removed when dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(kind: &str) -> Result<Scratch> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{kind}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).map_err(|e| Error(format!("cannot create {}: {e}", path.display())))?;
        Ok(Scratch(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A server process: its own process group, stdout and stderr into `log`, and
/// `death_signal` sent to it by the kernel if the thread that started it dies first.
pub(crate) struct Server {
    child: Child,
    stop_signal: libc::c_int,
    log: PathBuf,
}

impl Server {
    pub(crate) fn spawn(cmd: &mut Command, log: &Path, death_signal: libc::c_int) -> Result<Server> {
        let file =
            fs::File::create(log).map_err(|e| Error(format!("cannot create {}: {e}", log.display())))?;
        let err = file.try_clone().map_err(|e| Error(format!("cannot duplicate the log file: {e}")))?;
        cmd.stdin(Stdio::null()).stdout(file).stderr(err).process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and makes one system
        // call, prctl(2), which is async-signal-safe and touches no memory of the parent. It
        // runs after the child's user and group are set (std applies `uid`/`gid` before the
        // `pre_exec` closures), so the setting survives: a change of credentials clears it.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, death_signal as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd.spawn().map_err(|e| Error(format!("cannot start {program}: {e}")))?;
        Ok(Server { child, stop_signal: death_signal, log: log.to_path_buf() })
    }

    /// The server's pid, which is also its process group's id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Err` with the log's tail if the server has exited.
    pub(crate) fn check_alive(&mut self, what: &str) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => error(format!("{what} exited ({status}): {}", self.log_tail())),
            Err(e) => error(format!("{what} cannot be waited for: {e}")),
        }
    }

    /// The log, from `offset` on.
    pub(crate) fn log_since(&self, offset: u64) -> String {
        let mut text = String::new();
        if let Ok(mut file) = fs::File::open(&self.log) {
            if file.seek(SeekFrom::Start(offset)).is_ok() {
                let _ = file.read_to_string(&mut text);
            }
        }
        text
    }

    /// The last lines of the log, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        let text = self.log_since(0);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(8)..].join(" | ")
    }

    /// Waits until `ready` holds, the server exits (an error with its log), or `limit` passes.
    pub(crate) fn wait_ready(
        &mut self,
        what: &str,
        limit: Duration,
        mut ready: impl FnMut(&Server) -> bool,
    ) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            self.check_alive(what)?;
            if ready(self) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return error(format!("{what} was not ready within {limit:?}: {}", self.log_tail()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server: its stop signal, then SIGKILL to its group after the grace period.
    pub(crate) fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        signal(self.pid(), self.stop_signal);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        kill_group(self.pid());
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends `sig` to process `pid`.
fn signal(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) takes plain integers; `pid` is a child of this process (positive).
        unsafe { libc::kill(pid, sig) };
    }
}

/// SIGKILL to every process left in the group `pgid` (workers the server forked).
fn kill_group(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        if pgid > 1 {
            // SAFETY: kill(2) takes plain integers; the negative pid names exactly the group
            // `pgid` (> 1), the server's own.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
}

/// The program `name` in one of `dirs`, then on PATH.
pub(crate) fn find_program(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    dirs.iter().cloned().chain(std::env::split_paths(&path)).map(|d| d.join(name)).find(|p| executable(p))
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}
