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
    /// The 1, 5 and 15 minute load averages when the tournament started.
    pub load: String,
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
            load: load_average().unwrap_or_else(|| UNKNOWN.into()),
        }
    }
}

/// Other processes' runnable tasks right now: the running count of /proc/loadavg's fourth
/// field (`"2/345"`) minus the thread reading it. Sampled between runs, when no benchmark
/// process of the tournament is alive, it tells how much other work competed for the CPUs.
pub fn others_runnable() -> Option<u32> {
    parse_runnable(&fs::read_to_string("/proc/loadavg").ok()?)
}

/// The running count of a /proc/loadavg line, minus one (the reader).
pub fn parse_runnable(loadavg: &str) -> Option<u32> {
    let field = loadavg.split_whitespace().nth(3)?;
    let running: u32 = field.split('/').next()?.parse().ok()?;
    Some(running.saturating_sub(1))
}

/// How busy the machine was with other work, from samples of [`others_runnable`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contention {
    /// The samples.
    pub samples: Vec<u32>,
}

impl Contention {
    /// The mean number of other runnable tasks, if sampled.
    pub fn mean(&self) -> Option<f64> {
        (!self.samples.is_empty())
            .then(|| self.samples.iter().map(|&s| f64::from(s)).sum::<f64>() / self.samples.len() as f64)
    }

    /// Whether other work took, on average, more than a quarter of `cores`.
    pub fn busy(&self, cores: usize) -> bool {
        self.mean().is_some_and(|m| m > cores.max(1) as f64 / 4.0)
    }
}

/// The 1, 5 and 15 minute load averages, from /proc/loadavg (`"0.52 0.58 0.59"`).
pub fn load_average() -> Option<String> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    (fields.len() == 3).then(|| fields.join(" "))
}

/// The first number of a load average string.
pub fn one_minute_load(load: &str) -> Option<f64> {
    load.split_whitespace().next()?.parse().ok()
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
    fn load_average_and_contention() {
        assert_eq!(one_minute_load("2.50 1.00 0.50"), Some(2.5));
        assert_eq!(one_minute_load("unknown"), None);
        let m = Machine::probe();
        assert!(m.load == UNKNOWN || one_minute_load(&m.load).is_some(), "{}", m.load);
        assert_eq!(parse_runnable("0.52 0.58 0.59 3/345 9876"), Some(2));
        assert_eq!(parse_runnable("0.52 0.58 0.59 0/345 9876"), Some(0));
        assert_eq!(parse_runnable("garbage"), None);
        assert!(others_runnable().is_some());
        let quiet = Contention { samples: vec![0, 1, 0, 0] };
        assert_eq!(quiet.mean(), Some(0.25));
        assert!(!quiet.busy(2));
        let loaded = Contention { samples: vec![3, 4] };
        assert!(loaded.busy(2));
        assert!(!Contention::default().busy(2));
    }

    #[test]
    fn probes_this_machine() {
        let m = Machine::probe();
        assert!(m.cores >= 1);
        assert!(!m.kernel.is_empty());
    }
}
