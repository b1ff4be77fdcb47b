//! SVG bar charts of each suite's key metrics, written to `<out>/charts/*.svg`.
//!
//! One horizontal bar per competitor, best first (at the top), spindle's bar in a distinct
//! colour, a whisker from the min to the max run, and the median printed beside the bar.
//! plotters is built with only its SVG backend: SVG text needs no font files.

use std::fs;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::markdown::num;
use crate::model::{ChartRef, View};
use crate::suites::{better, Better, Suite};

/// One bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The competitor.
    pub label: String,
    /// The median.
    pub value: f64,
    /// The fastest/smallest run.
    pub min: f64,
    /// The slowest/largest run.
    pub max: f64,
    /// Whether this is spindle's bar.
    pub ours: bool,
}

const OURS: RGBColor = RGBColor(214, 96, 28);
const PEER: RGBColor = RGBColor(72, 112, 168);

/// The (case, metric, title) charted for each suite.
pub fn key_metrics(suite: Suite) -> &'static [(&'static str, &'static str, &'static str)] {
    match suite {
        Suite::Fibers => &[
            ("alloc", "us_per_unit", "Allocation, µs per unit"),
            ("switch", "us_per_switch", "Context switch, µs"),
            ("alloc", "bytes_per_unit", "Memory, bytes per unit"),
            ("throughput", "total_ms", "Throughput round, total ms"),
        ],
        Suite::Tcp => &[
            ("bind", "ns_per_op", "bind(127.0.0.1:0), ns per op"),
            ("bind_concurrent", "ns_per_op", "Concurrent bind, ns per op"),
            ("accept_connect", "ns_per_op", "Accept + connect, ns per op"),
            ("pingpong", "ns_per_op", "Ping-pong, ns per round trip"),
            ("idle_conns", "bytes_per_conn", "Memory per idle connection, bytes"),
        ],
        Suite::Http => &[
            ("hello_1w", "req_per_s", "Hello world, 1 worker, req/s"),
            ("hello_2w", "req_per_s", "Hello world, 2 workers, req/s"),
            ("hello_1w", "cpu_us_per_req", "Hello world, 1 worker, CPU µs per request"),
        ],
        Suite::Rpc => &[
            ("unary_32", "ns_per_op", "Unary 32 B, ns per op"),
            ("unary_1m", "ns_per_op", "Unary 1 MB, ns per op"),
            ("server_stream_100x32", "ns_per_op", "Server streaming 100 × 32 B, ns per op"),
            ("bidi_echo", "ns_per_op", "Bidi echo, ns per op"),
            ("concurrent_50", "ns_per_op", "Concurrent unary (50), ns per op"),
            ("latency", "p99_us", "Latency p99, µs"),
        ],
        Suite::Blocking => &[
            ("pg_select1_1000", "queries_per_s", "PostgreSQL SELECT 1, 1,000 clients, queries/s"),
            ("pg_select1_1000", "cpu_us_per_query", "PostgreSQL SELECT 1, 1,000 clients, CPU µs per query"),
            ("pg_sleep_1000", "queries_per_s", "PostgreSQL pg_sleep(0.01), 1,000 clients, queries/s"),
            ("redis_1000", "ops_per_s", "Redis SET+GET, 1,000 clients, ops/s"),
            ("http_1000", "req_per_s", "HTTP GET, 1,000 clients, req/s"),
        ],
    }
}

/// Above this ratio of the longest bar to the shortest, the value axis is logarithmic: on a
/// linear axis a 0.03 µs switch next to a 17 µs one would be an invisible bar.
pub const LOG_SCALE_RATIO: f64 = 50.0;

/// Whether `bars` are drawn on a logarithmic axis.
pub fn wants_log_scale(bars: &[Bar]) -> bool {
    let positive = || bars.iter().map(|b| b.value.min(b.min)).filter(|v| *v > 0.0);
    let low = positive().fold(f64::INFINITY, f64::min);
    let high = bars.iter().map(|b| b.max.max(b.value)).fold(0.0f64, f64::max);
    bars.iter().all(|b| b.value > 0.0 && b.min > 0.0) && low.is_finite() && high / low > LOG_SCALE_RATIO
}

/// Draws a horizontal bar chart to `path`, on a logarithmic axis when the values span more
/// than [`LOG_SCALE_RATIO`] (the axis title then says so).
pub fn bar_chart(path: &Path, title: &str, axis: &str, bars: &[Bar]) -> Result<()> {
    let n = u32::try_from(bars.len()).context("too many bars")?;
    let height = 100 + 32 * n.max(1);
    let root = SVGBackend::new(path, (760, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let top = bars.iter().map(|b| b.max.max(b.value)).fold(0.0f64, f64::max);
    if wants_log_scale(bars) {
        let low = bars.iter().map(|b| b.value.min(b.min)).fold(f64::INFINITY, f64::min);
        // Whole decades around the data, with room on the right for the labels.
        let from = 10f64.powf(low.log10().floor());
        let to = 10f64.powf((top * 4.0).log10().ceil());
        let axis = format!("{axis}; logarithmic scale");
        draw(&root, title, &axis, bars, (from..to).log_scale(), from, &|b: &Bar| b.max.max(b.value) * 1.08)?;
    } else {
        let x_max = if top > 0.0 { top * 1.2 } else { 1.0 };
        draw(&root, title, axis, bars, 0f64..x_max, 0.0, &|b: &Bar| b.max.max(b.value) + x_max * 0.01)?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// Draws the bars on `root` with the value axis `x_spec`; bars start at `base` and each value
/// is printed at `text_x`.
fn draw<X>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    axis: &str,
    bars: &[Bar],
    x_spec: X,
    base: f64,
    text_x: &dyn Fn(&Bar) -> f64,
) -> Result<()>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let n = u32::try_from(bars.len()).context("too many bars")?;
    // Segment i is drawn from the bottom; put the first bar at the top. A segmented range
    // `0..k` has k + 1 segments (its end is included), so `0..n - 1` has one per bar; a
    // single bar keeps `0..1` (plotters cannot map the empty range `0..0`) and an empty slot.
    let last_segment = if n > 1 { n - 1 } else { 1 };
    let at = |i: usize| n - 1 - i as u32;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .margin_right(36)
        .x_label_area_size(42)
        .y_label_area_size(150)
        .build_cartesian_2d(x_spec, (0u32..last_segment).into_segmented())
        .map_err(|e| anyhow!("{e}"))?;
    let label_of = |v: &SegmentValue<u32>| match v {
        SegmentValue::CenterOf(i) if *i < n => bars[(n - 1 - i) as usize].label.clone(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(bars.len().max(1))
        .y_label_formatter(&label_of)
        .x_labels(6)
        .x_label_formatter(&|x| num(*x))
        .x_desc(axis)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let colour = if b.ours { OURS } else { PEER };
            let mut rect = Rectangle::new(
                [(base, SegmentValue::Exact(at(i))), (b.value, SegmentValue::Exact(at(i) + 1))],
                colour.filled(),
            );
            rect.set_margin(6, 6, 0, 0);
            rect
        }))
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .draw_series(bars.iter().enumerate().filter(|(_, b)| b.min < b.max).map(|(i, b)| {
            PathElement::new(
                vec![(b.min, SegmentValue::CenterOf(at(i))), (b.max, SegmentValue::CenterOf(at(i)))],
                BLACK.stroke_width(2),
            )
        }))
        .map_err(|e| anyhow!("{e}"))?;
    let style = TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    chart
        .draw_series(
            bars.iter().enumerate().map(|(i, b)| {
                Text::new(num(b.value), (text_x(b), SegmentValue::CenterOf(at(i))), style.clone())
            }),
        )
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// The bars of one (case, metric), best first.
pub fn bars(view: &View, case: &str, metric: &str) -> Vec<Bar> {
    let mut bars: Vec<Bar> = view
        .competitors_for(&[case])
        .into_iter()
        .filter_map(|c| {
            let row = view.get(case, c, metric)?;
            // A floor row is drawn (it shows how far everyone is from the limit) but labelled
            // as the limit, not ranked as a competitor.
            let label = if crate::suites::is_floor(c) {
                format!("{c} (floor, not a competitor)")
            } else {
                c.to_string()
            };
            Some(Bar { label, value: row.value, min: row.min, max: row.max, ours: c == view.ours() })
        })
        .collect();
    match better(metric) {
        Better::Lower => bars.sort_by(|a, b| a.value.total_cmp(&b.value)),
        Better::Higher => bars.sort_by(|a, b| b.value.total_cmp(&a.value)),
    }
    bars
}

/// Writes the charts of one suite into `charts_dir`; `Err` lists the charts that failed.
pub fn suite_charts(view: &View, charts_dir: &Path) -> (Vec<ChartRef>, Vec<String>) {
    let mut made = Vec::new();
    let mut errors = Vec::new();
    if let Err(e) = fs::create_dir_all(charts_dir) {
        errors.push(format!("cannot create {}: {e}", charts_dir.display()));
        return (made, errors);
    }
    for (case, metric, title) in key_metrics(view.suite) {
        let bars = bars(view, case, metric);
        if bars.is_empty() {
            continue;
        }
        let name = format!("{}-{case}-{metric}.svg", view.suite);
        let direction = match better(metric) {
            Better::Lower => "lower is better",
            Better::Higher => "higher is better",
        };
        let unit = view.get(case, &bars[0].label, metric).map(|r| r.unit.clone()).unwrap_or_default();
        let axis = format!("{metric} ({unit}; {direction}; whiskers: min–max)");
        match bar_chart(&charts_dir.join(&name), title, &axis, &bars) {
            Ok(()) => made.push(ChartRef { title: title.to_string(), file: format!("charts/{name}") }),
            Err(e) => errors.push(format!("chart {name}: {e}")),
        }
    }
    (made, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_labels() {
        let dir = std::env::temp_dir().join(format!("tournament-chart-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bars.svg");
        let bars = vec![
            Bar { label: "spindle".into(), value: 10.0, min: 9.0, max: 12.0, ours: true },
            Bar { label: "go-goroutine".into(), value: 25.0, min: 25.0, max: 25.0, ours: false },
        ];
        bar_chart(&path, "Switch, µs", "us_per_switch (us)", &bars).unwrap();
        let svg = fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        for text in ["spindle", "go-goroutine", "Switch, µs", "25.00"] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert!(!svg.contains("logarithmic"));
        // Values three decades apart go on a logarithmic axis.
        let wide = vec![
            Bar { label: "spindle".into(), value: 0.03, min: 0.02, max: 0.04, ours: true },
            Bar { label: "go-locked-thread".into(), value: 17.0, min: 15.0, max: 20.0, ours: false },
        ];
        assert!(wants_log_scale(&wide) && !wants_log_scale(&bars));
        bar_chart(&path, "Switch, µs", "us_per_switch (us)", &wide).unwrap();
        let svg = fs::read_to_string(&path).unwrap();
        assert!(svg.contains("logarithmic scale") && svg.contains("0.0300"), "{svg}");
        // One bar: the degenerate range still draws it, labelled.
        let one = &bars[..1];
        bar_chart(&path, "One", "x", one).unwrap();
        let svg = fs::read_to_string(&path).unwrap();
        assert!(svg.contains("spindle") && svg.contains("10.00"), "{svg}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
