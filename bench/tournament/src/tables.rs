//! The per-suite result tables, in the shapes of the reference reports (seeds 000–003).
//!
//! Rows are competitors (the seeds' rows were versions or implementations); every measured
//! cell is `median (min–max)`, and each table has a "vs spindle" column with the same ratio
//! as the summary (`> 1×`: spindle is ahead of that row). A table with no measured row is
//! replaced by a line saying so, never dropped.
//!
//! One table is run by run instead of medians: the http suite's CPU per request at 2 workers
//! over 1, one small table per competitor, pairing the two cases' runs by their number
//! ([`run_ratios`]; the runs' values are the rows' `per_run`).

use crate::markdown::{num, spread, Table};
use crate::model::View;
use crate::suites::{better, Suite};

fn heading(out: &mut String, title: &str) {
    out.push_str(&format!("\n#### {title}\n\n"));
}

fn emit(out: &mut String, v: &View, table: &Table, foot: &[&str]) {
    if table.is_empty() {
        out.push_str("_No measurements._\n");
        return;
    }
    if v.ours_measured() {
        out.push_str(&table.render());
    } else {
        out.push_str(&table.without_columns(|h| h.starts_with("vs ")).render());
    }
    if !foot.is_empty() {
        out.push('\n');
        for line in foot {
            out.push_str(&format!("- {line}\n"));
        }
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(num).unwrap_or_else(|| "—".into())
}

/// The tables of `view.suite`.
pub fn render(view: &View) -> String {
    match view.suite {
        Suite::Fibers => fibers(view),
        Suite::Tcp => tcp(view),
        Suite::Http => http(view),
        Suite::Rpc => rpc(view),
        Suite::Blocking => blocking(view),
    }
}

/// The blocking suite: one table per kind of work and number of clients, throughput and the
/// client's CPU per operation side by side.
fn blocking(v: &View) -> String {
    let mut out = String::new();
    let kinds = [
        (
            "pg_select1",
            "PostgreSQL `SELECT 1`",
            "Queries/s",
            "queries_per_s",
            "CPU µs/query",
            "cpu_us_per_query",
        ),
        (
            "pg_sleep",
            "PostgreSQL `SELECT pg_sleep(0.01)`",
            "Queries/s",
            "queries_per_s",
            "CPU µs/query",
            "cpu_us_per_query",
        ),
        ("redis", "Redis SET + GET (each an operation)", "Ops/s", "ops_per_s", "CPU µs/op", "cpu_us_per_op"),
        (
            "http",
            "HTTP GET / (spindle-http hello server)",
            "Req/s",
            "req_per_s",
            "CPU µs/req",
            "cpu_us_per_req",
        ),
    ];
    let vs = format!("vs {}", v.ours());
    let cpu_vs = format!("vs {} (CPU)", v.ours());
    for (prefix, title, rate_label, rate, cpu_label, cpu) in kinds {
        for clients in ["1", "64", "1000"] {
            let case = format!("{prefix}_{clients}");
            // Competitors that said this case failed (an error line): a row each, not a gap.
            let known = format!("{case}, ");
            let failed: Vec<&crate::model::Entry> = v
                .entries
                .iter()
                .filter(|e| v.get(&case, &e.name, rate).is_none())
                .filter(|e| e.problems().iter().any(|p| p.what.starts_with(&known)))
                .collect();
            if v.competitors_for(&[case.as_str()]).is_empty() && failed.is_empty() {
                continue;
            }
            heading(&mut out, &format!("{title}, {clients} client(s)"));
            let mut t = Table::new(&["Competitor", "Language"], &[rate_label, &vs, cpu_label, &cpu_vs]);
            for c in ranked(v, &case, rate) {
                t.row(vec![
                    v.display(c),
                    v.language(c),
                    v.cell(&case, c, rate),
                    v.ratio_cell(&case, c, rate),
                    v.cell(&case, c, cpu),
                    v.ratio_cell(&case, c, cpu),
                ]);
            }
            for e in failed {
                let dash = || "—".to_string();
                t.row(vec![
                    v.display(&e.name),
                    e.language.clone(),
                    "failed (see Failures)".into(),
                    dash(),
                    dash(),
                    dash(),
                ]);
            }
            emit(&mut out, v, &t, &[]);
        }
    }
    out.push_str(
        "\n- Each client has its own connection and loops its operation; CPU µs per operation is the \
         client process's CPU time (all its threads) in the measurement window ÷ the operations \
         completed in it. The servers share the machine's cores with the client.\n",
    );
    out
}

fn fibers(v: &View) -> String {
    let mut out = String::new();
    let vs = format!("vs {}", v.ours());
    heading(&mut out, "Performance summary");
    let mut t = Table::new(&["Competitor"], &["Alloc (µs/unit)", &vs, "Switch (µs)", &vs]);
    for c in v.competitors_for(&["alloc", "switch"]) {
        t.row(vec![
            v.display(c),
            v.cell("alloc", c, "us_per_unit"),
            v.ratio_cell("alloc", c, "us_per_unit"),
            v.cell("switch", c, "us_per_switch"),
            v.ratio_cell("switch", c, "us_per_switch"),
        ]);
    }
    emit(
        &mut out,
        v,
        &t,
        &["Allocation: time per fiber/thread/task created; switch: time per context switch."],
    );

    heading(&mut out, "Context switching");
    let mut t = Table::new(&["Competitor"], &["Switches/s", &vs]);
    for c in v.competitors_for(&["switch"]) {
        t.row(vec![
            v.display(c),
            v.cell("switch", c, "switches_per_s"),
            v.ratio_cell("switch", c, "switches_per_s"),
        ]);
    }
    emit(&mut out, v, &t, &[]);

    heading(&mut out, "Memory per unit");
    let mut t = Table::new(&["Competitor"], &["Bytes per unit", "MB per 10,000 units", &vs]);
    for c in v.competitors_for(&["alloc"]) {
        let per_10k = v.value("alloc", c, "bytes_per_unit").map(|b| b * 10_000.0 / (1024.0 * 1024.0));
        t.row(vec![
            v.display(c),
            v.cell("alloc", c, "bytes_per_unit"),
            opt(per_10k),
            v.ratio_cell("alloc", c, "bytes_per_unit"),
        ]);
    }
    emit(&mut out, v, &t, &["MB per 10,000 units is derived from the median bytes per unit."]);

    heading(&mut out, "Cache warming");
    let mut t =
        Table::new(&["Competitor"], &["First alloc (µs)", "Last alloc (µs)", "Improvement (first ÷ last)"]);
    for c in v.competitors_for(&["warm"]) {
        let first = v.value("warm", c, "first_alloc_us");
        let last = v.value("warm", c, "last_alloc_us");
        let improvement = match (first, last) {
            (Some(f), Some(l)) if l > 0.0 => format!("{:.1}×", f / l),
            _ => "—".into(),
        };
        t.row(vec![
            v.display(c),
            v.cell("warm", c, "first_alloc_us"),
            v.cell("warm", c, "last_alloc_us"),
            improvement,
        ]);
    }
    emit(
        &mut out,
        v,
        &t,
        &["Allocation time from a cold start (first) and once caches and pools are warm (last)."],
    );

    heading(&mut out, "Throughput");
    let mut t = Table::new(&["Competitor"], &["Total time (ms)", &vs]);
    for c in v.competitors_for(&["throughput"]) {
        t.row(vec![
            v.display(c),
            v.cell("throughput", c, "total_ms"),
            v.ratio_cell("throughput", c, "total_ms"),
        ]);
    }
    emit(&mut out, v, &t, &[]);
    out
}

fn tcp_title(case: &str) -> &str {
    match case {
        "bind" => "bind(127.0.0.1:0)",
        "bind_concurrent" => "Concurrent bind(127.0.0.1:0)",
        "accept_connect" => "Accept + connect",
        "pingpong" => "Ping-pong round trip",
        other => other,
    }
}

/// Competitors sorted by the median of one metric, best first; unmeasured last.
fn ranked<'a>(v: &View<'a>, case: &str, metric: &str) -> Vec<&'a str> {
    let mut names = v.competitors_for(&[case]);
    let key = |c: &str| {
        let value = v.value(case, c, metric).unwrap_or(f64::NAN);
        match better(metric) {
            crate::suites::Better::Lower => value,
            crate::suites::Better::Higher => -value,
        }
    };
    names.sort_by(|a, b| key(a).total_cmp(&key(b)));
    names
}

fn tcp(v: &View) -> String {
    let mut out = String::new();
    let vs = format!("vs {}", v.ours());
    for case in ["bind", "bind_concurrent", "accept_connect", "pingpong"] {
        heading(&mut out, tcp_title(case));
        let mut t = Table::new(&["Competitor", "Language"], &["Per op (ns)", "Ops/s", &vs]);
        for c in ranked(v, case, "ns_per_op") {
            let ops = v.get(case, c, "ns_per_op").map(|r| {
                let per_s = |ns: f64| if ns > 0.0 { 1e9 / ns } else { f64::NAN };
                if r.runs > 1 && r.min != r.max {
                    format!("{} ({}–{})", num(per_s(r.value)), num(per_s(r.max)), num(per_s(r.min)))
                } else {
                    num(per_s(r.value))
                }
            });
            t.row(vec![
                v.display(c),
                v.language(c),
                v.cell(case, c, "ns_per_op"),
                ops.unwrap_or_else(|| "—".into()),
                v.ratio_cell(case, c, "ns_per_op"),
            ]);
        }
        emit(&mut out, v, &t, &[]);
    }
    heading(&mut out, "Memory per idle connection");
    let mut t = Table::new(&["Competitor", "Language"], &["Bytes per connection", &vs]);
    for c in ranked(v, "idle_conns", "bytes_per_conn") {
        t.row(vec![
            v.display(c),
            v.language(c),
            v.cell("idle_conns", c, "bytes_per_conn"),
            v.ratio_cell("idle_conns", c, "bytes_per_conn"),
        ]);
    }
    emit(&mut out, v, &t, &["Ops/s is 10⁹ ÷ ns per op (its spread from the slowest and fastest runs)."]);
    out
}

/// Below this many busy cores, a pinned one-worker server was not the bottleneck.
const UNSATURATED: f64 = 0.8;

/// Cores the server kept busy: CPU µs per request × requests per second.
fn cores(v: &View, case: &str, comp: &str) -> Option<f64> {
    Some(v.value(case, comp, "cpu_us_per_req")? * v.value(case, comp, "req_per_s")? / 1e6)
}

fn http(v: &View) -> String {
    let mut out = String::new();
    let vs = format!("vs {} (req/s)", v.ours());
    for (case, title) in [
        ("hello_1w", "1 worker (server and wrk pinned to one CPU each)"),
        ("hello_2w", "2 workers (unpinned)"),
        ("h2c_1w", "HTTP/2 (h2c), 1 worker (server and h2load pinned to one CPU each)"),
        ("h2c_2w", "HTTP/2 (h2c), 2 workers (unpinned)"),
    ] {
        heading(&mut out, title);
        let mut t = Table::new(
            &["Competitor"],
            &["Req/s", "Avg latency (µs)", "p99 (µs)", "CPU µs/req", "Server CPU (cores)", &vs],
        );
        for c in ranked(v, case, "req_per_s") {
            t.row(vec![
                v.display(c),
                v.cell(case, c, "req_per_s"),
                v.cell(case, c, "avg_us"),
                v.cell(case, c, "p99_us"),
                v.cell(case, c, "cpu_us_per_req"),
                opt(cores(v, case, c)),
                v.ratio_cell(case, c, "req_per_s"),
            ]);
        }
        // A pinned server that kept less than most of its core busy was not the bottleneck:
        // wrk (on its own core) or other load on the machine was, and req/s says less about it.
        let idle: Vec<&str> = v
            .competitors_for(&[case])
            .into_iter()
            .filter(|c| case.ends_with("_1w") && cores(v, case, c).is_some_and(|k| k < UNSATURATED))
            .collect();
        let note = format!(
            "Not saturated (server CPU below {UNSATURATED} cores, so wrk or other load on the machine \
             limited req/s rather than the server): {}. Compare their CPU µs/req instead.",
            idle.join(", ")
        );
        let foot: Vec<&str> = if idle.is_empty() { Vec::new() } else { vec![note.as_str()] };
        emit(&mut out, v, &t, &foot);
    }
    heading(&mut out, "Scaling from 1 to 2 workers");
    let mut t = Table::new(
        &["Competitor"],
        &[
            "Req/s 1w",
            "Req/s 2w",
            "Speed-up",
            "Scaling efficiency",
            "CPU 1w (cores)",
            "CPU 2w (cores)",
            "Speed-up ÷ CPU growth",
        ],
    );
    for c in v.competitors_for(&["hello_1w", "hello_2w"]) {
        let r1 = v.value("hello_1w", c, "req_per_s");
        let r2 = v.value("hello_2w", c, "req_per_s");
        let speedup = match (r1, r2) {
            (Some(a), Some(b)) if a > 0.0 => Some(b / a),
            _ => None,
        };
        let (c1, c2) = (cores(v, "hello_1w", c), cores(v, "hello_2w", c));
        let per_cpu = match (speedup, c1, c2) {
            (Some(s), Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(s / (b / a)),
            _ => None,
        };
        let times = |x: Option<f64>| x.map(|x| format!("{x:.2}×")).unwrap_or_else(|| "—".into());
        t.row(vec![
            v.display(c),
            opt(r1),
            opt(r2),
            times(speedup),
            speedup.map(|s| format!("{:.0}%", s / 2.0 * 100.0)).unwrap_or_else(|| "—".into()),
            opt(c1),
            opt(c2),
            times(per_cpu),
        ]);
    }
    emit(&mut out, v, &t,
        &[
            "Speed-up: req/s at 2 workers ÷ req/s at 1 worker; scaling efficiency: speed-up ÷ 2.",
            "Server CPU (cores) = CPU µs per request × req/s; wrk shares the same CPUs in the unpinned case, \
             so on a 2-core machine, where wrk needs about one core itself, the server has about one core \
             at 2 workers as at 1 and a speed-up near 1× is expected.",
            "Speed-up ÷ CPU growth below 1× means the extra CPU bought less than proportional throughput (seed 001).",
        ],
    );
    cpu_run_by_run(&mut out, v);
    heading(&mut out, "HTTP client: keep-alive GETs from 64 requesters against a spindle-http hello server");
    let cpu_vs = format!("vs {} (CPU)", v.ours());
    let mut t = Table::new(&["Competitor"], &["Req/s", &vs, "Client CPU µs/req", &cpu_vs]);
    for c in ranked(v, "client_keepalive", "req_per_s") {
        t.row(vec![
            v.display(c),
            v.cell("client_keepalive", c, "req_per_s"),
            v.ratio_cell("client_keepalive", c, "req_per_s"),
            v.cell("client_keepalive", c, "cpu_us_per_req"),
            v.ratio_cell("client_keepalive", c, "cpu_us_per_req"),
        ]);
    }
    emit(
        &mut out,
        v,
        &t,
        &["Client CPU µs/req: the client process's CPU time (all its threads, not the server's) in the \
           measurement window ÷ the requests completed in it. Every client talks to the same one-worker \
           spindle-http server on the same two cores; where the server limits the rate, req/s come out \
           level and the client's CPU per request tells the clients apart."],
    );
    out
}

/// Run `k`'s ratio `numerator[k] ÷ denominator[k]`, for every run number either side has;
/// `None` where either run has no value (it failed, or was not run) or the denominator is not
/// positive. Runs are paired by number only: nothing shifts to fill a gap.
pub fn run_ratios(numerator: &[Option<f64>], denominator: &[Option<f64>]) -> Vec<Option<f64>> {
    (0..numerator.len().max(denominator.len()))
        .map(|k| match (numerator.get(k).copied().flatten(), denominator.get(k).copied().flatten()) {
            (Some(n), Some(d)) if d > 0.0 => Some(n / d),
            _ => None,
        })
        .collect()
}

/// The largest of `ratios` and its run number (from 1); `None` when no run has one.
pub fn largest(ratios: &[Option<f64>]) -> Option<(f64, usize)> {
    ratios.iter().enumerate().filter_map(|(k, r)| Some(((*r)?, k + 1))).fold(
        None,
        |best, (r, k)| match best {
            Some((b, _)) if b >= r => best,
            _ => Some((r, k)),
        },
    )
}

fn times3(r: Option<f64>) -> String {
    r.map(|r| format!("{r:.3}×")).unwrap_or_else(|| "—".into())
}

/// The multi-worker check, run by run: `hello_2w`'s CPU µs/request over `hello_1w`'s, for each
/// competitor measured in both, with each run paired with the run of the same number.
fn cpu_run_by_run(out: &mut String, v: &View) {
    const METRIC: &str = "cpu_us_per_req";
    let (one, two) = ("hello_1w", "hello_2w");
    let names = v.competitors_for(&[one, two]);
    if names.is_empty() {
        return;
    }
    heading(out, "CPU per request, 2 workers over 1, run by run");
    out.push_str(&format!(
        "Run k's ratio is run k of `{two}`'s CPU µs/request ÷ run k of `{one}`'s. Runs are paired \
         by their number: run k of both cases comes from the same round of the interleaved \
         schedule, where a competitor's `{one}` run (a fresh server, pinned) is followed directly \
         by its `{two}` run (another fresh server, unpinned). The two are measured one after the \
         other, not at the same time. A run that failed, or was not run because an earlier \
         failure stopped that case, shows as — and its number has no ratio; no other run takes \
         its place.\n"
    ));
    let mut lacking = Vec::new();
    for c in names {
        let (Some(runs1), Some(runs2)) = (v.per_run(one, c, METRIC), v.per_run(two, c, METRIC)) else {
            let absent = if v.get(one, c, METRIC).is_none() { one } else { two };
            lacking.push(format!("{}: no table, it has no `{absent}` CPU µs/request.", v.display(c)));
            continue;
        };
        if runs1.is_empty() || runs2.is_empty() {
            lacking.push(format!("{}: no table, its results keep no per-run values.", v.display(c)));
            continue;
        }
        let ratios = run_ratios(runs2, runs1);
        let paired = ratios.iter().flatten().count();
        let summary = match largest(&ratios) {
            Some((r, k)) => {
                format!("largest {} (run {k}), over {paired} of {} runs", times3(Some(r)), ratios.len())
            }
            None => format!("no run has both cases measured ({} runs)", ratios.len()),
        };
        out.push_str(&format!("\n{}: {summary}.\n\n", v.display(c)));
        let mut t =
            Table::new(&["Run"], &[&format!("{one} CPU µs/req"), &format!("{two} CPU µs/req"), "2w ÷ 1w"]);
        let cell = |runs: &[Option<f64>], k: usize| opt(runs.get(k).copied().flatten());
        for (k, r) in ratios.iter().enumerate() {
            t.row(vec![(k + 1).to_string(), cell(runs1, k), cell(runs2, k), times3(*r)]);
        }
        let top = largest(&ratios).map(|(r, k)| format!("{} (run {k})", times3(Some(r))));
        t.row(vec!["largest".into(), String::new(), String::new(), top.unwrap_or_else(|| "—".into())]);
        out.push_str(&t.render());
    }
    if !lacking.is_empty() {
        out.push('\n');
        for line in lacking {
            out.push_str(&format!("- {line}\n"));
        }
    }
}

fn rpc_op_table(v: &View, cases: &[(&str, &str)], first: &str) -> Table {
    let vs = format!("vs {} (ns/op)", v.ours());
    let left: Vec<&str> = if first.is_empty() { vec!["Competitor"] } else { vec![first, "Competitor"] };
    let mut t = Table::new(&left, &["ns/op", "B/op", "allocs/op", &vs]);
    for (case, label) in cases {
        for c in v.competitors_for(&[case]) {
            let mut row = Vec::new();
            if !first.is_empty() {
                row.push(label.to_string());
            }
            row.extend([
                v.display(c),
                v.cell(case, c, "ns_per_op"),
                v.cell(case, c, "bytes_per_op"),
                v.cell(case, c, "allocs_per_op"),
                v.ratio_cell(case, c, "ns_per_op"),
            ]);
            t.row(row);
        }
    }
    t
}

fn rpc(v: &View) -> String {
    let mut out = String::new();
    heading(&mut out, "Unary throughput (32-byte payload)");
    emit(&mut out, v, &rpc_op_table(v, &[("unary_32", "")], ""), &[]);
    heading(&mut out, "Unary large messages");
    let sizes = [
        ("unary_64", "64B"),
        ("unary_1k", "1KB"),
        ("unary_10k", "10KB"),
        ("unary_100k", "100KB"),
        ("unary_1m", "1MB"),
    ];
    emit(&mut out, v, &rpc_op_table(v, &sizes, "Size"), &[]);
    heading(&mut out, "Server streaming (100 messages × 32 bytes)");
    emit(&mut out, v, &rpc_op_table(v, &[("server_stream_100x32", "")], ""), &[]);
    heading(&mut out, "Bidi streaming echo (send + receive per op)");
    emit(&mut out, v, &rpc_op_table(v, &[("bidi_echo", "")], ""), &[]);
    heading(&mut out, "Concurrent unary load");
    let conc = [("concurrent_10", "10"), ("concurrent_50", "50"), ("concurrent_100", "100")];
    emit(&mut out, v, &rpc_op_table(v, &conc, "Concurrency"), &[]);
    heading(&mut out, "Latency percentiles");
    let vs = format!("vs {} (p99)", v.ours());
    let mut t = Table::new(&["Competitor"], &["p50 (µs)", "p90 (µs)", "p95 (µs)", "p99 (µs)", &vs]);
    for c in v.competitors_for(&["latency"]) {
        let mut row = vec![v.display(c)];
        for p in ["p50_us", "p90_us", "p95_us", "p99_us"] {
            row.push(v.cell("latency", c, p));
        }
        row.push(v.ratio_cell("latency", c, "p99_us"));
        t.row(row);
    }
    emit(&mut out, v, &t, &[]);
    out
}

/// Rows whose (case, metric) the schema does not know, so that nothing printed is lost.
pub fn others(view: &View) -> String {
    let mut t = Table::new(&["Case", "Competitor", "Metric"], &["Value", "Unit", "Runs"]);
    for row in view.rows {
        if !view.suite.knows(&row.case, &row.metric) {
            t.row(vec![
                row.case.clone(),
                view.display(&row.competitor),
                row.metric.clone(),
                spread(row),
                row.unit.clone(),
                row.runs.to_string(),
            ]);
        }
    }
    if t.is_empty() {
        String::new()
    } else {
        format!(
            "\n#### Other measurements\n\nMeasurements outside the suite's schema, kept as printed.\n\n{}",
            t.render()
        )
    }
}
