//! Peer manifests: `bench/peers/<language>/<suite>.peer.toml`.
//!
//! The format is specified in `bench/peers/README.md`; this module parses it with serde and
//! checks what serde cannot:
//!
//! - the file name's suite and the `suite` field agree, and name a known suite;
//! - every competitor has a lowercase, hyphenated name, unique within the manifest, and a
//!   non-empty `run`; every `setup`/`build` step and `version` is a non-empty command;
//! - unknown keys are errors (a misspelt `setup_creates` would otherwise re-run setup forever).
//!
//! A manifest that fails to parse is not dropped: [`discover`] returns it as a
//! [`BrokenManifest`] with whatever competitor names could still be read, so the report can
//! give each of them a row that says why it did not run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::suites::Suite;

/// The suffix that marks a manifest file.
pub const MANIFEST_SUFFIX: &str = ".peer.toml";

/// The timeout of one run when the manifest gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// A command: program and arguments.
pub type Step = Vec<String>;

/// One parsed and checked manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The manifest file.
    pub path: PathBuf,
    /// Its directory: the working directory of every command, and the base of relative paths.
    pub dir: PathBuf,
    /// The language, as shown in the report.
    pub language: String,
    /// The suite its competitors take part in.
    pub suite: Suite,
    /// Executables that must be on PATH.
    pub requires: Vec<String>,
    /// Debian packages that provide them.
    pub apt: Vec<String>,
    /// One-time setup steps.
    pub setup: Vec<Step>,
    /// Setup runs only when this path (relative to `dir`) is missing.
    pub setup_creates: Option<String>,
    /// Build steps, run every tournament.
    pub build: Vec<Step>,
    /// Prints the toolchain version.
    pub version: Option<Step>,
    /// The competitors, in file order.
    pub competitors: Vec<Competitor>,
}

/// One competitor of a manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Competitor {
    /// Lowercase, hyphenated, language first.
    pub name: String,
    /// The command of one run.
    pub run: Step,
    /// Arguments appended in `--quick` mode.
    pub quick: Vec<String>,
    /// Extra environment of a run.
    pub env: BTreeMap<String, String>,
    /// How long one run may take before its process group is killed.
    pub timeout: Duration,
    /// How it is built and run, in one line, for the report.
    pub notes: String,
    /// Whether it also answers HTTP/2 with prior knowledge (h2c) on its port: the http suite
    /// then runs its `h2c_*` cases too (manifest `h2c = true`; default false).
    pub h2c: bool,
    /// The http suite's `client_keepalive` case: a command that measures an HTTP client and
    /// prints its JSON line, like a non-http peer (`--quick` appended in quick mode). The case
    /// runs only for competitors that name one (manifest `client = [...]`).
    pub client: Option<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    language: String,
    suite: String,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default)]
    apt: Vec<String>,
    #[serde(default)]
    setup: Vec<Step>,
    setup_creates: Option<String>,
    #[serde(default)]
    build: Vec<Step>,
    version: Option<Step>,
    #[serde(default, rename = "competitor")]
    competitors: Vec<RawCompetitor>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompetitor {
    name: String,
    run: Step,
    #[serde(default)]
    quick: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    timeout_s: Option<u64>,
    #[serde(default)]
    notes: String,
    #[serde(default)]
    h2c: bool,
    client: Option<Step>,
}

/// Why a manifest could not be used.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestError(pub String);

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ManifestError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ManifestError> {
    Err(ManifestError(msg.into()))
}

/// The suite a manifest's file name claims (`tcp.peer.toml` → `tcp`), if any.
pub fn suite_from_file_name(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()?.strip_suffix(MANIFEST_SUFFIX)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn check_step(what: &str, step: &Step) -> Result<(), ManifestError> {
    match step.first() {
        None => err(format!("{what} is an empty command")),
        Some(program) if program.trim().is_empty() => err(format!("{what} has an empty program name")),
        Some(_) => Ok(()),
    }
}

/// Parses and checks the text of the manifest at `path`.
pub fn parse(text: &str, path: &Path) -> Result<Manifest, ManifestError> {
    let raw: RawManifest = toml::from_str(text).map_err(|e| ManifestError(e.to_string()))?;
    let Some(suite) = Suite::from_name(&raw.suite) else {
        return err(format!("unknown suite `{}` (expected fibers, tcp, http, rpc or blocking)", raw.suite));
    };
    if let Some(from_file) = suite_from_file_name(path) {
        if from_file != raw.suite {
            return err(format!(
                "file is named `{from_file}{MANIFEST_SUFFIX}` but says suite = \"{}\"",
                raw.suite
            ));
        }
    }
    if raw.language.trim().is_empty() {
        return err("`language` is empty");
    }
    for (i, step) in raw.setup.iter().enumerate() {
        check_step(&format!("setup step {}", i + 1), step)?;
    }
    for (i, step) in raw.build.iter().enumerate() {
        check_step(&format!("build step {}", i + 1), step)?;
    }
    if let Some(version) = &raw.version {
        check_step("`version`", version)?;
    }
    if raw.competitors.is_empty() {
        return err("no [[competitor]] table");
    }
    let mut seen = BTreeSet::new();
    let mut competitors = Vec::with_capacity(raw.competitors.len());
    for c in raw.competitors {
        if !valid_name(&c.name) {
            return err(format!("competitor name `{}` is not lowercase and hyphenated", c.name));
        }
        if !seen.insert(c.name.clone()) {
            return err(format!("competitor `{}` appears twice", c.name));
        }
        check_step(&format!("`run` of competitor `{}`", c.name), &c.run)?;
        if let Some(client) = &c.client {
            check_step(&format!("`client` of competitor `{}`", c.name), client)?;
        }
        let timeout = match c.timeout_s {
            Some(0) => return err(format!("competitor `{}` has timeout_s = 0", c.name)),
            Some(secs) => Duration::from_secs(secs),
            None => DEFAULT_TIMEOUT,
        };
        competitors.push(Competitor {
            name: c.name,
            run: c.run,
            quick: c.quick,
            env: c.env,
            timeout,
            notes: c.notes.trim().to_string(),
            h2c: c.h2c,
            client: c.client,
        });
    }
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    Ok(Manifest {
        path: path.to_path_buf(),
        dir,
        language: raw.language.trim().to_string(),
        suite,
        requires: raw.requires,
        apt: raw.apt,
        setup: raw.setup,
        setup_creates: raw.setup_creates,
        build: raw.build,
        version: raw.version,
        competitors,
    })
}

/// A manifest file that could not be used, with what could still be read from it.
#[derive(Debug, Clone)]
pub struct BrokenManifest {
    /// The file.
    pub path: PathBuf,
    /// The suite its file name claims, when that is a known suite.
    pub suite: Option<Suite>,
    /// Competitor names read leniently from the file (may be empty).
    pub competitors: Vec<String>,
    /// Why it is broken.
    pub error: String,
}

/// Every manifest under a peers directory.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Manifests that parsed, sorted by path.
    pub manifests: Vec<Manifest>,
    /// Manifests that did not.
    pub broken: Vec<BrokenManifest>,
}

/// Reads the competitor names of a manifest that failed the strict parse.
fn lenient_names(text: &str) -> Vec<String> {
    let Ok(table) = text.parse::<toml::Table>() else {
        // Not even TOML: take the `name = "..."` lines of [[competitor]] tables.
        let mut names = Vec::new();
        let mut in_competitor = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_competitor = line == "[[competitor]]";
            } else if let Some(value) = line.strip_prefix("name").map(str::trim_start) {
                let quoted = value.strip_prefix('=').map(str::trim).unwrap_or("");
                let name = quoted.strip_prefix('"').and_then(|q| q.split('"').next());
                if let (true, Some(name)) = (in_competitor, name) {
                    names.push(name.to_string());
                }
            }
        }
        return names;
    };
    let Some(toml::Value::Array(list)) = table.get("competitor") else {
        return Vec::new();
    };
    list.iter().filter_map(|c| c.get("name")?.as_str().map(str::to_string)).collect()
}

/// Finds and parses `<peers_dir>/*/*.peer.toml`. A missing directory has no manifests.
pub fn discover(peers_dir: &Path) -> Discovery {
    let mut paths = Vec::new();
    if let Ok(langs) = fs::read_dir(peers_dir) {
        for lang in langs.flatten() {
            let Ok(files) = fs::read_dir(lang.path()) else {
                continue;
            };
            for file in files.flatten() {
                let path = file.path();
                if path.is_file() && suite_from_file_name(&path).is_some() {
                    paths.push(path);
                }
            }
        }
    }
    paths.sort();
    let mut found = Discovery::default();
    for path in paths {
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                found.broken.push(broken(&path, "", format!("cannot read: {e}")));
                continue;
            }
        };
        match parse(&text, &path) {
            Ok(manifest) => found.manifests.push(manifest),
            Err(e) => found.broken.push(broken(&path, &text, e.0)),
        }
    }
    found
}

fn broken(path: &Path, text: &str, error: String) -> BrokenManifest {
    BrokenManifest {
        path: path.to_path_buf(),
        suite: suite_from_file_name(path).and_then(Suite::from_name),
        competitors: lenient_names(text),
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
language = "Go"
suite = "fibers"
requires = ["go"]
apt = ["golang-go"]
setup = [["go", "mod", "download"]]
setup_creates = "go.sum"
build = [["go", "build", "-o", "bin/fibers", "./fibers"]]
version = ["go", "version"]

[[competitor]]
name = "go-goroutine"
run = ["bin/fibers", "-mode", "goroutine"]
quick = ["-quick"]
env = { GOMAXPROCS = "1" }
timeout_s = 120
notes = "go build, one P"

[[competitor]]
name = "go-locked-thread"
run = ["bin/fibers", "-mode", "thread"]
"#;

    fn path(name: &str) -> PathBuf {
        PathBuf::from("/peers/go").join(name)
    }

    #[test]
    fn parses_a_full_manifest() {
        let m = parse(GOOD, &path("fibers.peer.toml")).unwrap();
        assert_eq!(m.language, "Go");
        assert_eq!(m.suite, Suite::Fibers);
        assert_eq!(m.dir, PathBuf::from("/peers/go"));
        assert_eq!(m.requires, vec!["go"]);
        assert_eq!(m.apt, vec!["golang-go"]);
        assert_eq!(m.setup.len(), 1);
        assert_eq!(m.setup_creates.as_deref(), Some("go.sum"));
        assert_eq!(m.build[0][0], "go");
        assert_eq!(m.version, Some(vec!["go".to_string(), "version".to_string()]));
        assert_eq!(m.competitors.len(), 2);
        let c = &m.competitors[0];
        assert_eq!(c.name, "go-goroutine");
        assert_eq!(c.run, vec!["bin/fibers", "-mode", "goroutine"]);
        assert_eq!(c.quick, vec!["-quick"]);
        assert_eq!(c.env.get("GOMAXPROCS").map(String::as_str), Some("1"));
        assert_eq!(c.timeout, Duration::from_secs(120));
        assert_eq!(c.notes, "go build, one P");
        // Defaults.
        let d = &m.competitors[1];
        assert_eq!(d.timeout, DEFAULT_TIMEOUT);
        assert!(d.quick.is_empty() && d.env.is_empty() && d.notes.is_empty());
    }

    #[test]
    fn reads_the_http_suite_h2c_flag_and_client_command() {
        let text = "language = \"Rust\"\nsuite = \"http\"\n[[competitor]]\nname = \"spindle\"\nrun = [\"./server\"]\n\
                    h2c = true\nclient = [\"./server\", \"--client\", \"spindle\"]\n[[competitor]]\nname = \"node\"\nrun = [\"node\"]\n";
        let m = parse(text, &path("http.peer.toml")).unwrap();
        let (ours, node) = (&m.competitors[0], &m.competitors[1]);
        assert!(ours.h2c);
        assert_eq!(ours.client, Some(vec!["./server".to_string(), "--client".into(), "spindle".into()]));
        assert!(!node.h2c && node.client.is_none());
        let empty_client = text.replace("client = [\"./server\", \"--client\", \"spindle\"]", "client = []");
        assert!(error_of(&empty_client, "http.peer.toml").contains("`client` of competitor `spindle`"));
    }

    #[test]
    fn minimal_manifest_has_empty_lists() {
        let text =
            "language = \"C\"\nsuite = \"tcp\"\n[[competitor]]\nname = \"c-syscalls\"\nrun = [\"./bench\"]\n";
        let m = parse(text, &path("tcp.peer.toml")).unwrap();
        assert!(m.requires.is_empty() && m.apt.is_empty() && m.setup.is_empty());
        assert!(m.build.is_empty() && m.version.is_none() && m.setup_creates.is_none());
    }

    fn error_of(text: &str, file: &str) -> String {
        parse(text, &path(file)).unwrap_err().0
    }

    #[test]
    fn rejects_toml_syntax_errors() {
        let e = error_of("language = \"Go\nsuite =", "fibers.peer.toml");
        assert!(!e.is_empty());
    }

    #[test]
    fn rejects_unknown_keys_and_missing_fields() {
        let typo = GOOD.replace("setup_creates", "setup_create");
        assert!(error_of(&typo, "fibers.peer.toml").contains("setup_create"));
        let no_run = "language = \"Go\"\nsuite = \"fibers\"\n[[competitor]]\nname = \"go-x\"\n";
        assert!(error_of(no_run, "fibers.peer.toml").contains("run"));
        let no_lang = "suite = \"fibers\"\n[[competitor]]\nname = \"a\"\nrun = [\"x\"]\n";
        assert!(error_of(no_lang, "fibers.peer.toml").contains("language"));
    }

    #[test]
    fn rejects_bad_suites_names_and_commands() {
        assert!(error_of(GOOD, "tcp.peer.toml").contains("named `tcp.peer.toml`"));
        let gpu = GOOD.replace("suite = \"fibers\"", "suite = \"gpu\"");
        assert!(error_of(&gpu, "gpu.peer.toml").contains("unknown suite"));
        let caps = GOOD.replace("go-goroutine", "Go_Goroutine");
        assert!(error_of(&caps, "fibers.peer.toml").contains("lowercase"));
        let twice = GOOD.replace("go-locked-thread", "go-goroutine");
        assert!(error_of(&twice, "fibers.peer.toml").contains("twice"));
        let empty_run = GOOD.replace("run = [\"bin/fibers\", \"-mode\", \"thread\"]", "run = []");
        assert!(error_of(&empty_run, "fibers.peer.toml").contains("empty command"));
        let empty_build = GOOD
            .replace("build = [[\"go\", \"build\", \"-o\", \"bin/fibers\", \"./fibers\"]]", "build = [[]]");
        assert!(error_of(&empty_build, "fibers.peer.toml").contains("build step 1"));
        let zero = GOOD.replace("timeout_s = 120", "timeout_s = 0");
        assert!(error_of(&zero, "fibers.peer.toml").contains("timeout_s = 0"));
        let none = "language = \"Go\"\nsuite = \"fibers\"\n";
        assert!(error_of(none, "fibers.peer.toml").contains("no [[competitor]]"));
    }

    #[test]
    fn discover_keeps_broken_manifests_with_their_names() {
        let dir = std::env::temp_dir().join(format!("tournament-discover-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("go")).unwrap();
        fs::create_dir_all(dir.join("ruby")).unwrap();
        fs::write(dir.join("go/fibers.peer.toml"), GOOD).unwrap();
        fs::write(dir.join("go/notes.txt"), "not a manifest").unwrap();
        let bad = "language = \"Ruby\"\nsuite = \"fibers\"\nmystery = 1\n[[competitor]]\nname = \"ruby-fiber\"\nrun = [\"ruby\"]\n";
        fs::write(dir.join("ruby/fibers.peer.toml"), bad).unwrap();
        let found = discover(&dir);
        assert_eq!(found.manifests.len(), 1);
        assert_eq!(found.broken.len(), 1);
        let b = &found.broken[0];
        assert_eq!(b.suite, Some(Suite::Fibers));
        assert_eq!(b.competitors, vec!["ruby-fiber"]);
        assert!(b.error.contains("mystery"));
        fs::remove_dir_all(&dir).unwrap();
        assert!(discover(&dir).manifests.is_empty());
    }

    #[test]
    fn names_survive_a_toml_syntax_error() {
        let text = "language = \"Crystal\"\nbuild = [[\"sh\", \"a \"b\" c\"]]\n\n[[competitor]]\nname = \"crystal\"\n\
                    run = [\"x\"]\n\n[[competitor]]\nname=\"crystal-mt\"\n";
        assert!(text.parse::<toml::Table>().is_err());
        assert_eq!(lenient_names(text), ["crystal", "crystal-mt"]);
    }

    #[test]
    fn the_repositorys_manifests_parse_and_name_every_expected_competitor() {
        let peers = crate::cli::repo_root().unwrap().join("bench/peers");
        let found = discover(&peers);
        let broken: Vec<_> = found.broken.iter().map(|b| (b.path.clone(), b.error.clone())).collect();
        assert!(broken.is_empty(), "broken manifests: {broken:?}");
        for suite in Suite::ALL {
            let named: Vec<&str> = found
                .manifests
                .iter()
                .filter(|m| m.suite == suite)
                .flat_map(|m| m.competitors.iter().map(|c| c.name.as_str()))
                .collect();
            for name in suite.expected() {
                assert!(named.contains(name), "no {suite} manifest names {name}");
            }
        }
    }
}
