//! The few libc calls the harness needs: signals to process groups, the effective user, and
//! the kernel's clock-tick rate. Each wrapper is safe to call with any argument.

/// Sends `signal` to every process of the process group `pgid`.
///
/// Returns false when no process was signalled (the group is gone, or `pgid` is not a valid
/// group id). A `pgid` of 0 or below is refused, since `kill(0)` and `kill(-1)` would signal
/// the harness itself or every process it may signal.
pub fn kill_group(pgid: u32, signal: i32) -> bool {
    let Ok(pgid) = i32::try_from(pgid) else {
        return false;
    };
    if pgid <= 1 {
        return false;
    }
    // SAFETY: kill(2) takes plain integers and has no memory-safety preconditions; the
    // negative pid addresses exactly the group `pgid`, which is > 1 (checked above).
    unsafe { libc::kill(-pgid, signal) == 0 }
}

/// Sends `signal` to process `pid` (refused for 0 and 1, as [`kill_group`] refuses them).
pub fn signal(pid: u32, signal: i32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 1 {
        return false;
    }
    // SAFETY: kill(2) takes plain integers and has no memory-safety preconditions; `pid` is a
    // single process (> 1).
    unsafe { libc::kill(pid, signal) == 0 }
}

/// Whether process `pid` is still running: it exists and is not a zombie waiting to be reaped.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Whether the harness runs as root (and so may call apt-get).
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Clock ticks per second, the unit of `utime`/`stime` in `/proc/<pid>/stat`.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf(3) with a valid name constant has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// The CPUs this process may run on (its affinity mask), in increasing order; empty when the
/// mask cannot be read.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is a plain bit array for which all-zero bytes are a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size and pointer describe `set`, which lives
    // for the whole call.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the capacity of `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// `SIGTERM`, re-exported so callers need no libc import.
pub const SIGTERM: i32 = libc::SIGTERM;
/// `SIGKILL`, re-exported so callers need no libc import.
pub const SIGKILL: i32 = libc::SIGKILL;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_dangerous_groups() {
        assert!(!kill_group(0, 0));
        assert!(!kill_group(1, 0));
        assert!(!kill_group(u32::MAX, 0));
    }

    #[test]
    fn this_process_may_run_somewhere() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn clock_ticks_are_positive() {
        assert!(clock_ticks_per_second() > 0);
    }
}
