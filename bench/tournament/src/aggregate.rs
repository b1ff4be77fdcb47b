//! From the samples of several runs to one row per (suite, case, competitor, metric).
//!
//! Each row keeps the median of the runs and their min and max, how many runs reported the
//! metric, and every planned measured run's own value in run order (`per_run`, `null` for a run
//! that failed, was not run or did not report the metric), so that runs of two cases can be
//! paired by their number. If one run prints the same (case, metric) twice, its last value
//! counts, so a run weighs the same as any other. The rows are also the `results.jsonl` schema:
//! `{"suite","case","competitor","metric","value","unit","runs","min","max","per_run"}`, and
//! failures are `{"suite","competitor","error"}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{MeasuredRun, Sample};
use crate::suites::Suite;

/// One aggregated measurement: a line of `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// The suite.
    pub suite: String,
    /// The case within the suite.
    pub case: String,
    /// The competitor.
    pub competitor: String,
    /// The metric.
    pub metric: String,
    /// The median over the runs.
    pub value: f64,
    /// The unit of `value`, `min` and `max`.
    pub unit: String,
    /// How many runs reported this metric.
    pub runs: usize,
    /// The smallest value of any run.
    pub min: f64,
    /// The largest value of any run.
    pub max: f64,
    /// Each measured run's value, by run number (`per_run[k]` is run `k + 1`), `None` where
    /// that run gave none: the values behind `value`, `min` and `max`. As long as the planned
    /// runs, or longer if a run numbered beyond them reported.
    #[serde(default)]
    pub per_run: Vec<Option<f64>>,
}

/// A competitor that could not run, or whose runs went wrong: a line of `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureLine {
    /// The suite.
    pub suite: String,
    /// The competitor.
    pub competitor: String,
    /// What went wrong, with the tail of stderr where there was one.
    pub error: String,
}

/// The median of `values`: the middle value, or the mean of the two middle values for an even
/// count. `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 { sorted[mid] } else { (sorted[mid - 1] + sorted[mid]) / 2.0 })
}

type Key = (usize, String, usize, String);

/// The values of one (case, metric) over the runs: in the order they ran, and by run number.
struct Group {
    values: Vec<f64>,
    per_run: Vec<Option<f64>>,
    unit: String,
}

/// Aggregates the successful runs of one competitor, `planned` measured runs having been
/// planned; each run's values go to `per_run` at its [`MeasuredRun::index`].
pub fn aggregate(suite: Suite, competitor: &str, runs: &[MeasuredRun], planned: usize) -> Vec<Aggregate> {
    let slots = runs.iter().map(|r| r.index + 1).fold(planned, usize::max);
    let mut groups: BTreeMap<Key, Group> = BTreeMap::new();
    for run in runs {
        let mut last: BTreeMap<Key, &Sample> = BTreeMap::new();
        for sample in &run.samples {
            let key = (
                suite.case_index(&sample.case),
                sample.case.clone(),
                suite.metric_index(&sample.case, &sample.metric),
                sample.metric.clone(),
            );
            last.insert(key, sample);
        }
        for (key, sample) in last {
            let group = groups.entry(key).or_insert_with(|| Group {
                values: Vec::new(),
                per_run: vec![None; slots],
                unit: sample.unit.clone(),
            });
            group.values.push(sample.value);
            group.per_run[run.index] = Some(sample.value);
        }
    }
    groups
        .into_iter()
        .filter_map(|((_, case, _, metric), Group { values, per_run, unit })| {
            let value = median(&values)?;
            Some(Aggregate {
                suite: suite.name().to_string(),
                case,
                competitor: competitor.to_string(),
                metric,
                value,
                unit,
                runs: values.len(),
                min: values.iter().copied().fold(f64::INFINITY, f64::min),
                max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                per_run,
            })
        })
        .collect()
}

/// Sorts a suite's rows by case (schema order), then competitor (`order`, unknown last), then
/// metric (schema order).
pub fn sort_rows(suite: Suite, rows: &mut [Aggregate], order: &[String]) {
    let rank = |name: &str| order.iter().position(|o| o == name).unwrap_or(order.len());
    rows.sort_by(|a, b| {
        let ka = (
            suite.case_index(&a.case),
            &a.case,
            rank(&a.competitor),
            &a.competitor,
            suite.metric_index(&a.case, &a.metric),
            &a.metric,
        );
        let kb = (
            suite.case_index(&b.case),
            &b.case,
            rank(&b.competitor),
            &b.competitor,
            suite.metric_index(&b.case, &b.metric),
            &b.metric,
        );
        ka.cmp(&kb)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(case: &str, metric: &str, value: f64) -> Sample {
        Sample { case: case.into(), metric: metric.into(), value, unit: "us".into() }
    }

    /// Runs numbered 0, 1, 2, … in the order given.
    fn numbered(runs: Vec<Vec<Sample>>) -> Vec<MeasuredRun> {
        runs.into_iter().enumerate().map(|(index, samples)| MeasuredRun { index, samples }).collect()
    }

    fn run(index: usize, samples: Vec<Sample>) -> MeasuredRun {
        MeasuredRun { index, samples }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[4.0]), Some(4.0));
        assert_eq!(median(&[9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0, 7.0]), Some(7.0));
    }

    #[test]
    fn aggregates_median_min_max_and_run_count() {
        let runs = vec![
            vec![s("switch", "us_per_switch", 3.0), s("alloc", "us_per_unit", 10.0)],
            vec![s("switch", "us_per_switch", 1.0), s("alloc", "us_per_unit", 12.0)],
            vec![s("switch", "us_per_switch", 2.0)],
            vec![s("switch", "us_per_switch", 8.0)],
        ];
        let rows = aggregate(Suite::Fibers, "spindle", &numbered(runs), 4);
        assert_eq!(rows.len(), 2);
        // Schema order: alloc before switch.
        let alloc = &rows[0];
        assert_eq!((alloc.case.as_str(), alloc.metric.as_str()), ("alloc", "us_per_unit"));
        assert_eq!((alloc.value, alloc.min, alloc.max, alloc.runs), (11.0, 10.0, 12.0, 2));
        let switch = &rows[1];
        assert_eq!(switch.value, 2.5);
        assert_eq!((switch.min, switch.max, switch.runs), (1.0, 8.0, 4));
        assert_eq!(switch.suite, "fibers");
        assert_eq!(switch.competitor, "spindle");
        assert_eq!(switch.unit, "us");
    }

    #[test]
    fn a_repeated_metric_counts_once_per_run() {
        let runs = vec![vec![s("throughput", "total_ms", 100.0), s("throughput", "total_ms", 5.0)]];
        let rows = aggregate(Suite::Fibers, "spindle", &numbered(runs), 1);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].value, rows[0].runs), (5.0, 1));
    }

    #[test]
    fn sorts_by_case_then_competitor_order() {
        let mut rows = aggregate(Suite::Tcp, "tokio", &[run(0, vec![s("pingpong", "ns_per_op", 1.0)])], 1);
        rows.extend(aggregate(Suite::Tcp, "spindle", &[run(0, vec![s("pingpong", "ns_per_op", 2.0)])], 1));
        rows.extend(aggregate(Suite::Tcp, "node", &[run(0, vec![s("bind", "ns_per_op", 3.0)])], 1));
        let order = vec!["spindle".to_string(), "tokio".to_string()];
        sort_rows(Suite::Tcp, &mut rows, &order);
        let got: Vec<_> = rows.iter().map(|r| (r.case.as_str(), r.competitor.as_str())).collect();
        assert_eq!(got, [("bind", "node"), ("pingpong", "spindle"), ("pingpong", "tokio")]);
    }

    #[test]
    fn rows_serialize_with_the_schema_names() {
        let runs = [run(1, vec![s("alloc", "us_per_unit", 1.5)])];
        let row = &aggregate(Suite::Fibers, "spindle", &runs, 2)[0];
        let json: serde_json::Value = serde_json::to_value(row).unwrap();
        let mut keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            ["case", "competitor", "max", "metric", "min", "per_run", "runs", "suite", "unit", "value"]
        );
        // A run without a value is `null`, not left out: the positions are the run numbers.
        assert_eq!(json["per_run"], serde_json::json!([null, 1.5]));
        // A line written before `per_run` existed still reads, with no per-run values.
        let old = r#"{"suite":"tcp","case":"bind","competitor":"node","metric":"ns_per_op","value":2.0,"unit":"ns","runs":1,"min":2.0,"max":2.0}"#;
        let old: Aggregate = serde_json::from_str(old).unwrap();
        assert!(old.per_run.is_empty());
        let fail = FailureLine { suite: "tcp".into(), competitor: "node".into(), error: "x".into() };
        assert_eq!(
            serde_json::to_string(&fail).unwrap(),
            r#"{"suite":"tcp","competitor":"node","error":"x"}"#
        );
    }

    #[test]
    fn per_run_values_keep_the_run_order() {
        // Medians sort their values; per_run must not: run 1 was 3, run 2 was 1, run 3 was 2.
        let runs = numbered(vec![
            vec![s("switch", "us_per_switch", 3.0)],
            vec![s("switch", "us_per_switch", 1.0)],
            vec![s("switch", "us_per_switch", 2.0)],
        ]);
        let rows = aggregate(Suite::Fibers, "spindle", &runs, 3);
        assert_eq!(rows[0].per_run, [Some(3.0), Some(1.0), Some(2.0)]);
        assert_eq!(rows[0].value, 2.0);
    }

    #[test]
    fn per_run_values_sit_at_their_run_number_with_gaps_for_missing_runs() {
        // The http suite's shape: one run per case per round. hello_1w failed in run 2 (its
        // slot stopped, so runs 2 to 4 have nothing), hello_2w ran all four.
        let runs = vec![
            run(0, vec![s("hello_1w", "cpu_us_per_req", 10.0)]),
            run(0, vec![s("hello_2w", "cpu_us_per_req", 11.0)]),
            run(1, vec![s("hello_2w", "cpu_us_per_req", 12.0)]),
            run(2, vec![s("hello_2w", "cpu_us_per_req", 13.0)]),
            run(3, vec![s("hello_2w", "cpu_us_per_req", 14.0)]),
        ];
        let rows = aggregate(Suite::Http, "spindle", &runs, 4);
        let one = rows.iter().find(|r| r.case == "hello_1w").unwrap();
        let two = rows.iter().find(|r| r.case == "hello_2w").unwrap();
        assert_eq!(one.per_run, [Some(10.0), None, None, None]);
        assert_eq!((one.runs, one.value), (1, 10.0));
        assert_eq!(two.per_run, [Some(11.0), Some(12.0), Some(13.0), Some(14.0)]);
        // A metric one run did not print is missing in that run only.
        let runs = vec![
            run(0, vec![s("alloc", "us_per_unit", 1.0), s("alloc", "bytes_per_unit", 8.0)]),
            run(1, vec![s("alloc", "us_per_unit", 2.0)]),
            run(2, vec![s("alloc", "us_per_unit", 3.0), s("alloc", "bytes_per_unit", 9.0)]),
        ];
        let rows = aggregate(Suite::Fibers, "go-goroutine", &runs, 3);
        let bytes = rows.iter().find(|r| r.metric == "bytes_per_unit").unwrap();
        assert_eq!(bytes.per_run, [Some(8.0), None, Some(9.0)]);
    }
}
