//! From the samples of several runs to one row per (suite, case, competitor, metric).
//!
//! Each row keeps the median of the runs and their min and max, and how many runs reported the
//! metric. If one run prints the same (case, metric) twice, its last value counts, so a run
//! weighs the same as any other. The rows are also the `results.jsonl` schema:
//! `{"suite","case","competitor","metric","value","unit","runs","min","max"}`, and failures are
//! `{"suite","competitor","error"}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::Sample;
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

/// Aggregates the successful runs of one competitor; `runs[i]` holds the samples of run `i`.
pub fn aggregate(suite: Suite, competitor: &str, runs: &[Vec<Sample>]) -> Vec<Aggregate> {
    let mut groups: BTreeMap<Key, (Vec<f64>, String)> = BTreeMap::new();
    for run in runs {
        let mut last: BTreeMap<Key, &Sample> = BTreeMap::new();
        for sample in run {
            let key = (
                suite.case_index(&sample.case),
                sample.case.clone(),
                suite.metric_index(&sample.case, &sample.metric),
                sample.metric.clone(),
            );
            last.insert(key, sample);
        }
        for (key, sample) in last {
            let entry = groups.entry(key).or_insert_with(|| (Vec::new(), sample.unit.clone()));
            entry.0.push(sample.value);
        }
    }
    groups
        .into_iter()
        .filter_map(|((_, case, _, metric), (values, unit))| {
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
        let rows = aggregate(Suite::Fibers, "spindle", &runs);
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
        let rows = aggregate(Suite::Fibers, "spindle", &runs);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].value, rows[0].runs), (5.0, 1));
    }

    #[test]
    fn sorts_by_case_then_competitor_order() {
        let mut rows = aggregate(Suite::Tcp, "tokio", &[vec![s("pingpong", "ns_per_op", 1.0)]]);
        rows.extend(aggregate(Suite::Tcp, "spindle", &[vec![s("pingpong", "ns_per_op", 2.0)]]));
        rows.extend(aggregate(Suite::Tcp, "node", &[vec![s("bind", "ns_per_op", 3.0)]]));
        let order = vec!["spindle".to_string(), "tokio".to_string()];
        sort_rows(Suite::Tcp, &mut rows, &order);
        let got: Vec<_> = rows.iter().map(|r| (r.case.as_str(), r.competitor.as_str())).collect();
        assert_eq!(got, [("bind", "node"), ("pingpong", "spindle"), ("pingpong", "tokio")]);
    }

    #[test]
    fn rows_serialize_with_the_schema_names() {
        let row = &aggregate(Suite::Fibers, "spindle", &[vec![s("alloc", "us_per_unit", 1.5)]])[0];
        let json: serde_json::Value = serde_json::to_value(row).unwrap();
        let mut keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["case", "competitor", "max", "metric", "min", "runs", "suite", "unit", "value"]);
        let fail = FailureLine { suite: "tcp".into(), competitor: "node".into(), error: "x".into() };
        assert_eq!(
            serde_json::to_string(&fail).unwrap(),
            r#"{"suite":"tcp","competitor":"node","error":"x"}"#
        );
    }
}
