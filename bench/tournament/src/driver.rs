//! The tournament from start to end: discover, set up, run, aggregate, write.
//!
//! Per selected suite, in order: the suite's manifests are set up (a failure becomes "could
//! not run" rows), the ready competitors run per [`mod@crate::run`], their runs are aggregated,
//! and the suite's lines are appended to `results.jsonl` at once, so an interrupted tournament
//! keeps the suites it finished. `REPORT.md` and the charts are written at the end.
//!
//! The exit code is 1 only when one of spindle's own competitors (`suites::SPINDLE_COMPETITORS`)
//! has a manifest in a suite and failed there: setup/build error, crash, timeout, no or
//! malformed output. Peers' failures and missing tools never fail the tournament.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::aggregate::{self, Aggregate};
use crate::blocking;
use crate::charts;
use crate::http::{self, HttpSettings, HttpTools};
use crate::machine::{self, Contention, Machine};
use crate::manifest::{self, Discovery};
use crate::model::{Entry, ReportInput, Status, SuiteReport, Toolchain, PEER_MISSING, SPINDLE_MISSING};
use crate::proc::{self, Failure};
use crate::report;
use crate::run::{self, Entrant, Plan};
use crate::setup::Installer;
use crate::suites::{is_spindle, Suite};
use crate::ui::Ui;

/// Everything a tournament needs to know; built from the command line by [`crate::cli`].
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the manifests are (`bench/peers`).
    pub peers_dir: PathBuf,
    /// Where results, report and charts go.
    pub out: PathBuf,
    /// The suites to run, in order.
    pub suites: Vec<Suite>,
    /// Quick mode.
    pub quick: bool,
    /// Print every result line on stdout too.
    pub json: bool,
    /// Measured runs per competitor.
    pub runs: usize,
    /// Discard one warm-up run first.
    pub warmup: bool,
    /// Allow apt-get and downloads.
    pub install: bool,
    /// Only these competitors (all when empty).
    pub competitors: Vec<String>,
    /// wrk settings.
    pub http: HttpSettings,
    /// The command line, for the report.
    pub command: String,
    /// Show progress and log lines on stderr.
    pub progress: bool,
}

/// What a finished tournament produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// 0, or 1 when spindle's own competitors failed.
    pub exit_code: i32,
    /// `<out>/results.jsonl`.
    pub results: PathBuf,
    /// `<out>/REPORT.md`.
    pub report: PathBuf,
    /// What failed of spindle's own competitors.
    pub spindle_failures: Vec<String>,
}

impl Config {
    fn selected(&self, name: &str) -> bool {
        self.competitors.is_empty() || self.competitors.iter().any(|c| c == name)
    }
}

/// Fails on a `--competitor` name that neither a manifest nor a suite knows: a typo would
/// otherwise select nothing and write a report of empty rows.
fn check_competitor_names(names: &[String], discovery: &Discovery) -> Result<()> {
    let mut known: Vec<&str> =
        discovery.manifests.iter().flat_map(|m| m.competitors.iter()).map(|c| c.name.as_str()).collect();
    known.extend(Suite::ALL.iter().flat_map(|s| s.expected().iter().copied()));
    known.sort_unstable();
    known.dedup();
    let unknown: Vec<&str> = names.iter().map(String::as_str).filter(|n| !known.contains(n)).collect();
    if unknown.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "no manifest or suite knows the competitor{} {}; known: {}",
        if unknown.len() == 1 { "" } else { "s" },
        unknown.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
        known.join(", ")
    )
}

/// Runs the tournament.
pub fn run(config: &Config) -> Result<Outcome> {
    let ui = if config.progress { Ui::stderr() } else { Ui::hidden() };
    crate::interrupt::install();
    let discovery = manifest::discover(&config.peers_dir);
    check_competitor_names(&config.competitors, &discovery)?;
    fs::create_dir_all(&config.out).with_context(|| format!("cannot create {}", config.out.display()))?;
    let charts_dir = config.out.join("charts");
    remove_old_charts(&charts_dir);
    let results_path = config.out.join("results.jsonl");
    let mut results = BufWriter::new(
        File::create(&results_path).with_context(|| format!("cannot create {}", results_path.display()))?,
    );
    let date = report::now_utc();
    let machine = Machine::probe();
    let mut manifest_errors = Vec::new();
    for broken in discovery.broken.iter().filter(|b| b.suite.is_none()) {
        let line = format!("{}: {}", broken.path.display(), broken.error);
        ui.log(&format!("unusable manifest {line}"));
        manifest_errors.push(line);
    }
    let mut installer = Installer::new(config.install);
    let mut toolchains = Vec::new();
    let mut contention = Contention::default();
    let mut wrk_version = None;
    let mut suites = Vec::new();
    let mut all_lines = Vec::new();
    for &suite in &config.suites {
        let mut done = run_one_suite(config, suite, &discovery, &mut installer, &ui);
        toolchains.append(&mut done.toolchains);
        contention.samples.append(&mut done.contention.samples);
        if done.wrk_version.is_some() {
            wrk_version = done.wrk_version;
        }
        let (charts, errors) = charts::suite_charts(&done.report.view(), &charts_dir);
        done.report.charts = charts;
        done.report.notes.extend(errors);
        let mut lines = Vec::new();
        for row in &done.report.rows {
            lines.push(serde_json::to_string(row)?);
        }
        for failure in done.report.failure_lines() {
            lines.push(serde_json::to_string(&failure)?);
        }
        for line in &lines {
            writeln!(results, "{line}")?;
        }
        results.flush()?;
        all_lines.extend(lines);
        suites.push(done.report);
    }
    let input = ReportInput {
        date,
        command: config.command.clone(),
        quick: config.quick,
        runs: config.runs,
        warmup: config.warmup,
        http: config.http.clone(),
        pinned: http::pinned_cpus(),
        machine,
        load_end: machine::load_average().unwrap_or_else(|| "unknown".into()),
        contention,
        toolchains,
        wrk: wrk_version,
        manifest_errors,
        suites,
    };
    let report_path = config.out.join("REPORT.md");
    fs::write(&report_path, report::render(&input))
        .with_context(|| format!("cannot write {}", report_path.display()))?;
    if config.json {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        for line in &all_lines {
            writeln!(lock, "{line}")?;
        }
    }
    let spindle_failures: Vec<String> = input
        .suites
        .iter()
        .flat_map(|s| {
            s.entries
                .iter()
                .filter(|e| is_spindle(&e.name) && e.failed())
                .map(move |e| format!("{}/{}: {}", s.suite, e.name, e.status_text()))
        })
        .collect();
    Ok(Outcome {
        exit_code: i32::from(!spindle_failures.is_empty()),
        results: results_path,
        report: report_path,
        spindle_failures,
    })
}

fn remove_old_charts(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.path().extension().is_some_and(|e| e == "svg") {
            let _ = fs::remove_file(entry.path());
        }
    }
}

struct SuiteDone {
    report: SuiteReport,
    contention: Contention,
    toolchains: Vec<Toolchain>,
    wrk_version: Option<String>,
}

fn entry(name: &str, language: &str, notes: &str, status: Status) -> Entry {
    Entry {
        name: name.to_string(),
        language: language.to_string(),
        notes: notes.to_string(),
        status,
        skipped: Vec::new(),
    }
}

fn run_one_suite(
    config: &Config,
    suite: Suite,
    discovery: &Discovery,
    installer: &mut Installer,
    ui: &Ui,
) -> SuiteDone {
    let mut entries: Vec<Entry> = Vec::new();
    let mut entrants: Vec<Entrant> = Vec::new();
    let mut toolchains = Vec::new();
    let mut notes = Vec::new();
    let mut taken = BTreeSet::new();
    for broken in discovery.broken.iter().filter(|b| b.suite == Some(suite)) {
        let path = broken.path.strip_prefix(&config.peers_dir).unwrap_or(&broken.path).display().to_string();
        // A TOML error spans several lines (the line, a caret, the message): the first goes in
        // the status, all of it in the failure's detail block.
        let first = broken.error.lines().next().unwrap_or("").trim();
        let failure = Failure::new(format!("manifest {path} is invalid: {first}"), &broken.error);
        ui.log(&format!("manifest {path} is invalid: {}", broken.error));
        let names = if broken.competitors.is_empty() {
            vec![format!("(manifest {path})")]
        } else {
            broken.competitors.clone()
        };
        for name in names.iter().filter(|n| config.selected(n) || broken.competitors.is_empty()) {
            if taken.insert(name.clone()) {
                entries.push(entry(name, "", "", Status::CouldNotRun(failure.clone())));
            }
        }
    }
    for m in discovery.manifests.iter().filter(|m| m.suite == suite) {
        let chosen: Vec<_> = m.competitors.iter().filter(|c| config.selected(&c.name)).collect();
        if chosen.is_empty() {
            continue;
        }
        ui.busy(&format!("setting up {}", crate::setup::manifest_label(m)));
        let prepared = installer.prepare(m, ui);
        if let Ok(version) = &prepared {
            toolchains.push(Toolchain { language: m.language.clone(), suite, version: version.clone() });
        }
        for c in chosen {
            if !taken.insert(c.name.clone()) {
                let dup =
                    Failure::new(format!("`{}` is defined by more than one {suite} manifest", c.name), "");
                entries.retain(|e| e.name != c.name);
                entrants.retain(|e| e.competitor.name != c.name);
                entries.push(entry(&c.name, &m.language, &c.notes, Status::CouldNotRun(dup)));
                continue;
            }
            match &prepared {
                Ok(_) => entrants.push(Entrant {
                    competitor: c.clone(),
                    dir: m.dir.clone(),
                    language: m.language.clone(),
                }),
                Err(failure) => {
                    ui.log(&format!("{}: could not run: {}", c.name, failure.what));
                    entries.push(entry(&c.name, &m.language, &c.notes, Status::CouldNotRun(failure.clone())));
                }
            }
        }
    }
    let mut plan = Plan {
        suite,
        runs: config.runs,
        warmup: config.warmup,
        quick: config.quick,
        env: installer.env().to_vec(),
        http: config.http.clone(),
        tools: HttpTools::default(),
        http_cases: http::CASES.to_vec(),
    };
    let mut wrk_version = None;
    let mut skipped = Vec::new();
    if suite == Suite::Http && !entrants.is_empty() {
        let here = config.peers_dir.as_path();
        match installer.ensure_tools(&["wrk".into()], &["wrk".into()], here, ui) {
            Ok(()) => {
                plan.tools.wrk = proc::which("wrk", here);
                wrk_version = machine::command_line(&["wrk", "-v"]);
            }
            Err(failure) => {
                let reason = format!("wrk is not available: {}", failure.what);
                notes.push(reason.clone());
                for e in entrants.drain(..) {
                    let c = &e.competitor;
                    entries.push(entry(&c.name, &e.language, &c.notes, Status::NotMeasured(reason.clone())));
                }
            }
        }
        match installer.ensure_tools(&["taskset".into()], &["util-linux".into()], here, ui) {
            Ok(()) => plan.tools.taskset = proc::which("taskset", here),
            Err(failure) => {
                let reason =
                    format!("hello_1w and h2c_1w not measured: taskset is not available ({})", failure.what);
                notes.push(reason.clone());
                skipped.push(reason);
                plan.http_cases.retain(|c| !c.pinned);
            }
        }
        if entrants.iter().any(|e| e.competitor.h2c) {
            match installer.ensure_tools(&["h2load".into()], &["nghttp2-client".into()], here, ui) {
                Ok(()) => plan.tools.h2load = proc::which("h2load", here),
                Err(failure) => {
                    let reason =
                        format!("h2c cases not measured: h2load is not available ({})", failure.what);
                    notes.push(reason.clone());
                    skipped.push(reason);
                    plan.http_cases.retain(|c| c.protocol != http::Protocol::H2c);
                }
            }
        }
    }
    // The blocking suite's servers run for the whole suite; dropped (stopped) at its end.
    let servers =
        (suite == Suite::Blocking && !entrants.is_empty()).then(|| blocking::Servers::start(installer, ui));
    if let Some(servers) = &servers {
        plan.env.extend(servers.env.iter().cloned());
        notes.extend(servers.skipped.iter().cloned());
        skipped.extend(servers.skipped.iter().cloned());
    }
    let mut contention = Contention::default();
    let outcomes = run::run_suite_sampled(&plan, &entrants, ui, &mut contention);
    drop(servers);
    let mut rows: Vec<Aggregate> = Vec::new();
    for (entrant, outcome) in entrants.iter().zip(outcomes) {
        let c = &entrant.competitor;
        rows.extend(aggregate::aggregate(suite, &c.name, &outcome.runs, config.runs));
        let mut problems = outcome.failures;
        if outcome.malformed > 0 {
            problems.push(Failure::new(
                format!(
                    "{} malformed output line(s): {}",
                    outcome.malformed,
                    outcome.malformed_examples.join("; ")
                ),
                "",
            ));
        }
        let mut e = entry(
            &c.name,
            &entrant.language,
            &c.notes,
            Status::Ran { ok: outcome.runs.len(), planned: config.runs * cases_per_run(&plan, c), problems },
        );
        e.skipped = skipped.clone();
        entries.push(e);
    }
    let entries = order_entries(config, suite, entries);
    let order: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    aggregate::sort_rows(suite, &mut rows, &order);
    SuiteDone {
        report: SuiteReport { suite, rows, entries, charts: Vec::new(), notes },
        contention,
        toolchains,
        wrk_version,
    }
}

/// The measured runs `c` is planned: one per case it takes part in, in the http suite.
fn cases_per_run(plan: &Plan, c: &crate::manifest::Competitor) -> usize {
    if plan.suite == Suite::Http {
        http::cases_for(&plan.http_cases, c).count()
    } else {
        1
    }
}

/// Why an expected competitor has no row of results: spindle's own programs for a suite arrive
/// with later issues (a slot, not a failure); a peer simply has no program yet.
pub fn missing_reason(name: &str) -> &'static str {
    if is_spindle(name) {
        SPINDLE_MISSING
    } else {
        PEER_MISSING
    }
}

/// Expected competitors first, in the suite's order (a "missing" row for each one without a
/// manifest), then every other competitor in discovery order.
fn order_entries(config: &Config, suite: Suite, mut entries: Vec<Entry>) -> Vec<Entry> {
    let mut ordered = Vec::new();
    for name in suite.expected() {
        if !config.selected(name) {
            continue;
        }
        match entries.iter().position(|e| e.name == *name) {
            Some(i) => ordered.push(entries.remove(i)),
            None => ordered.push(entry(name, "", "", Status::Missing(missing_reason(name).into()))),
        }
    }
    ordered.extend(entries);
    ordered
}
