//! End-to-end tests of the harness against fake peers: tiny `sh` programs that print the JSON
//! line protocol, in a temporary peers directory. They check what a tournament writes
//! (`results.jsonl`, `REPORT.md`, charts) and its exit code, never how fast anything is.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tournament::http::HttpSettings;
use tournament::suites::Suite;
use tournament::{Config, Outcome};

/// A fresh temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("tournament-it-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A shell snippet printing one tcp measurement of `competitor`.
fn line(competitor: &str, case: &str, metric: &str, value: &str) -> String {
    format!(
        "echo '{{\"suite\":\"tcp\",\"case\":\"{case}\",\"competitor\":\"{competitor}\",\"metric\":\"{metric}\",\"value\":'{value}'}}'"
    )
}

/// Writes `<peers>/<lang>/tcp.peer.toml` with one competitor running `script` under `sh`.
fn manifest(peers: &Path, lang: &str, extra: &str, name: &str, script: &str) {
    let dir = peers.join(lang.to_lowercase());
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("run.sh"), script).unwrap();
    let text = format!(
        "language = \"{lang}\"\nsuite = \"tcp\"\n{extra}\nversion = [\"sh\", \"-c\", \"echo {lang} 1.0\"]\n\n\
         [[competitor]]\nname = \"{name}\"\nrun = [\"sh\", \"run.sh\"]\nquick = [\"--quick\"]\ntimeout_s = 60\n\
         notes = \"a fake {lang} peer\"\n"
    );
    fs::write(dir.join("tcp.peer.toml"), text).unwrap();
}

/// spindle: the warm-up prints 1000 (discarded), then the measured runs print 10, 30, 20 ns
/// for `bind`; `idle_conns` is 500 bytes every time; and one banner line to ignore.
const SPINDLE: &str = r#"n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count
case $n in 1) v=1000;; 2) v=10;; 3) v=30;; *) v=20;; esac
echo "spindle tcp benchmark (banner line, ignored)"
"#;

/// Builds the peers directory of the main scenario and returns it.
fn scenario(root: &Path, spindle_fails: bool) -> PathBuf {
    let peers = root.join("peers");
    let spindle_script = if spindle_fails {
        "echo 'spindle: assertion failed' >&2; exit 3\n".to_string()
    } else {
        format!(
            "{SPINDLE}{}\n{}\n",
            line("spindle", "bind", "ns_per_op", "$v"),
            line("spindle", "idle_conns", "bytes_per_conn", "500")
        )
    };
    manifest(&peers, "Spindle", "", "spindle", &spindle_script);
    // tokio: 40 ns for bind every run (spindle's median of 20 is 2× ahead), 250 bytes per
    // connection (spindle is 2× behind), and a case outside the schema.
    manifest(
        &peers,
        "Rust",
        "requires = [\"sh\"]",
        "tokio",
        &format!(
            "{}\n{}\n{}\n",
            line("tokio", "bind", "ns_per_op", "40"),
            line("tokio", "idle_conns", "bytes_per_conn", "250"),
            line("tokio", "mystery", "widgets", "7")
        ),
    );
    // node crashes on every run.
    manifest(&peers, "Node", "", "node", "echo 'node: segfault in the event loop' >&2\nexit 7\n");
    // python's toolchain is missing and no apt package is named to install it.
    manifest(
        &peers,
        "Python",
        "requires = [\"no-such-python-4c1f\"]",
        "python-asyncio",
        &line("python-asyncio", "bind", "ns_per_op", "90"),
    );
    // A manifest that is not even TOML still gives its competitor a row.
    fs::create_dir_all(peers.join("ruby")).unwrap();
    fs::write(
        peers.join("ruby/tcp.peer.toml"),
        "language = \"Ruby\"\nsuite = \"tcp\"\nbuild = [[\"sh\", \"-c\", \"a \"quoted\" word\"]]\n\n\
         [[competitor]]\nname = \"ruby-evented\"\nrun = [\"ruby\", \"tcp.rb\"]\n",
    )
    .unwrap();
    peers
}

fn config(peers: PathBuf, out: PathBuf) -> Config {
    Config {
        peers_dir: peers,
        out,
        suites: vec![Suite::Tcp],
        quick: false,
        json: false,
        runs: 3,
        warmup: true,
        install: false,
        competitors: Vec::new(),
        http: HttpSettings::new(true),
        command: "tournament --suite tcp (integration test)".into(),
        progress: false,
    }
}

fn results(outcome: &Outcome) -> Vec<Value> {
    fs::read_to_string(&outcome.results)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn find<'a>(lines: &'a [Value], competitor: &str, case: &str, metric: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["competitor"] == competitor && l["case"] == case && l["metric"] == metric)
        .unwrap_or_else(|| panic!("no line for {competitor}/{case}/{metric} in {lines:#?}"))
}

fn error_of<'a>(lines: &'a [Value], competitor: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l["competitor"] == competitor && l.get("error").is_some())
        .and_then(|l| l["error"].as_str())
        .unwrap_or_else(|| panic!("no failure line for {competitor}"))
}

#[test]
fn a_tournament_writes_medians_failures_and_ratios() {
    let tmp = TempDir::new("main");
    let peers = scenario(&tmp.0, false);
    let out = tmp.0.join("out");
    let outcome = tournament::run(&config(peers, out.clone())).unwrap();
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.spindle_failures);
    assert!(outcome.spindle_failures.is_empty());

    // results.jsonl: the median of the three measured runs, their min and max; the warm-up's
    // 1000 is discarded.
    let lines = results(&outcome);
    let bind = find(&lines, "spindle", "bind", "ns_per_op");
    assert_eq!(bind["value"], 20.0);
    assert_eq!((bind["min"].as_f64(), bind["max"].as_f64()), (Some(10.0), Some(30.0)));
    assert_eq!(bind["runs"], 3);
    // Every measured run's value, in the order the runs ran (10, 30, 20 ns; not sorted).
    assert_eq!(bind["per_run"], serde_json::json!([10.0, 30.0, 20.0]));
    assert_eq!(bind["unit"], "ns");
    assert_eq!(bind["suite"], "tcp");
    let tokio = find(&lines, "tokio", "bind", "ns_per_op");
    assert_eq!((tokio["value"].as_f64(), tokio["runs"].as_u64()), (Some(40.0), Some(3)));
    assert_eq!(find(&lines, "tokio", "mystery", "widgets")["value"], 7.0);
    for l in lines.iter().filter(|l| l.get("error").is_none()) {
        let mut keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["case", "competitor", "max", "metric", "min", "per_run", "runs", "suite", "unit", "value"]
        );
    }
    // Failure lines: the crash (with its stderr), the missing toolchain, and the expected
    // competitors that have no manifest at all.
    let node = error_of(&lines, "node");
    assert!(node.contains("warm-up: exited with status 7"), "{node}");
    assert!(node.contains("segfault in the event loop"), "{node}");
    let python = error_of(&lines, "python-asyncio");
    assert!(python.contains("could not run: missing on PATH: no-such-python-4c1f"), "{python}");
    assert!(error_of(&lines, "go-goroutine").contains("no peer program yet"));
    let ruby = error_of(&lines, "ruby-evented");
    assert!(ruby.contains("manifest ruby/tcp.peer.toml is invalid: TOML parse error"), "{ruby}");
    assert!(!lines.iter().any(|l| l["competitor"] == "node" && l.get("value").is_some()));

    // REPORT.md.
    let md = fs::read_to_string(&outcome.report).unwrap();
    for text in [
        "# spindle tournament",
        "## Machine",
        "| Cores |",
        "| Kernel |",
        "| Spindle | tcp | Spindle 1.0 |",
        // Competitors table: every status.
        "| **spindle** | Spindle | ran 3 of 3 runs |",
        "| tokio | Rust | ran 3 of 3 runs |",
        "| node | Node | failed: warm-up: exited with status 7 |",
        "| python-asyncio | Python | could not run: missing on PATH: no-such-python-4c1f",
        "| go-goroutine |  | no peer program yet (no manifest names it) |",
        "- **tokio** (Rust): a fake Rust peer",
        "| ruby-evented |  | could not run: manifest ruby/tcp.peer.toml is invalid: TOML parse error",
        // Result tables: median (min–max), and the ratio column.
        "| **spindle** | Spindle | 20.00 (10.00–30.00) |",
        "| tokio | Rust | 40.00 | 25,000,000 | **2.00×** |",
        "#### Other measurements",
        // Failures keep the stderr tail.
        "### Failures",
        "node: segfault in the event loop",
        // Charts are embedded.
        "![bind(127.0.0.1:0), ns per op](charts/tcp-bind-ns_per_op.svg)",
    ] {
        assert!(md.contains(text), "REPORT.md lacks {text:?}:\n{md}");
    }
    // The summary: spindle 2× ahead on bind, 2× behind on bytes per connection, geometric
    // mean 1×.
    let summary = &md[md.find("## Summary").unwrap()..md.find("\n## tcp").unwrap()];
    for text in [
        "| Case | Metric | vs tokio |",
        "| bind | ns_per_op ↓ | **2.00×** |",
        "| idle_conns | bytes_per_conn ↓ | 0.50× |",
        "| **all** | geometric mean | **1.00×** |",
    ] {
        assert!(summary.contains(text), "summary lacks {text:?}:\n{summary}");
    }
    let svg = fs::read_to_string(out.join("charts/tcp-bind-ns_per_op.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("spindle") && svg.contains("tokio"));
}

#[test]
fn only_spindle_failures_fail_the_tournament() {
    let tmp = TempDir::new("spindle-fails");
    let peers = scenario(&tmp.0, true);
    let outcome = tournament::run(&config(peers, tmp.0.join("out"))).unwrap();
    assert_eq!(outcome.exit_code, 1);
    assert_eq!(outcome.spindle_failures.len(), 1);
    assert!(outcome.spindle_failures[0].contains("tcp/spindle"), "{:?}", outcome.spindle_failures);
    let lines = results(&outcome);
    assert!(error_of(&lines, "spindle").contains("spindle: assertion failed"));
    let md = fs::read_to_string(&outcome.report).unwrap();
    assert!(md.contains("**spindle** has no results in the tcp suite yet: failed: warm-up"), "{md}");
    // The peers that ran are still reported, side by side, without a "vs spindle" column.
    assert!(md.contains("| tokio | Rust | 40.00 | 25,000,000 |"), "{md}");
    assert!(!md.contains("| vs spindle |"));
}

#[test]
fn an_unknown_competitor_name_is_an_error_before_anything_runs() {
    let tmp = TempDir::new("unknown");
    let peers = scenario(&tmp.0, false);
    let out = tmp.0.join("out");
    let mut cfg = config(peers, out.clone());
    // `spindle` and `tokio` are known (a suite expects them, a manifest names them), the
    // misspelt one is not.
    cfg.competitors = vec!["spindle".into(), "tokoi".into(), "tokio".into()];
    let err = tournament::run(&cfg).expect_err("a misspelt competitor must not run an empty tournament");
    let msg = format!("{err:#}");
    assert!(msg.contains("competitor `tokoi`"), "{msg}");
    assert!(msg.contains("known: ") && msg.contains("tokio"), "{msg}");
    assert!(!out.join("results.jsonl").exists(), "nothing is written before the names are checked");
    cfg.competitors = vec!["spindle".into(), "tokio".into()];
    assert_eq!(tournament::run(&cfg).unwrap().exit_code, 0);
}

#[test]
fn a_suite_without_spindle_shows_a_slot_and_succeeds() {
    let tmp = TempDir::new("slot");
    let peers = tmp.0.join("peers");
    manifest(&peers, "Rust", "", "tokio", &line("tokio", "pingpong", "ns_per_op", "15000"));
    let mut cfg = config(peers, tmp.0.join("out"));
    cfg.runs = 1;
    cfg.warmup = false;
    cfg.quick = true;
    let outcome = tournament::run(&cfg).unwrap();
    assert_eq!(outcome.exit_code, 0);
    let md = fs::read_to_string(&outcome.report).unwrap();
    assert!(md.contains("| **spindle** |  | not yet implemented"), "{md}");
    assert!(md.contains("| tokio | Rust | 15,000 | 66,667 |"), "{md}");
    let lines = results(&outcome);
    assert!(error_of(&lines, "spindle").starts_with("not yet implemented"));
}

#[test]
fn the_binary_prints_json_lines_and_exits_zero() {
    let tmp = TempDir::new("binary");
    let peers = scenario(&tmp.0, false);
    let out = tmp.0.join("out");
    let done = Command::new(env!("CARGO_BIN_EXE_tournament"))
        .args(["--suite", "tcp", "--quick", "--json", "--no-install", "--no-progress"])
        .arg("--peers-dir")
        .arg(&peers)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    assert!(stderr.contains("REPORT.md"), "{stderr}");
    let stdout = String::from_utf8(done.stdout).unwrap();
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // --quick: one run, no warm-up, so spindle's only run is its first (1000 ns).
    assert_eq!(find(&lines, "spindle", "bind", "ns_per_op")["value"], 1000.0);
    assert_eq!(find(&lines, "spindle", "bind", "ns_per_op")["runs"], 1);
    assert_eq!(stdout, fs::read_to_string(out.join("results.jsonl")).unwrap());
    let md = fs::read_to_string(out.join("REPORT.md")).unwrap();
    assert!(md.contains("quick (smoke test"));
}
