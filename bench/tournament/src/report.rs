//! `REPORT.md`: the header, the machine, the toolchains, the summary of ratios, and per suite
//! the competitors' status, the result tables, the charts and the failures.
//!
//! Every competitor a suite expects, and every competitor a manifest names, gets a row in its
//! suite's "Competitors" table: measured, could not run (with the reason), failed, or no peer
//! program yet. Nothing is silently missing.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::aggregate::{Aggregate, FailureLine};
use crate::charts::ChartRef;
use crate::http::HttpSettings;
use crate::machine::{Contention, Machine};
use crate::markdown::Table;
use crate::proc::Failure;
use crate::suites::Suite;
use crate::summary;
use crate::tables::{self, View};

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

    fn problems(&self) -> Vec<&Failure> {
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

/// Formats a UNIX time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (proleptic Gregorian), days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// The current time, formatted by [`utc`].
pub fn now_utc() -> String {
    utc(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
}

/// Renders the whole report.
pub fn render(input: &ReportInput) -> String {
    let mut out = String::from("# spindle tournament\n\n");
    header(&mut out, input);
    machine(&mut out, input);
    if !input.manifest_errors.is_empty() {
        out.push_str("\n## Unusable manifests\n\n");
        for e in &input.manifest_errors {
            out.push_str(&format!("- {e}\n"));
        }
    }
    out.push_str("\n## Summary: spindle against each peer\n\n");
    out.push_str(
        "Each cell is how far spindle (spindle-grpc in the rpc suite) is ahead of that peer on \
         the median: **> 1× means spindle is ahead** (faster, smaller, fewer allocations, or \
         more throughput), < 1× means the peer is. ↓ marks metrics where lower is better, ↑ \
         where higher is better.\n",
    );
    for suite in &input.suites {
        out.push_str(&format!("\n### {}\n\n", suite.suite));
        out.push_str(&summary::render(&suite.view()));
    }
    for suite in &input.suites {
        suite_section(&mut out, suite);
    }
    out
}

fn header(out: &mut String, input: &ReportInput) {
    let mode = if input.quick {
        "quick (smoke test: manifests' quick arguments, short durations; figures are not benchmarks)"
    } else {
        "full"
    };
    let warm = if input.warmup { "after 1 discarded warm-up run" } else { "with no warm-up run" };
    out.push_str(&format!("- **Date:** {}\n", input.date));
    out.push_str(&format!("- **Command:** `{}`\n", input.command));
    out.push_str(&format!("- **Mode:** {mode}\n"));
    out.push_str(&format!(
        "- **Runs:** {} measured run(s) per competitor {warm}, interleaved round-robin within \
         each suite; each figure is the median, with min–max in parentheses.\n",
        input.runs
    ));
    if !input.suites.iter().any(|s| s.suite == Suite::Http) {
        return;
    }
    let h = &input.http;
    out.push_str(&format!(
        "- **HTTP:** each run starts the server afresh, warms it with wrk for {} s, then measures \
         `wrk -t{} -c{} -d{}s --latency`; `hello_1w` pins the server to CPU {} and wrk to CPU {} \
         with taskset, `hello_2w` is unpinned. CPU µs/request is the server process tree's \
         utime+stime during the measurement ÷ requests. `h2c_1w`/`h2c_2w` are the same with \
         `h2load -t{} -c{} -m1 -D{}` over HTTP/2 with prior knowledge (h2load warm-up as for \
         wrk; latencies from h2load's per-request log); `client_keepalive` is measured by the \
         peer itself.\n",
        h.warmup_s,
        h.threads,
        h.connections,
        h.duration_s,
        input.pinned.0,
        input.pinned.1,
        h.threads,
        h.connections,
        h.duration_s
    ));
}

fn machine(out: &mut String, input: &ReportInput) {
    let m = &input.machine;
    out.push_str("\n## Machine\n\n");
    let mut t = Table::new(&["", ""], &[]);
    t.row(vec!["Cores".into(), format!("{} available ({} in /proc/cpuinfo)", m.cores, m.cpuinfo_processors)]);
    t.row(vec!["CPU".into(), m.cpu_model.clone()]);
    t.row(vec!["Memory".into(), m.memory.clone()]);
    t.row(vec!["Kernel".into(), m.kernel.clone()]);
    t.row(vec![
        "Load average (1/5/15 min)".into(),
        format!(
            "{} at the start, {} at the end (the end includes the tournament's own load)",
            m.load, input.load_end
        ),
    ]);
    let others = match input.contention.mean() {
        Some(mean) => format!(
            "{mean:.2} on average, {} at most ({} samples, one before each run)",
            input.contention.samples.iter().max().copied().unwrap_or(0),
            input.contention.samples.len()
        ),
        None => "not sampled".into(),
    };
    t.row(vec!["Other runnable tasks between runs".into(), others]);
    t.row(vec!["rustc (harness)".into(), m.rustc.clone()]);
    if let Some(wrk) = &input.wrk {
        t.row(vec!["wrk".into(), wrk.clone()]);
    }
    out.push_str(&t.render());
    if input.contention.busy(m.cores) {
        out.push_str(
            "\n> **Warning:** the machine was busy: between runs, other processes kept more than a \
             quarter of its cores busy on average, so they competed with the benchmarks. The \
             figures are noisier and slower than on an idle machine and the min–max spreads are \
             wide; compare ratios rather than absolute figures, or re-run on an idle machine.\n",
        );
    }
    out.push_str("\n### Toolchains\n\n");
    if input.toolchains.is_empty() {
        out.push_str("_No manifest was set up, so no toolchain version was recorded._\n");
    } else {
        let mut t = Table::new(&["Language", "Suite", "Version"], &[]);
        for tc in &input.toolchains {
            t.row(vec![tc.language.clone(), tc.suite.to_string(), tc.version.clone()]);
        }
        out.push_str(&t.render());
    }
}

fn suite_section(out: &mut String, suite: &SuiteReport) {
    let view = suite.view();
    out.push_str(&format!("\n## {}\n\n{}\n", suite.suite, suite.suite.description()));
    out.push_str("\n### Competitors\n\n");
    let mut t = Table::new(&["Competitor", "Language", "Status"], &[]);
    for e in &suite.entries {
        t.row(vec![view.display(&e.name), e.language.clone(), e.status_text()]);
    }
    out.push_str(&t.render());
    for note in &suite.notes {
        out.push_str(&format!("\n> {note}\n"));
    }
    let described: Vec<&Entry> = suite.entries.iter().filter(|e| !e.notes.is_empty()).collect();
    if !described.is_empty() {
        out.push_str("\nHow each competitor is built and run:\n\n");
        for e in described {
            let language = if e.language.is_empty() { String::new() } else { format!(" ({})", e.language) };
            out.push_str(&format!("- **{}**{language}: {}\n", e.name, one_line(&e.notes)));
        }
    }
    out.push_str("\n### Results\n");
    if suite.rows.is_empty() {
        out.push_str("\n_No competitor produced measurements in this suite._\n");
    } else {
        if view.ours_measured() {
            out.push_str(&format!(
                "\n\"vs {}\" columns: how far {} is ahead of that row (> 1× = ahead).\n",
                view.ours(),
                view.ours()
            ));
        } else {
            out.push_str(&format!(
                "\n{} has no measurements in this suite yet, so the tables have no \"vs {}\" column; \
                 they show the peers side by side.\n",
                view.ours(),
                view.ours()
            ));
        }
        out.push_str(&tables::render(&view));
        out.push_str(&tables::others(&view));
    }
    if !suite.charts.is_empty() {
        out.push_str("\n### Charts\n\n");
        for chart in &suite.charts {
            out.push_str(&format!("![{}]({})\n\n", chart.title, chart.file));
        }
    }
    let failed: Vec<&Entry> = suite.entries.iter().filter(|e| e.failed()).collect();
    if !failed.is_empty() {
        out.push_str("\n### Failures\n");
        for e in failed {
            for problem in e.problems() {
                out.push_str(&format!("\n- **{}**: {}\n", e.name, problem.what));
                if !problem.stderr.is_empty() {
                    out.push_str(&format!(
                        "\n  ```text\n{}\n  ```\n",
                        problem
                            .stderr
                            .replace("```", "'''")
                            .lines()
                            .map(|l| format!("  {l}"))
                            .collect::<Vec<_>>()
                            .join("\n")
                    ));
                }
            }
        }
    }
}

/// Notes as one line of a Markdown list item.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
