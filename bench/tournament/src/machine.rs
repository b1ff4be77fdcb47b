//! The machine the tournament ran on, for the report's header: cores, CPU model, memory,
//! kernel, and the Rust compiler. Everything is read from `/proc` or small commands; anything
//! unreadable shows as "unknown" rather than failing the tournament.

use std::fs;
use std::process::Command;
use std::time::Duration;

use crate::proc;

/// What the report says about the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// Logical CPUs available to the harness.
    pub cores: usize,
    /// Logical CPUs listed in /proc/cpuinfo.
    pub cpuinfo_processors: usize,
    /// The CPU's `model name`.
    pub cpu_model: String,
    /// MemTotal, human readable.
    pub memory: String,
    /// `uname -srvmo`.
    pub kernel: String,
    /// `rustc --version`.
    pub rustc: String,
}

const UNKNOWN: &str = "unknown";

impl Machine {
    /// Reads the machine.
    pub fn probe() -> Machine {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kernel = command_line(&["uname", "-srvmo"]).unwrap_or_else(|| {
            fs::read_to_string("/proc/version")
                .map(|v| v.trim().to_string())
                .unwrap_or_else(|_| UNKNOWN.into())
        });
        Machine {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpuinfo_processors: cpuinfo.lines().filter(|l| l.starts_with("processor")).count(),
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| UNKNOWN.into()),
            memory: mem_total(&meminfo).unwrap_or_else(|| UNKNOWN.into()),
            kernel,
            rustc: command_line(&["rustc", "--version"]).unwrap_or_else(|| UNKNOWN.into()),
        }
    }
}

/// The first line a command prints, if it runs and succeeds.
pub fn command_line(argv: &[&str]) -> Option<String> {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    let done = proc::run(&mut cmd, Duration::from_secs(30)).ok()?;
    let text = if done.stdout.trim().is_empty() { done.stderr } else { done.stdout };
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.to_string())
}

/// `model name` (x86) or `Model`/`CPU part` lines (arm) from /proc/cpuinfo.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "Hardware", "CPU part"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    })
}

/// MemTotal from /proc/meminfo, in GiB.
pub fn mem_total(meminfo: &str) -> Option<String> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(format!("{:.1} GiB", kib / (1024.0 * 1024.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_model_and_memory() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
        let meminfo = "MemTotal:       24588412 kB\nMemFree:        1 kB\n";
        assert_eq!(mem_total(meminfo).as_deref(), Some("23.4 GiB"));
        assert_eq!(mem_total(""), None);
    }

    #[test]
    fn probes_this_machine() {
        let m = Machine::probe();
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty());
    }
}
