//! CPU time of a process tree, from `/proc/<pid>/stat`.
//!
//! The http suite charges a server with the CPU time of its process and every descendant
//! (workers forked by a pre-fork server, the real server under a wrapper script). For each
//! process of the tree it sums `utime + stime` (all threads of the process) and
//! `cutime + cstime` (children it has already waited for), so a worker that exits between the
//! two samples moves its time to its parent instead of losing it. Only the difference of two
//! samples is meaningful.

use std::collections::{HashMap, HashSet};
use std::fs;

use crate::sys;

/// The fields of one `/proc/<pid>/stat` that the tree sum needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The parent's pid.
    pub ppid: u32,
    /// `utime + stime + cutime + cstime`, in clock ticks.
    pub ticks: u64,
}

/// Parses the text of `/proc/<pid>/stat`.
///
/// The command name (field 2) is in parentheses and may itself contain spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
    let field = |n: usize| fields.get(n - 3);
    let ppid = field(4)?.parse().ok()?;
    let mut ticks = 0u64;
    for n in 14..=17 {
        // cutime and cstime are signed in the kernel's format; they are never negative here.
        let value: i64 = field(n)?.parse().ok()?;
        ticks += u64::try_from(value).unwrap_or(0);
    }
    Some(Stat { ppid, ticks })
}

fn all_processes() -> HashMap<u32, Stat> {
    let mut procs = HashMap::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return procs;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // A process may exit between the listing and the read; it is then simply absent.
        if let Some(stat) = fs::read_to_string(entry.path().join("stat")).ok().as_deref().and_then(parse_stat)
        {
            procs.insert(pid, stat);
        }
    }
    procs
}

/// Sums the ticks of `root` and all its descendants in `procs`.
pub fn tree_ticks(root: u32, procs: &HashMap<u32, Stat>) -> u64 {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, stat) in procs {
        children.entry(stat.ppid).or_default().push(pid);
    }
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    let mut total = 0;
    while let Some(pid) = stack.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if let Some(stat) = procs.get(&pid) {
            total += stat.ticks;
        }
        if let Some(kids) = children.get(&pid) {
            stack.extend(kids);
        }
    }
    total
}

/// CPU time of `root` and its descendants now, in microseconds.
pub fn tree_cpu_us(root: u32) -> f64 {
    let ticks = tree_ticks(root, &all_processes());
    ticks as f64 * 1e6 / sys::clock_ticks_per_second() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_with_a_tricky_name() {
        let text = "4242 (my (odd) srv) S 4200 4242 4200 0 -1 4194560 100 0 0 0 \
                    250 50 7 3 20 0 4 0 123456 1000000 200 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0";
        assert_eq!(parse_stat(text), Some(Stat { ppid: 4200, ticks: 250 + 50 + 7 + 3 }));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S"), None);
    }

    #[test]
    fn sums_the_tree_and_nothing_else() {
        let procs: HashMap<u32, Stat> = [
            (10, Stat { ppid: 1, ticks: 5 }),
            (11, Stat { ppid: 10, ticks: 7 }),
            (12, Stat { ppid: 11, ticks: 11 }),
            (20, Stat { ppid: 1, ticks: 1000 }),
        ]
        .into_iter()
        .collect();
        assert_eq!(tree_ticks(10, &procs), 23);
        assert_eq!(tree_ticks(11, &procs), 18);
        assert_eq!(tree_ticks(99, &procs), 0);
    }

    #[test]
    fn reads_our_own_process() {
        let me = std::process::id();
        let text = fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let stat = parse_stat(&text).unwrap();
        assert!(stat.ppid > 0);
        // Our own CPU time is a finite, non-negative number of microseconds.
        assert!(tree_cpu_us(me) >= 0.0);
    }
}
