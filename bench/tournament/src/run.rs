//! Running the competitors of one suite: warm-up, then interleaved measured runs.
//!
//! Schedule:
//!
//! 1. The units of work are *slots*: one per competitor, or one per (competitor, case) in the
//!    http suite, where the harness drives each case separately (the `h2c_*` cases only for
//!    competitors whose manifest says `h2c = true`, the `client_keepalive` case only for those
//!    that name a `client` command, which runs like a non-http competitor).
//! 2. Unless disabled (quick mode), every slot runs once and the result is discarded.
//! 3. Then `runs` rounds: each round runs every slot once, in the same order, so drift on the
//!    machine (thermal, other load) hits every competitor alike.
//! 4. A slot's first failure (crash, timeout, no measurements) stops that slot: a crash tends
//!    to repeat, and repeated timeouts would cost the whole tournament's time. Runs that
//!    succeeded before it still count.
//!
//! Each successful measured run keeps its round's number ([`MeasuredRun::index`]), so run `k`
//! of one slot can be paired with run `k` of another: they ran in the same round. In the http
//! suite a competitor's slots are consecutive within a round, in [`http::CASES`] order, so its
//! `hello_1w` run `k` is followed directly by its `hello_2w` run `k`.
//!
//! A run of a non-http competitor succeeds when it exits 0 and prints at least one well-formed
//! measurement. Malformed lines do not fail the run but are reported against the competitor;
//! so are the cases the peer says failed (error lines, [`record::Line::CaseError`]): each is a
//! failure of the competitor, and its other cases still count.

use std::path::PathBuf;

use crate::http::{self, HttpRun, HttpSettings, HttpTools};
use crate::machine::{self, Contention};
use crate::manifest::Competitor;
use crate::proc::{self, Failure};
use crate::record::{self, MeasuredRun};
use crate::suites::Suite;
use crate::ui::Ui;

/// A competitor whose manifest set up fine.
#[derive(Debug, Clone)]
pub struct Entrant {
    /// The competitor.
    pub competitor: Competitor,
    /// Its manifest's directory (working directory of its runs).
    pub dir: PathBuf,
    /// Its manifest's language.
    pub language: String,
}

/// How to run a suite.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The suite.
    pub suite: Suite,
    /// Measured runs per slot.
    pub runs: usize,
    /// Whether to do one discarded warm-up run per slot first.
    pub warmup: bool,
    /// Append the competitors' `quick` arguments.
    pub quick: bool,
    /// Environment added to every run.
    pub env: Vec<(String, String)>,
    /// wrk settings (http suite).
    pub http: HttpSettings,
    /// wrk and taskset (http suite).
    pub tools: HttpTools,
    /// The http cases to run (http suite).
    pub http_cases: Vec<http::HttpCase>,
}

/// What the runs of one competitor gave.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The competitor.
    pub name: String,
    /// The samples of each successful measured run (per case, in the http suite), in the order
    /// they ran, each with its round's number.
    pub runs: Vec<MeasuredRun>,
    /// Failures, each with its context ("run 2 of 5", "hello_1w, warm-up").
    pub failures: Vec<Failure>,
    /// Malformed stdout lines over all runs.
    pub malformed: usize,
    /// Why, for the first few.
    pub malformed_examples: Vec<String>,
}

struct Slot<'a> {
    entrant: &'a Entrant,
    case: Option<http::HttpCase>,
    outcome: usize,
    stopped: bool,
}

impl Slot<'_> {
    fn label(&self) -> String {
        match self.case {
            Some(case) => format!("{} {}", self.entrant.competitor.name, case.name),
            None => self.entrant.competitor.name.clone(),
        }
    }
}

/// Runs every entrant of `plan.suite` per the module's schedule.
pub fn run_suite(plan: &Plan, entrants: &[Entrant], ui: &Ui) -> Vec<Outcome> {
    run_suite_sampled(plan, entrants, ui, &mut Contention::default())
}

/// [`run_suite`], sampling before every run how many other tasks are runnable on the machine
/// (none of the tournament's benchmark processes is alive then).
pub fn run_suite_sampled(
    plan: &Plan,
    entrants: &[Entrant],
    ui: &Ui,
    contention: &mut Contention,
) -> Vec<Outcome> {
    let mut outcomes: Vec<Outcome> =
        entrants.iter().map(|e| Outcome { name: e.competitor.name.clone(), ..Outcome::default() }).collect();
    let mut slots = Vec::new();
    for (i, entrant) in entrants.iter().enumerate() {
        if plan.suite == Suite::Http {
            for &case in http::cases_for(&plan.http_cases, &entrant.competitor) {
                slots.push(Slot { entrant, case: Some(case), outcome: i, stopped: false });
            }
        } else {
            slots.push(Slot { entrant, case: None, outcome: i, stopped: false });
        }
    }
    let rounds = usize::from(plan.warmup) + plan.runs;
    ui.start_suite(plan.suite, (slots.len() * rounds) as u64);
    for round in 0..rounds {
        let warmup = plan.warmup && round == 0;
        // The measured run's number from 0 (meaningless for the warm-up round).
        let index = round.saturating_sub(usize::from(plan.warmup));
        let context =
            if warmup { "warm-up".to_string() } else { format!("run {} of {}", index + 1, plan.runs) };
        for slot in &mut slots {
            if slot.stopped {
                ui.advance();
                continue;
            }
            ui.step(&format!("{} · {} · {context}", plan.suite, slot.label()));
            contention.samples.extend(machine::others_runnable());
            let outcome = &mut outcomes[slot.outcome];
            match run_once(plan, slot.entrant, slot.case) {
                Ok(parsed) => {
                    outcome.malformed += parsed.malformed;
                    for example in parsed.malformed_examples {
                        if outcome.malformed_examples.len() < 3 {
                            outcome.malformed_examples.push(example);
                        }
                    }
                    for (case, error) in parsed.case_errors {
                        // The first run that says a case failed stands for the later ones.
                        let known = format!("{case}, ");
                        if outcome.failures.iter().any(|f| f.what.starts_with(&known)) {
                            continue;
                        }
                        let failure = Failure::new(format!("{case}, {context}: {error}"), "");
                        ui.log(&format!("{}: {}", slot.label(), failure.what));
                        outcome.failures.push(failure);
                    }
                    if !warmup {
                        outcome.runs.push(MeasuredRun { index, samples: parsed.samples });
                    }
                }
                Err(mut failure) => {
                    let case = slot.case.map(|c| format!("{}, ", c.name)).unwrap_or_default();
                    failure.what = format!("{case}{context}: {}", failure.what);
                    ui.log(&format!("{}: {}", slot.label(), failure.what));
                    outcome.failures.push(failure);
                    slot.stopped = true;
                }
            }
            ui.advance();
        }
    }
    ui.finish_suite();
    outcomes
}

fn run_once(plan: &Plan, entrant: &Entrant, case: Option<http::HttpCase>) -> Result<record::Parsed, Failure> {
    let comp = &entrant.competitor;
    if let Some(case) = case.filter(|c| c.protocol != http::Protocol::Client) {
        let run = HttpRun {
            dir: &entrant.dir,
            settings: &plan.http,
            tools: &plan.tools,
            quick: plan.quick,
            env: &plan.env,
        };
        let samples = run.run_case(comp, case)?;
        return Ok(record::Parsed { samples, ..record::Parsed::default() });
    }
    let mut step = comp.run.clone();
    if plan.quick {
        step.extend(comp.quick.iter().cloned());
    }
    if let Some(client) = case.and(comp.client.as_ref()) {
        // The http suite's client case: the peer measures and prints, as in the other suites.
        step = client.clone();
        if plan.quick {
            step.push("--quick".into());
        }
    }
    let mut cmd = proc::command(&step, &entrant.dir);
    cmd.envs(plan.env.iter().map(|(k, v)| (k, v))).envs(&comp.env);
    let done = proc::run(&mut cmd, comp.timeout)
        .map_err(|e| Failure::new(format!("cannot start {}: {e}", proc::show(&step)), String::new()))?;
    if !done.exit.success() {
        return Err(Failure::new(done.exit.describe(), done.stderr));
    }
    let parsed = record::parse_output(&done.stdout, plan.suite, &comp.name);
    if parsed.samples.is_empty() {
        let mut what = "no measurements on stdout".to_string();
        for (case, error) in &parsed.case_errors {
            what += &format!("; {case}: {error}");
        }
        if parsed.malformed > 0 {
            what +=
                &format!(" ({} malformed lines; {})", parsed.malformed, parsed.malformed_examples.join("; "));
        }
        return Err(Failure::new(what, done.stderr));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn entrant(name: &str, script: &str) -> Entrant {
        Entrant {
            competitor: Competitor {
                name: name.into(),
                run: vec!["sh".into(), "-c".into(), script.into()],
                quick: vec!["quick-arg".into()],
                env: BTreeMap::from([("GREETING".to_string(), "hi".to_string())]),
                timeout: Duration::from_secs(30),
                notes: String::new(),
                h2c: false,
                client: None,
            },
            dir: std::env::temp_dir(),
            language: "sh".into(),
        }
    }

    fn plan(runs: usize, warmup: bool) -> Plan {
        Plan {
            suite: Suite::Tcp,
            runs,
            warmup,
            quick: false,
            env: vec![("EXTRA".into(), "1".into())],
            http: HttpSettings::new(true),
            tools: HttpTools::default(),
            http_cases: http::CASES.to_vec(),
        }
    }

    #[test]
    fn counts_runs_and_skips_the_warm_up() {
        let good = entrant(
            "tokio",
            r#"echo "{\"suite\":\"tcp\",\"case\":\"bind\",\"competitor\":\"tokio\",\"metric\":\"ns_per_op\",\"value\":$EXTRA}"; echo '{oops'"#,
        );
        let outcomes = run_suite(&plan(3, true), &[good], &Ui::hidden());
        let o = &outcomes[0];
        assert_eq!(o.runs.len(), 3);
        assert!(o.failures.is_empty());
        assert_eq!(o.runs[0].samples[0].value, 1.0);
        // The warm-up is not counted: the measured runs are numbered 0, 1, 2.
        let indices: Vec<usize> = o.runs.iter().map(|r| r.index).collect();
        assert_eq!(indices, [0, 1, 2]);
        // One malformed line per run, warm-up included.
        assert_eq!(o.malformed, 4);
        assert_eq!(o.malformed_examples.len(), 3);
    }

    #[test]
    fn a_failure_stops_the_slot_and_says_which_run() {
        let crash = entrant("node", "echo boom >&2; exit 7");
        let silent = entrant("python-asyncio", "echo hello");
        let outcomes = run_suite(&plan(3, false), &[crash, silent], &Ui::hidden());
        assert!(outcomes.iter().all(|o| o.runs.is_empty()));
        assert_eq!(outcomes[0].failures.len(), 1);
        assert_eq!(
            outcomes[0].failures[0],
            Failure { what: "run 1 of 3: exited with status 7".into(), stderr: "boom".into() }
        );
        assert_eq!(outcomes[1].failures[0].what, "run 1 of 3: no measurements on stdout");
    }

    #[test]
    fn a_case_error_is_a_failure_and_the_other_cases_count() {
        let script = r#"echo '{"suite":"tcp","case":"bind","competitor":"tokio","metric":"ns_per_op","value":5}'; echo '{"suite":"tcp","case":"pingpong","competitor":"tokio","error":"it crashed"}'"#;
        let outcomes = run_suite(&plan(2, true), &[entrant("tokio", script)], &Ui::hidden());
        let o = &outcomes[0];
        assert_eq!(o.runs.len(), 2, "the runs still count");
        let whats: Vec<_> = o.failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(whats, ["pingpong, warm-up: it crashed"], "said once, by the first run that said it");
    }

    #[test]
    fn http_without_wrk_fails_each_case() {
        let server = entrant("node", "sleep 30");
        let mut p = plan(1, false);
        p.suite = Suite::Http;
        let outcomes = run_suite(&p, &[server], &Ui::hidden());
        let whats: Vec<_> = outcomes[0].failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            whats,
            ["hello_1w, run 1 of 1: wrk is not installed", "hello_2w, run 1 of 1: wrk is not installed"]
        );
    }

    #[test]
    fn h2c_cases_run_only_for_h2c_servers_and_need_h2load() {
        let mut server = entrant("spindle", "sleep 30");
        server.competitor.h2c = true;
        let mut p = plan(1, false);
        p.suite = Suite::Http;
        p.tools.wrk = Some("/bin/true".into());
        p.http_cases.retain(|c| c.name != "hello_1w" && c.name != "hello_2w");
        let outcomes = run_suite(&p, &[server, entrant("node", "sleep 30")], &Ui::hidden());
        let whats: Vec<_> = outcomes[0].failures.iter().map(|f| f.what.as_str()).collect();
        assert_eq!(
            whats,
            ["h2c_1w, run 1 of 1: h2load is not installed", "h2c_2w, run 1 of 1: h2load is not installed"]
        );
        // No h2c and no client command: none of these cases is its.
        assert!(outcomes[1].failures.is_empty() && outcomes[1].runs.is_empty());
    }

    #[test]
    fn the_client_case_runs_the_client_command_with_quick() {
        // `sh -c SCRIPT sh --quick`: the value says whether `--quick` arrived as $1.
        let script = r#"if [ "$1" = --quick ]; then v=1; else v=2; fi; echo "{\"suite\":\"http\",\"case\":\"client_keepalive\",\"competitor\":\"spindle\",\"metric\":\"req_per_s\",\"value\":$v}""#;
        let mut client = entrant("spindle", "exit 9");
        client.competitor.client = Some(vec!["sh".into(), "-c".into(), script.into(), "sh".into()]);
        let mut p = plan(1, false);
        p.suite = Suite::Http;
        p.quick = true;
        p.http_cases.retain(|c| c.protocol == http::Protocol::Client);
        let outcomes = run_suite(&p, &[client], &Ui::hidden());
        assert!(outcomes[0].failures.is_empty(), "{:?}", outcomes[0].failures);
        assert_eq!(outcomes[0].runs.len(), 1);
        let sample = &outcomes[0].runs[0].samples[0];
        assert_eq!((sample.case.as_str(), sample.metric.as_str()), ("client_keepalive", "req_per_s"));
        assert_eq!(sample.value, 1.0, "the command got --quick as its argument");
    }
}
