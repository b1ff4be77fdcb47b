//! The summary of ratios: spindle (spindle-grpc in the rpc suite) against each peer, for every
//! measured (case, metric) of a suite.
//!
//! Every ratio is phrased so that `> 1×` means spindle is ahead, whatever the metric's
//! direction (see [`crate::suites::advantage`]). The last row is the geometric mean of each
//! peer's ratios, the only mean that treats "2× ahead" and "2× behind" symmetrically.
//!
//! Floor rows ([`crate::suites::FLOOR_ROWS`]) measure a limit, not a competitor: they get no
//! column and no place in the means; a line below the table says how many times each limit
//! spindle costs.

use crate::markdown::{ratio, Table};
use crate::model::{Entry, View, SPINDLE_MISSING};
use crate::suites::{better, is_floor, Better};

fn arrow(metric: &str) -> &'static str {
    match better(metric) {
        Better::Lower => "↓",
        Better::Higher => "↑",
    }
}

/// Geometric mean of positive ratios; `None` for none.
pub fn geometric_mean(ratios: &[f64]) -> Option<f64> {
    if ratios.is_empty() {
        return None;
    }
    let log_sum: f64 = ratios.iter().map(|r| r.ln()).sum();
    Some((log_sum / ratios.len() as f64).exp())
}

/// The summary section of one suite.
pub fn render(view: &View) -> String {
    let ours = view.ours();
    let mut cases: Vec<&str> = view.suite.cases().iter().map(|c| c.name).collect();
    for row in view.rows {
        if !cases.contains(&row.case.as_str()) {
            cases.push(&row.case);
        }
    }
    let everyone = view.competitors_for(&cases);
    if !everyone.contains(&ours) {
        let why = view
            .entries
            .iter()
            .find(|e| e.name == ours)
            .map(Entry::status_text)
            .unwrap_or_else(|| SPINDLE_MISSING.into());
        return format!("**{ours}** has no results in the {} suite yet: {why}.\n", view.suite);
    }
    // spindle's other configurations (spindle-mt, spindle-grpc-mt) are not peers: their rows
    // are in the suite's table, the ratios are those of `ours`. Floor rows are not peers either:
    // they are stated apart, below the ranking.
    let floors: Vec<&str> = everyone.iter().copied().filter(|c| is_floor(c)).collect();
    let peers: Vec<&str> = everyone
        .into_iter()
        .filter(|c| *c != ours && !crate::suites::is_spindle(c) && !is_floor(c))
        .collect();
    if peers.is_empty() {
        return format!(
            "No peer has results in the {} suite yet, so there is nothing to compare {ours} with.\n{}",
            view.suite,
            floor_lines(view, &floors)
        );
    }
    // (case, metric) pairs in schema order, then any others in row order.
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for case in view.suite.cases() {
        for metric in case.metrics {
            pairs.push((case.name, metric));
        }
    }
    for row in view.rows {
        let pair = (row.case.as_str(), row.metric.as_str());
        if !pairs.contains(&pair) {
            pairs.push(pair);
        }
    }
    let headers: Vec<String> = peers.iter().map(|p| format!("vs {p}")).collect();
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut table = Table::new(&["Case", "Metric"], &header_refs);
    let mut per_peer: Vec<Vec<f64>> = vec![Vec::new(); peers.len()];
    let mut unmeasured = Vec::new();
    for (case, metric) in pairs {
        let peers_have = peers.iter().any(|p| view.get(case, p, metric).is_some());
        if view.get(case, ours, metric).is_none() {
            if peers_have {
                unmeasured.push(format!("{case}/{metric}"));
            }
            continue;
        }
        if !peers_have {
            continue;
        }
        let mut row = vec![case.to_string(), format!("{metric} {}", arrow(metric))];
        for (i, peer) in peers.iter().enumerate() {
            let r = view.advantage(case, peer, metric);
            if let Some(r) = r {
                per_peer[i].push(r);
            }
            row.push(ratio(r));
        }
        table.row(row);
    }
    let mut out = String::new();
    if table.is_empty() {
        out.push_str(&format!(
            "{ours} and its peers have no measurement in common in the {} suite.\n",
            view.suite
        ));
    } else {
        let mut mean_row = vec!["**all**".to_string(), "geometric mean".to_string()];
        mean_row.extend(per_peer.iter().map(|r| ratio(geometric_mean(r))));
        table.row(mean_row);
        out.push_str(&table.render());
    }
    if !unmeasured.is_empty() {
        out.push_str(&format!(
            "\n{ours} has no measurement for {}, which peers measured.\n",
            unmeasured.join(", ")
        ));
    }
    out.push_str(&floor_lines(view, &floors));
    out
}

/// The floor rows' lines: what each limit measured and how far spindle is above it. Not part of
/// the ranking or the geometric means.
fn floor_lines(view: &View, floors: &[&str]) -> String {
    let ours = view.ours();
    let mut out = String::new();
    for floor in floors {
        for row in view.rows.iter().filter(|r| r.competitor == *floor) {
            let Some(spindle) = view.value(&row.case, ours, &row.metric) else {
                continue;
            };
            // How many times the limit spindle costs (or reaches, for a rate): ≥ 1× by nature.
            let times = match better(&row.metric) {
                Better::Lower => spindle / row.value,
                Better::Higher => row.value / spindle,
            };
            if !times.is_finite() || times <= 0.0 {
                continue;
            }
            out.push_str(&format!(
                "\n**Floor, not a competitor:** {floor} ({case} {metric}) = {value} {unit}; \
                 {ours} is {times:.1}× that limit.\n",
                case = row.case,
                metric = row.metric,
                value = crate::markdown::num(row.value),
                unit = row.unit,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometric_mean_is_symmetric() {
        assert_eq!(geometric_mean(&[]), None);
        let g = geometric_mean(&[2.0, 0.5]).unwrap();
        assert!((g - 1.0).abs() < 1e-12);
        let g = geometric_mean(&[4.0, 1.0]).unwrap();
        assert!((g - 2.0).abs() < 1e-12);
    }
}
