//! `REPORT.md`: the header, the machine, the toolchains, the summary of ratios, and per suite
//! the competitors' status, the result tables, the charts and the failures.
//!
//! Every competitor a suite expects, and every competitor a manifest names, gets a row in its
//! suite's "Competitors" table: measured, could not run (with the reason), failed, or no peer
//! program yet. Nothing is silently missing.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::markdown::Table;
use crate::model::{Entry, ReportInput, SuiteReport};
use crate::suites::Suite;
use crate::{summary, tables};

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
         peer itself: requests per second, and the client process's CPU time per request.\n",
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
