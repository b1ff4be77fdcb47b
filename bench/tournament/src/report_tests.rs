//! Tests of the report: dates, well-formed tables, missing rows, and ratio phrasing.

use super::*;
use crate::aggregate::Aggregate;
use crate::http::HttpSettings;
use crate::machine::Machine;
use crate::markdown::split_row;
use crate::model::{Entry, ReportInput, Status, SuiteReport, Toolchain};
use crate::proc::Failure;

fn row(suite: Suite, case: &str, comp: &str, metric: &str, value: f64) -> Aggregate {
    Aggregate {
        suite: suite.name().into(),
        case: case.into(),
        competitor: comp.into(),
        metric: metric.into(),
        value,
        unit: crate::suites::default_unit(metric).into(),
        runs: 3,
        min: value * 0.9,
        max: value * 1.1,
        per_run: vec![Some(value * 0.9), Some(value * 1.1), Some(value)],
    }
}

fn ran(name: &str) -> Entry {
    Entry {
        name: name.into(),
        language: "Lang".into(),
        notes: "built | run".into(),
        status: Status::Ran { ok: 3, planned: 3, problems: Vec::new() },
        skipped: Vec::new(),
    }
}

fn missing(name: &str) -> Entry {
    Entry {
        name: name.into(),
        language: String::new(),
        notes: String::new(),
        status: Status::Missing("no peer program yet (no manifest names it)".into()),
        skipped: Vec::new(),
    }
}

/// Rows for every (case, metric) of `suite` for each competitor, `scale` apart.
fn full_rows(suite: Suite, comps: &[(&str, f64)]) -> Vec<Aggregate> {
    let mut rows = Vec::new();
    for case in suite.cases() {
        for metric in case.metrics {
            for (comp, scale) in comps {
                rows.push(row(suite, case.name, comp, metric, 10.0 * scale));
            }
        }
    }
    rows
}

fn input(suites: Vec<SuiteReport>) -> ReportInput {
    ReportInput {
        date: utc(0),
        command: "tournament --quick".into(),
        quick: true,
        runs: 3,
        warmup: false,
        http: HttpSettings::new(true),
        pinned: (0, 1),
        machine: Machine {
            cores: 2,
            cpuinfo_processors: 2,
            cpu_model: "Test CPU".into(),
            memory: "1.0 GiB".into(),
            kernel: "Linux 6.1".into(),
            rustc: "rustc 1.95.0".into(),
            load: "0.10 0.20 0.30".into(),
        },
        load_end: "0.40 0.50 0.60".into(),
        contention: crate::machine::Contention { samples: vec![0, 2, 1] },
        toolchains: vec![Toolchain {
            language: "Go".into(),
            suite: Suite::Fibers,
            version: "go version go1.26".into(),
        }],
        wrk: Some("wrk 4.1.0".into()),
        manifest_errors: Vec::new(),
        suites,
    }
}

fn suite_report(suite: Suite, rows: Vec<Aggregate>, entries: Vec<Entry>) -> SuiteReport {
    SuiteReport { suite, rows, entries, charts: Vec::new(), notes: Vec::new() }
}

/// Every table in `md`: its header cells and each row's cells.
fn tables(md: &str) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    let mut found = Vec::new();
    let mut current: Option<(Vec<String>, Vec<Vec<String>>)> = None;
    for line in md.lines() {
        if line.starts_with('|') {
            let cells = split_row(line);
            match current.as_mut() {
                None => current = Some((cells, Vec::new())),
                Some((_, rows)) => rows.push(cells),
            }
        } else if let Some(table) = current.take() {
            found.push(table);
        }
    }
    found.extend(current);
    found
}

fn all_suites() -> ReportInput {
    let mut reports = Vec::new();
    for suite in Suite::ALL {
        let ours = suite.ours();
        let peer = *suite.expected().iter().find(|n| !crate::suites::is_spindle(n)).unwrap();
        let rows = full_rows(suite, &[(ours, 1.0), (peer, 3.0)]);
        let mut entries = vec![ran(ours), ran(peer)];
        entries.extend(suite.expected().iter().filter(|n| **n != ours && **n != peer).map(|n| missing(n)));
        reports.push(suite_report(suite, rows, entries));
    }
    input(reports)
}

#[test]
fn utc_dates() {
    assert_eq!(utc(0), "1970-01-01 00:00 UTC");
    assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
    assert_eq!(utc(1_700_000_000), "2023-11-14 22:13 UTC");
}

#[test]
fn every_table_row_has_the_header_width() {
    let md = render(&all_suites());
    let found = tables(&md);
    assert!(found.len() > 20, "only {} tables", found.len());
    for (header, rows) in &found {
        assert!(rows.len() >= 2, "table {header:?} has no body");
        // Second line is the alignment rule.
        assert!(rows[0].iter().all(|c| c == "---" || c == "---:"), "{:?}", rows[0]);
        for r in rows {
            assert_eq!(r.len(), header.len(), "row {r:?} under {header:?}");
        }
    }
}

#[test]
fn missing_competitors_have_rows() {
    let md = render(&all_suites());
    for suite in Suite::ALL {
        let ours = suite.ours();
        let peer = *suite.expected().iter().find(|n| !crate::suites::is_spindle(n)).unwrap();
        for name in suite.expected().iter().filter(|n| **n != ours && **n != peer) {
            let shown = if crate::suites::is_floor(name) {
                format!("{name} _(floor: the limit, not a competitor)_")
            } else {
                name.to_string()
            };
            let line = format!("| {shown} |  | no peer program yet (no manifest names it) |");
            assert!(md.contains(&line), "no row for {name} in {suite}");
        }
    }
}

#[test]
fn summary_says_spindle_is_ahead_in_the_right_direction() {
    let md = render(&all_suites());
    // Peers are 3× the values of spindle: 3× slower on time metrics (spindle ahead), but 3×
    // the throughput on req/s and switches/s (spindle behind).
    let summary = &md[md.find("## Summary").unwrap()..md.find("\n## fibers").unwrap()];
    let fibers = tables(summary).into_iter().next().unwrap();
    assert_eq!(fibers.0, ["Case", "Metric", "vs rust-thread"]);
    let cell =
        |metric: &str| fibers.1.iter().find(|r| r[1].starts_with(metric)).map(|r| r[2].clone()).unwrap();
    assert_eq!(cell("us_per_switch ↓"), "**3.00×**");
    assert_eq!(cell("switches_per_s ↑"), "0.33×");
    assert_eq!(cell("geometric mean"), "**2.19×**");
}

#[test]
fn suites_without_spindle_rows_say_so() {
    let rows = full_rows(Suite::Tcp, &[("tokio", 1.0)]);
    let mut entries = vec![missing("spindle"), ran("tokio")];
    entries.push(Entry {
        status: Status::CouldNotRun(Failure::new("build step `x` exited with status 1", "E1\nE2")),
        ..ran("node")
    });
    let md = render(&input(vec![suite_report(Suite::Tcp, rows, entries)]));
    assert!(md.contains("**spindle** has no results in the tcp suite yet: no peer program yet"));
    assert!(md.contains("| node | Lang | could not run: build step `x` exited with status 1 |"));
    // Without spindle rows the tables drop their empty "vs spindle" columns.
    assert!(md.contains("no \"vs spindle\" column"));
    assert!(!md.contains("| vs spindle |"));
    // The failure's stderr tail is kept below the tables.
    assert!(md.contains("### Failures"));
    assert!(md.contains("  E2"));
}

#[test]
fn entries_produce_failure_lines() {
    let mut report = suite_report(Suite::Fibers, Vec::new(), vec![ran("spindle"), missing("tokio")]);
    report.entries.push(Entry {
        status: Status::Ran {
            ok: 1,
            planned: 3,
            problems: vec![Failure::new("run 2 of 3: exited with status 1", "boom")],
        },
        ..ran("ruby-fiber")
    });
    let lines = report.failure_lines();
    let errors: Vec<(&str, &str)> = lines.iter().map(|l| (l.competitor.as_str(), l.error.as_str())).collect();
    assert_eq!(
        errors,
        [
            ("tokio", "no peer program yet (no manifest names it)"),
            ("ruby-fiber", "run 2 of 3: exited with status 1; stderr: boom"),
        ]
    );
    assert!(report.entries[2].failed());
    assert!(!report.entries[1].failed());
    assert_eq!(report.entries[2].status_text(), "ran 1 of 3 runs; run 2 of 3: exited with status 1");
}

#[test]
fn header_and_machine_are_reported() {
    let md = render(&all_suites());
    for text in [
        "- **Date:** 1970-01-01 00:00 UTC",
        "`tournament --quick`",
        "quick",
        "| CPU | Test CPU |",
        "| Kernel | Linux 6.1 |",
        "| Go | fibers | go version go1.26 |",
        "| wrk | wrk 4.1.0 |",
        "- **spindle** (Lang): built | run",
        "| Load average (1/5/15 min) | 0.10 0.20 0.30 at the start, 0.40 0.50 0.60 at the end",
        "| Other runnable tasks between runs | 1.00 on average, 2 at most (3 samples, one before each run) |",
        "> **Warning:** the machine was busy",
    ] {
        assert!(md.contains(text), "missing {text}");
    }
}

#[test]
fn unsaturated_pinned_servers_are_flagged() {
    // 10 µs of CPU per request at 10 req/s is far below one busy core.
    let md = render(&all_suites());
    let http = &md[md.find("\n## http").unwrap()..];
    assert!(http.contains("Not saturated (server CPU below 0.8 cores"), "{http}");
    assert!(http.contains("req/s rather than the server): spindle, crystal."), "{http}");
}

#[test]
fn spindles_other_configurations_are_rows_not_peers_in_the_summary() {
    let suite = Suite::Tcp;
    let rows = full_rows(suite, &[("spindle", 1.0), ("spindle-mt", 0.5), ("c-syscalls", 2.0)]);
    let entries = vec![ran("spindle"), ran("spindle-mt"), ran("c-syscalls")];
    let md = render(&input(vec![suite_report(suite, rows, entries)]));
    assert!(md.contains("vs c-syscalls"), "{md}");
    assert!(!md.contains("vs spindle-mt"), "spindle-mt is compared with as a peer:\n{md}");
    assert!(md.contains("| spindle-mt |") || md.contains("spindle-mt"), "spindle-mt's row is missing:\n{md}");
}

#[test]
fn floor_rows_are_labelled_and_left_out_of_the_ranking() {
    let suite = Suite::Fibers;
    let mut rows = full_rows(suite, &[("spindle", 1.0), ("may", 2.0)]);
    rows.push(row(suite, "switch", "floor-raw-switch", "us_per_switch", 0.5));
    rows.push(row(suite, "switch", "floor-raw-switch", "switches_per_s", 40.0));
    let entries = vec![ran("spindle"), ran("may"), ran("floor-raw-switch")];
    let md = render(&input(vec![suite_report(suite, rows, entries)]));
    let summary = &md[md.find("## Summary").unwrap()..md.find("\n## fibers").unwrap()];
    assert!(summary.contains("vs may"), "{summary}");
    assert!(!summary.contains("vs floor-raw-switch"), "the floor is ranked as a peer:\n{summary}");
    // spindle's switch is 10 µs against the floor's 0.5 µs, 10/s against 40/s.
    assert!(
        summary.contains("**Floor, not a competitor:** floor-raw-switch (switch us_per_switch) = 0.500 us; spindle is 20.0× that limit."),
        "{summary}"
    );
    assert!(summary.contains("spindle is 4.0× that limit."), "{summary}");
    // Its rows in the suite's tables carry the marker.
    assert!(md.contains("| floor-raw-switch _(floor: the limit, not a competitor)_ |"), "{md}");
}

/// An http `cpu_us_per_req` row with these per-run values (the median and range from them).
fn cpu_row(case: &str, comp: &str, per_run: &[Option<f64>]) -> Aggregate {
    let values: Vec<f64> = per_run.iter().flatten().copied().collect();
    Aggregate {
        runs: values.len(),
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        per_run: per_run.to_vec(),
        ..row(Suite::Http, case, comp, "cpu_us_per_req", crate::aggregate::median(&values).unwrap())
    }
}

/// The http section's run-by-run part: from its heading to the next heading.
fn run_by_run(md: &str) -> &str {
    let start = md.find("#### CPU per request, 2 workers over 1, run by run").expect("no run-by-run table");
    let rest = &md[start..];
    &rest[..rest[4..].find("\n#").map_or(rest.len(), |i| i + 4)]
}

fn http_report(rows: Vec<Aggregate>, names: &[&str]) -> String {
    let entries = names.iter().map(|n| ran(n)).collect();
    render(&input(vec![suite_report(Suite::Http, rows, entries)]))
}

#[test]
fn the_run_by_run_cpu_ratio_table_pairs_runs_by_number() {
    let rows = vec![
        cpu_row("hello_1w", "spindle", &[Some(10.0), Some(20.0), Some(8.0), Some(10.0), Some(5.0)]),
        cpu_row("hello_2w", "spindle", &[Some(10.5), Some(21.0), Some(9.6), Some(9.0), Some(5.0)]),
    ];
    let md = http_report(rows, &["spindle"]);
    let part = run_by_run(&md);
    assert!(part.contains("**spindle**: largest 1.200× (run 3), over 5 of 5 runs."), "{part}");
    let found = tables(part);
    assert_eq!(found.len(), 1, "{part}");
    let (header, rows) = &found[0];
    assert_eq!(header, &["Run", "hello_1w CPU µs/req", "hello_2w CPU µs/req", "2w ÷ 1w"]);
    let body: Vec<Vec<&str>> = rows[1..].iter().map(|r| r.iter().map(String::as_str).collect()).collect();
    assert_eq!(
        body,
        [
            vec!["1", "10.00", "10.50", "1.050×"],
            vec!["2", "20.00", "21.00", "1.050×"],
            vec!["3", "8.00", "9.60", "1.200×"],
            vec!["4", "10.00", "9.00", "0.900×"],
            vec!["5", "5.00", "5.00", "1.000×"],
            vec!["largest", "", "", "1.200× (run 3)"],
        ]
    );
    // The medians (10 and 9.6, a ratio below 1) stay in the case tables as before.
    assert!(md.contains("| 10.00 (5.00–20.00) |"), "{md}");
}

#[test]
fn a_failed_run_is_missing_not_paired_with_another() {
    // hello_1w's run 2 failed, which stopped its later runs; hello_2w ran all three. Run 3 of
    // hello_2w must not be divided by run 3 of hello_1w's compacted values (there is none), nor
    // run 2 of hello_2w by run 1 of hello_1w.
    let rows = vec![
        cpu_row("hello_1w", "spindle", &[Some(10.0), None, None]),
        cpu_row("hello_2w", "spindle", &[Some(11.0), Some(30.0), Some(40.0)]),
        cpu_row("hello_1w", "node", &[Some(10.0), None, Some(10.0)]),
        cpu_row("hello_2w", "node", &[Some(12.0), Some(99.0), Some(13.0)]),
    ];
    let md = http_report(rows, &["spindle", "node"]);
    let part = run_by_run(&md);
    assert!(part.contains("**spindle**: largest 1.100× (run 1), over 1 of 3 runs."), "{part}");
    assert!(part.contains("node: largest 1.300× (run 3), over 2 of 3 runs."), "{part}");
    let found = tables(part);
    assert_eq!(found.len(), 2, "{part}");
    let body = |i: usize| -> Vec<Vec<String>> { found[i].1[1..].to_vec() };
    assert_eq!(
        body(0),
        [
            ["1", "10.00", "11.00", "1.100×"],
            ["2", "—", "30.00", "—"],
            ["3", "—", "40.00", "—"],
            ["largest", "", "", "1.100× (run 1)"],
        ]
    );
    assert_eq!(
        body(1),
        [
            ["1", "10.00", "12.00", "1.200×"],
            ["2", "—", "99.00", "—"],
            ["3", "10.00", "13.00", "1.300×"],
            ["largest", "", "", "1.300× (run 3)"],
        ]
    );
}

#[test]
fn a_competitor_without_both_cases_gets_a_line_not_a_table() {
    let rows = vec![
        cpu_row("hello_1w", "spindle", &[Some(10.0), Some(10.0)]),
        cpu_row("hello_2w", "spindle", &[Some(10.0), Some(11.0)]),
        cpu_row("hello_2w", "tokio-hyper", &[Some(12.0), Some(13.0)]),
        cpu_row("hello_1w", "go-nethttp", &[Some(12.0), Some(13.0)]),
    ];
    let md = http_report(rows, &["spindle", "tokio-hyper", "go-nethttp"]);
    let part = run_by_run(&md);
    assert_eq!(tables(part).len(), 1, "only spindle has both cases:\n{part}");
    assert!(!part.contains("tokio-hyper: largest") && !part.contains("go-nethttp: largest"), "{part}");
    assert!(part.contains("- tokio-hyper: no table, it has no `hello_1w` CPU µs/request."), "{part}");
    assert!(part.contains("- go-nethttp: no table, it has no `hello_2w` CPU µs/request."), "{part}");
    // Without any hello case the section has no such table at all.
    let md = http_report(vec![cpu_row("h2c_1w", "spindle", &[Some(1.0)])], &["spindle"]);
    assert!(!md.contains("run by run"), "{md}");
}

#[test]
fn the_pairing_of_runs_is_explained() {
    let rows =
        vec![cpu_row("hello_1w", "spindle", &[Some(10.0)]), cpu_row("hello_2w", "spindle", &[Some(10.0)])];
    let part = http_report(rows, &["spindle"]);
    let part = run_by_run(&part);
    for text in ["same round of the interleaved schedule", "followed directly", "not at the same time"] {
        assert!(part.contains(text), "{text:?} not in {part}");
    }
}

#[test]
fn the_client_table_shows_each_clients_cpu_per_request_with_lower_as_better() {
    let rows = vec![
        row(Suite::Http, "client_keepalive", "spindle", "req_per_s", 100.0),
        row(Suite::Http, "client_keepalive", "tokio-hyper", "req_per_s", 100.0),
        row(Suite::Http, "client_keepalive", "spindle", "cpu_us_per_req", 8.0),
        row(Suite::Http, "client_keepalive", "tokio-hyper", "cpu_us_per_req", 10.0),
    ];
    let md = http_report(rows, &["spindle", "tokio-hyper"]);
    let start = md.find("HTTP client: keep-alive GETs").expect("no client section");
    let part = &md[start..];
    let found = tables(part);
    let (header, rows) = &found[0];
    assert_eq!(
        header,
        &["Competitor", "Req/s", "vs spindle (req/s)", "Client CPU µs/req", "vs spindle (CPU)"]
    );
    let tokio = rows.iter().find(|r| r[0] == "tokio-hyper").expect("no tokio-hyper row");
    // Level on requests; spindle's client spends 8 µs where tokio-hyper's spends 10: ahead by 1.25×.
    assert!(tokio[3].starts_with("10.00"), "{tokio:?}");
    assert!(tokio[4].contains("1.25"), "{tokio:?}");
    assert!(part.contains("Client CPU µs/req: the client process's CPU time"), "{part}");
}

#[test]
fn a_blocking_case_a_competitor_failed_has_its_row() {
    let rows = vec![
        row(Suite::Blocking, "pg_sleep_64", "tokio", "queries_per_s", 6000.0),
        row(Suite::Blocking, "pg_sleep_64", "tokio", "cpu_us_per_query", 18.0),
        row(Suite::Blocking, "redis_64", "spindle", "ops_per_s", 80000.0),
        row(Suite::Blocking, "redis_64", "spindle", "cpu_us_per_op", 6.0),
    ];
    let mut spindle = ran("spindle");
    spindle.status = Status::Ran {
        ok: 1,
        planned: 1,
        problems: vec![Failure::new("pg_sleep_64, run 1 of 1: a client panicked", "")],
    };
    let md = render(&input(vec![suite_report(Suite::Blocking, rows, vec![spindle, ran("tokio")])]));
    let section =
        &md[md.find("#### PostgreSQL `SELECT pg_sleep(0.01)`, 64 client(s)").expect("the case's table")..];
    let table: Vec<&str> = section.lines().skip(2).take_while(|l| l.starts_with('|')).collect();
    assert!(table.iter().any(|l| l.contains("tokio") && l.contains("6,000")), "{table:?}");
    assert!(table.iter().any(|l| l.contains("spindle") && l.contains("failed (see Failures)")), "{table:?}");
    assert!(md.contains("pg_sleep_64, run 1 of 1: a client panicked"), "listed under the failures");
}
