//! The command line (clap derive) and how it becomes a [`Config`].
//!
//! Paths: the default `--out` (`target/tournament`) and `--peers-dir` (`bench/peers`) are
//! relative to the repository root, found by walking up from this crate's directory (or,
//! when the binary has moved, from the current directory) to the `Cargo.toml` that holds
//! `[workspace]`. Paths given on the command line are relative to the current directory.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::driver::Config;
use crate::http::HttpSettings;
use crate::suites::Suite;

/// Builds and runs spindle and its peers side by side and writes REPORT.md.
#[derive(Parser, Debug, Clone)]
#[command(name = "tournament", version, about)]
pub struct Args {
    /// Suite to run; repeat for several (default: all, in the order fibers, tcp, http, rpc, blocking).
    #[arg(long = "suite", value_enum, value_name = "SUITE")]
    pub suites: Vec<Suite>,
    /// Every suite in seconds, for CI smoke tests: 1 run, no warm-up, the manifests' `quick`
    /// arguments, 1 s wrk runs. The figures are not benchmarks.
    #[arg(long)]
    pub quick: bool,
    /// Also print every result line (results.jsonl) on stdout.
    #[arg(long)]
    pub json: bool,
    /// Measured runs per competitor [default: 5, or 1 with --quick; at least 3 without it].
    #[arg(long, value_name = "N")]
    pub runs: Option<usize>,
    /// Never install anything (apt-get, pip, go or cargo downloads); a missing toolchain
    /// becomes a row saying why.
    #[arg(long)]
    pub no_install: bool,
    /// Only run this competitor; repeat for several (default: all).
    #[arg(long = "competitor", value_name = "NAME")]
    pub competitors: Vec<String>,
    /// Where results.jsonl, REPORT.md and charts/ go [default: target/tournament in the repository].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Where the manifests are (LANG/SUITE.peer.toml) [default: bench/peers in the repository].
    #[arg(long, value_name = "DIR")]
    pub peers_dir: Option<PathBuf>,
    /// Seconds of each measured wrk run in the http suite [default: 5, or 1 with --quick].
    #[arg(long, value_name = "SECS")]
    pub wrk_duration: Option<u64>,
    /// Seconds of the wrk warm-up before each measured run [default: 2, or 1 with --quick].
    #[arg(long, value_name = "SECS")]
    pub wrk_warmup: Option<u64>,
    /// Show no progress bar and no log lines.
    #[arg(long)]
    pub no_progress: bool,
    /// Serve the blocking suite's spindle-http hello server on 127.0.0.1:$PORT with $WORKERS
    /// workers, instead of running a tournament (the harness starts itself so).
    #[arg(long, hide = true)]
    pub serve_hello: bool,
}

/// The default number of measured runs.
pub const DEFAULT_RUNS: usize = 5;
/// The fewest measured runs outside quick mode.
pub const MIN_RUNS: usize = 3;

fn is_workspace_root(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .map(|text| text.lines().any(|l| l.trim() == "[workspace]"))
        .unwrap_or(false)
}

fn walk_up(start: &Path) -> Option<PathBuf> {
    start.ancestors().find(|dir| is_workspace_root(dir)).map(Path::to_path_buf)
}

/// The repository root: the nearest ancestor of this crate (or of the current directory)
/// whose Cargo.toml declares `[workspace]`.
pub fn repo_root() -> Result<PathBuf> {
    if let Some(root) = walk_up(Path::new(env!("CARGO_MANIFEST_DIR"))) {
        return Ok(root);
    }
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    walk_up(&cwd).context("cannot find the workspace root (a Cargo.toml with [workspace])")
}

impl Args {
    /// Checks the flags and fills in the defaults; `command` is shown in the report.
    pub fn into_config(self, command: String) -> Result<Config> {
        let runs = match (self.runs, self.quick) {
            (Some(0), _) => bail!("--runs must be at least 1"),
            (Some(n), false) if n < MIN_RUNS => {
                bail!("--runs must be at least {MIN_RUNS} outside --quick (got {n})")
            }
            (Some(n), _) => n,
            (None, true) => 1,
            (None, false) => DEFAULT_RUNS,
        };
        let mut http = HttpSettings::new(self.quick);
        if let Some(secs) = self.wrk_duration {
            if secs == 0 {
                bail!("--wrk-duration must be at least 1 second (wrk takes whole seconds)");
            }
            http.duration_s = secs;
        }
        if let Some(secs) = self.wrk_warmup {
            http.warmup_s = secs;
        }
        let (out, peers_dir) = match (self.out, self.peers_dir) {
            (Some(out), Some(peers)) => (out, peers),
            (out, peers) => {
                let root = repo_root()?;
                (
                    out.unwrap_or_else(|| root.join("target/tournament")),
                    peers.unwrap_or_else(|| root.join("bench/peers")),
                )
            }
        };
        // Absolute: the manifests' relative `run` paths are resolved from the manifest's
        // directory, which is the child's working directory (a relative --peers-dir made
        // `../x` point from the wrong place).
        let peers_dir = std::path::absolute(&peers_dir)
            .with_context(|| format!("--peers-dir {}", peers_dir.display()))?;
        let suites = if self.suites.is_empty() {
            Suite::ALL.to_vec()
        } else {
            Suite::ALL.into_iter().filter(|s| self.suites.contains(s)).collect()
        };
        Ok(Config {
            peers_dir,
            out,
            suites,
            quick: self.quick,
            json: self.json,
            runs,
            warmup: !self.quick,
            install: !self.no_install,
            competitors: self.competitors,
            http,
            command,
            progress: !self.no_progress,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Result<Config> {
        let mut argv = vec!["tournament", "--out", "/tmp/o", "--peers-dir", "/tmp/p"];
        argv.extend(args);
        Args::try_parse_from(argv)?.into_config("tournament".into())
    }

    #[test]
    fn defaults() {
        let c = config(&[]).unwrap();
        assert_eq!(c.suites, Suite::ALL.to_vec());
        assert_eq!((c.runs, c.warmup, c.quick, c.install), (5, true, false, true));
        assert_eq!((c.http.warmup_s, c.http.duration_s), (2, 5));
        assert_eq!(c.out, PathBuf::from("/tmp/o"));
        assert!(c.competitors.is_empty());
    }

    #[test]
    fn quick_mode_is_one_run_without_warm_up() {
        let c = config(&["--quick", "--no-install", "--json"]).unwrap();
        assert_eq!((c.runs, c.warmup, c.install, c.json), (1, false, false, true));
        assert_eq!((c.http.warmup_s, c.http.duration_s), (1, 1));
        assert_eq!(config(&["--quick", "--runs", "2"]).unwrap().runs, 2);
    }

    #[test]
    fn suites_keep_report_order_and_competitors_repeat() {
        let c = config(&[
            "--suite",
            "rpc",
            "--suite",
            "fibers",
            "--competitor",
            "spindle",
            "--competitor",
            "tokio",
        ])
        .unwrap();
        assert_eq!(c.suites, vec![Suite::Fibers, Suite::Rpc]);
        assert_eq!(c.competitors, vec!["spindle", "tokio"]);
    }

    #[test]
    fn rejects_too_few_runs_and_unknown_suites() {
        assert!(config(&["--runs", "2"]).unwrap_err().to_string().contains("at least 3"));
        assert!(config(&["--runs", "0", "--quick"]).is_err());
        assert!(config(&["--suite", "gpu"]).is_err());
        assert!(config(&["--wrk-duration", "0"]).is_err());
    }

    #[test]
    fn a_relative_peers_dir_becomes_absolute() {
        let argv = ["tournament", "--out", "o", "--peers-dir", "some/peers"];
        let c = Args::try_parse_from(argv).unwrap().into_config("tournament".into()).unwrap();
        assert!(c.peers_dir.is_absolute());
        assert!(c.peers_dir.ends_with("some/peers"));
    }

    #[test]
    fn finds_the_workspace_root() {
        let root = repo_root().unwrap();
        assert!(is_workspace_root(&root));
        assert!(Path::new(env!("CARGO_MANIFEST_DIR")).starts_with(&root));
    }
}
