//! The data the tournament's report is made of, shared by the modules that make it and the
//! modules that render it: each competitor's [`Entry`] and [`Status`], a suite's
//! [`SuiteReport`] and its lookups ([`View`]), the charts ([`ChartRef`]), and the whole
//! [`ReportInput`].
//!
//! Imports go one way: [`crate::driver`] (which fills these types), [`crate::report`],
//! [`crate::tables`], [`crate::summary`] and [`crate::charts`] (which render them) import this
//! module, and this module imports none of them. Among those five, `driver` uses `report` and
//! `charts`, and `report` uses `tables` and `summary`; nothing points back.

use crate::aggregate::{Aggregate, FailureLine};
use crate::http::HttpSettings;
use crate::machine::{Contention, Machine};
use crate::markdown::{ratio, spread};
use crate::proc::Failure;
use crate::suites::{advantage, better, Suite};

/// The status of a spindle slot whose program does not exist yet.
pub const SPINDLE_MISSING: &str = "not yet implemented (no spindle program for this suite yet)";
/// The status of an expected peer without a manifest.
pub const PEER_MISSING: &str = "no peer program yet (no manifest names it)";

/// What happened to one competitor of a suite.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// It ran; `ok` of `planned` measured runs succeeded, with these problems (failed runs,
    /// malformed output).
    Ran {
        /// Successful measured runs (per case in the http suite, summed).
        ok: usize,
        /// Planned measured runs.
        planned: usize,
        /// What went wrong, if anything.
        problems: Vec<Failure>,
    },
    /// Its manifest could not be set up (or parsed).
    CouldNotRun(Failure),
    /// It has a manifest, but the harness could not measure it for a reason outside it
    /// (wrk is not installed, say). Not counted as the competitor's failure.
    NotMeasured(String),
    /// No manifest names it.
    Missing(String),
}

/// One competitor's row in a suite's "Competitors" table.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The competitor.
    pub name: String,
    /// Its manifest's language (empty when missing).
    pub language: String,
    /// How it is built and run.
    pub notes: String,
    /// What happened.
    pub status: Status,
    /// Cases that were not measured, and why (not the competitor's failure).
    pub skipped: Vec<String>,
}

impl Entry {
    /// The status as one line for the table.
    pub fn status_text(&self) -> String {
        let mut text = self.base_status();
        for skipped in &self.skipped {
            text += &format!("; {skipped}");
        }
        text
    }

    fn base_status(&self) -> String {
        match &self.status {
            Status::Ran { ok, planned, problems } => {
                let runs = format!("ran {ok} of {planned} runs");
                match problems.first() {
                    None => runs,
                    Some(first) if *ok == 0 => format!("failed: {}", first.what),
                    Some(first) => format!("{runs}; {}", first.what),
                }
            }
            Status::CouldNotRun(failure) => format!("could not run: {}", failure.what),
            Status::NotMeasured(reason) => format!("not measured: {reason}"),
            Status::Missing(reason) => reason.clone(),
        }
    }

    /// Whether something went wrong with a competitor that has a manifest.
    pub fn failed(&self) -> bool {
        match &self.status {
            Status::Ran { problems, .. } => !problems.is_empty(),
            Status::CouldNotRun(_) => true,
            Status::NotMeasured(_) | Status::Missing(_) => false,
        }
    }

    /// The `error` of its `results.jsonl` failure line, if it needs one.
    pub fn error(&self) -> Option<String> {
        let mut parts: Vec<String> = match &self.status {
            Status::Ran { problems, .. } => problems.iter().map(Failure::message).collect(),
            Status::CouldNotRun(failure) => vec![format!("could not run: {}", failure.message())],
            Status::NotMeasured(reason) => vec![format!("not measured: {reason}")],
            Status::Missing(reason) => vec![reason.clone()],
        };
        parts.extend(self.skipped.iter().cloned());
        (!parts.is_empty()).then(|| parts.join(" | "))
    }

    /// Its failures, for the report's "Failures" section.
    pub fn problems(&self) -> Vec<&Failure> {
        match &self.status {
            Status::Ran { problems, .. } => problems.iter().collect(),
            Status::CouldNotRun(failure) => vec![failure],
            Status::NotMeasured(_) | Status::Missing(_) => Vec::new(),
        }
    }
}

/// The results of one suite.
#[derive(Debug, Clone)]
pub struct SuiteReport {
    /// The suite.
    pub suite: Suite,
    /// Its aggregated rows, sorted.
    pub rows: Vec<Aggregate>,
    /// Its competitors, spindle's first.
    pub entries: Vec<Entry>,
    /// Its charts.
    pub charts: Vec<ChartRef>,
    /// Notes about the suite as a whole (a chart that failed, a tool that is missing).
    pub notes: Vec<String>,
}

impl SuiteReport {
    /// The lookups of this suite.
    pub fn view(&self) -> View<'_> {
        View { suite: self.suite, rows: &self.rows, entries: &self.entries }
    }

    /// The `results.jsonl` failure lines of this suite.
    pub fn failure_lines(&self) -> Vec<FailureLine> {
        self.entries
            .iter()
            .filter_map(|e| {
                Some(FailureLine {
                    suite: self.suite.name().to_string(),
                    competitor: e.name.clone(),
                    error: e.error()?,
                })
            })
            .collect()
    }
}

/// One toolchain version, from a manifest's `version` command.
#[derive(Debug, Clone, PartialEq)]
pub struct Toolchain {
    /// The manifest's language.
    pub language: String,
    /// Its suite.
    pub suite: Suite,
    /// The first line the version command printed.
    pub version: String,
}

/// Everything the report shows.
#[derive(Debug, Clone)]
pub struct ReportInput {
    /// When the tournament started (UTC).
    pub date: String,
    /// The command line.
    pub command: String,
    /// Quick mode.
    pub quick: bool,
    /// Measured runs per competitor.
    pub runs: usize,
    /// Whether a warm-up run was discarded first.
    pub warmup: bool,
    /// wrk settings.
    pub http: HttpSettings,
    /// The CPUs of the server and of wrk in `hello_1w`.
    pub pinned: (usize, usize),
    /// The machine.
    pub machine: Machine,
    /// The load averages when the tournament ended (the start is in `machine`).
    pub load_end: String,
    /// Other work on the machine, sampled before every run.
    pub contention: Contention,
    /// Toolchain versions.
    pub toolchains: Vec<Toolchain>,
    /// wrk's version, when the http suite ran.
    pub wrk: Option<String>,
    /// Manifests that belong to no known suite, with why.
    pub manifest_errors: Vec<String>,
    /// The suites, in order.
    pub suites: Vec<SuiteReport>,
}

/// A chart written for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartRef {
    /// What it shows.
    pub title: String,
    /// Its path relative to the report (`charts/<name>.svg`).
    pub file: String,
}

/// The rows of one suite, with lookups.
pub struct View<'a> {
    /// The suite.
    pub suite: Suite,
    /// Its aggregated rows.
    pub rows: &'a [Aggregate],
    /// Its competitors, in report order (spindle's first).
    pub entries: &'a [Entry],
}

impl<'a> View<'a> {
    /// The row of `(case, competitor, metric)`.
    pub fn get(&self, case: &str, comp: &str, metric: &str) -> Option<&'a Aggregate> {
        self.rows.iter().find(|r| r.case == case && r.competitor == comp && r.metric == metric)
    }

    /// The median of `(case, competitor, metric)`.
    pub fn value(&self, case: &str, comp: &str, metric: &str) -> Option<f64> {
        self.get(case, comp, metric).map(|r| r.value)
    }

    /// Each measured run's value of `(case, competitor, metric)`, by run number (empty when the
    /// row has none recorded; `None` when there is no row).
    pub fn per_run(&self, case: &str, comp: &str, metric: &str) -> Option<&'a [Option<f64>]> {
        self.get(case, comp, metric).map(|r| r.per_run.as_slice())
    }

    /// The competitor standing for spindle.
    pub fn ours(&self) -> &'static str {
        self.suite.ours()
    }

    /// Competitors with a row in any of `cases`, in report order.
    pub fn competitors_for(&self, cases: &[&str]) -> Vec<&'a str> {
        let mut names: Vec<&'a str> = Vec::new();
        for entry in self.entries {
            if self.rows.iter().any(|r| r.competitor == entry.name && cases.contains(&r.case.as_str())) {
                names.push(&entry.name);
            }
        }
        // Rows of a competitor without an entry still show (at the end).
        for row in self.rows {
            if cases.contains(&row.case.as_str()) && !names.contains(&row.competitor.as_str()) {
                names.push(&row.competitor);
            }
        }
        names
    }

    /// Whether spindle has at least one measurement in this suite (else the tables drop their
    /// "vs spindle" columns, which would be empty).
    pub fn ours_measured(&self) -> bool {
        self.rows.iter().any(|r| r.competitor == self.ours())
    }

    /// The language of a competitor's manifest.
    pub fn language(&self, comp: &str) -> String {
        self.entries.iter().find(|e| e.name == comp).map(|e| e.language.clone()).unwrap_or_default()
    }

    /// A competitor's name as shown: spindle's in bold, a floor row (see
    /// [`crate::suites::FLOOR_ROWS`]) marked as the limit it is.
    pub fn display(&self, comp: &str) -> String {
        if comp == self.ours() {
            format!("**{comp}**")
        } else if crate::suites::is_floor(comp) {
            format!("{comp} _(floor: the limit, not a competitor)_")
        } else {
            comp.to_string()
        }
    }

    /// `median (min–max)`, or `—` when not measured.
    pub fn cell(&self, case: &str, comp: &str, metric: &str) -> String {
        self.get(case, comp, metric).map(spread).unwrap_or_else(|| "—".into())
    }

    /// How far spindle is ahead of `comp` on one metric.
    pub fn advantage(&self, case: &str, comp: &str, metric: &str) -> Option<f64> {
        if comp == self.ours() {
            return None;
        }
        advantage(self.value(case, self.ours(), metric)?, self.value(case, comp, metric)?, better(metric))
    }

    /// The "vs spindle" cell.
    pub fn ratio_cell(&self, case: &str, comp: &str, metric: &str) -> String {
        ratio(self.advantage(case, comp, metric))
    }
}
