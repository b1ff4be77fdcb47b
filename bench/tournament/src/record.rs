//! The output protocol of a peer run: one JSON object per line on stdout.
//!
//! `{"suite":"fibers","case":"switch","competitor":"go-goroutine","metric":"us_per_switch","value":0.081,"unit":"us"}`
//!
//! Classification of each stdout line:
//!
//! - a line that does not start with `{` (after whitespace) is ignored: the contract lets a
//!   program print progress or banners;
//! - a line that starts with `{` is meant as a measurement. It is a [`Sample`] when it is a
//!   JSON object with string `suite`, `case`, `competitor`, `metric`, a finite number `value`,
//!   and (optionally) a string `unit`, and its suite and competitor are the ones being run.
//!   Anything else is *malformed*: counted, and the first few reasons kept for the report.
//!
//! Extra fields (`runs`, say) are allowed and ignored. A missing `unit` takes the schema's unit.
//!
//! A peer that runs its cases one by one may say that one of them failed, and go on with the
//! others: `{"suite","case","competitor","error":"why"}` (a string `error` instead of `metric`
//! and `value`) is a [`Line::CaseError`], which the run keeps as a failure of that case.
//!
//! A successful measured run's samples travel on as a [`MeasuredRun`], which keeps which
//! measured run of the schedule they came from, so that runs of different cases can be paired.

use serde_json::Value;

use crate::suites::{default_unit, Suite};

/// One measurement of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The case within the suite.
    pub case: String,
    /// The metric name.
    pub metric: String,
    /// The measured value.
    pub value: f64,
    /// Its unit.
    pub unit: String,
}

/// The samples of one successful measured run, and which one it was.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredRun {
    /// The measured run's number in the schedule, from 0 (the warm-up run is not counted): run
    /// `index + 1` of `runs` in the report's and the progress lines' words.
    pub index: usize,
    /// Its measurements.
    pub samples: Vec<Sample>,
}

/// The measurements of one run's stdout.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// Well-formed measurements, in output order.
    pub samples: Vec<Sample>,
    /// How many lines were malformed.
    pub malformed: usize,
    /// Why, for the first few of them.
    pub malformed_examples: Vec<String>,
    /// Cases the peer says failed: (case, error).
    pub case_errors: Vec<(String, String)>,
}

/// How many malformed-line reasons are kept per run.
const KEPT_EXAMPLES: usize = 3;

/// What one stdout line is.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// Not meant as a measurement.
    Ignored,
    /// A measurement.
    Sample(Sample),
    /// The peer's word that one case failed: (case, error).
    CaseError(String, String),
    /// Meant as a measurement, but unusable for this reason.
    Malformed(String),
}

fn text_field<'a>(obj: &'a serde_json::Map<String, Value>, key: &str) -> Result<&'a str, String> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(format!("`{key}` is empty")),
        Some(_) => Err(format!("`{key}` is not a string")),
        None => Err(format!("missing `{key}`")),
    }
}

/// Classifies one stdout line of a run of `competitor` in `suite`.
pub fn parse_line(line: &str, suite: Suite, competitor: &str) -> Line {
    let line = line.trim();
    if !line.starts_with('{') {
        return Line::Ignored;
    }
    if let Some(failed) = case_error_of(line, suite, competitor) {
        return failed;
    }
    match sample_of(line, suite, competitor) {
        Ok(sample) => Line::Sample(sample),
        Err(reason) => Line::Malformed(reason),
    }
}

/// A case error line (module doc), if `line` is one of this run's.
fn case_error_of(line: &str, suite: Suite, competitor: &str) -> Option<Line> {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else { return None };
    let error = match obj.get("error") {
        Some(Value::String(e)) if !obj.contains_key("metric") => e,
        _ => return None,
    };
    let fields = (text_field(&obj, "suite"), text_field(&obj, "case"), text_field(&obj, "competitor"));
    match fields {
        (Ok(s), Ok(case), Ok(c)) if s == suite.name() && c == competitor => {
            Some(Line::CaseError(case.to_string(), error.clone()))
        }
        _ => Some(Line::Malformed("an error line of another suite or competitor, or without `case`".into())),
    }
}

fn sample_of(line: &str, suite: Suite, competitor: &str) -> Result<Sample, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(obj) = value else {
        return Err("not a JSON object".into());
    };
    let line_suite = text_field(&obj, "suite")?;
    let case = text_field(&obj, "case")?;
    let line_competitor = text_field(&obj, "competitor")?;
    let metric = text_field(&obj, "metric")?;
    let value = match obj.get("value") {
        Some(Value::Number(n)) => n.as_f64().ok_or("`value` is out of range")?,
        Some(_) => return Err("`value` is not a number".into()),
        None => return Err("missing `value`".into()),
    };
    if !value.is_finite() {
        return Err("`value` is not finite".into());
    }
    let unit = match obj.get("unit") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => default_unit(metric).to_string(),
        Some(_) => return Err("`unit` is not a string".into()),
    };
    if line_suite != suite.name() {
        return Err(format!("suite `{line_suite}` in a run of the {suite} suite"));
    }
    if line_competitor != competitor {
        return Err(format!("competitor `{line_competitor}` in a run of `{competitor}`"));
    }
    Ok(Sample { case: case.to_string(), metric: metric.to_string(), value, unit })
}

/// Parses a run's whole stdout.
pub fn parse_output(stdout: &str, suite: Suite, competitor: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for (number, line) in stdout.lines().enumerate() {
        match parse_line(line, suite, competitor) {
            Line::Ignored => {}
            Line::Sample(sample) => parsed.samples.push(sample),
            Line::CaseError(case, error) => parsed.case_errors.push((case, error)),
            Line::Malformed(reason) => {
                parsed.malformed += 1;
                if parsed.malformed_examples.len() < KEPT_EXAMPLES {
                    parsed.malformed_examples.push(format!("line {}: {reason}", number + 1));
                }
            }
        }
    }
    parsed
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"suite":"fibers","case":"switch","competitor":"go-goroutine","metric":"us_per_switch","value":0.081,"unit":"us"}"#;

    fn parse(line: &str) -> Line {
        parse_line(line, Suite::Fibers, "go-goroutine")
    }

    #[test]
    fn parses_a_good_line() {
        assert_eq!(
            parse(LINE),
            Line::Sample(Sample {
                case: "switch".into(),
                metric: "us_per_switch".into(),
                value: 0.081,
                unit: "us".into(),
            })
        );
    }

    #[test]
    fn integer_values_extra_fields_and_default_units() {
        let line = r#"  {"suite":"fibers","case":"alloc","competitor":"go-goroutine","metric":"bytes_per_unit","value":8192,"runs":5}  "#;
        let Line::Sample(s) = parse(line) else {
            panic!("not a sample");
        };
        assert_eq!(s.value, 8192.0);
        assert_eq!(s.unit, "bytes");
    }

    #[test]
    fn ignores_lines_that_are_not_objects() {
        assert_eq!(parse("warming up..."), Line::Ignored);
        assert_eq!(parse(""), Line::Ignored);
        assert_eq!(parse("[1, 2]"), Line::Ignored);
    }

    #[test]
    fn reports_malformed_lines_with_a_reason() {
        let cases = [
            (r#"{"suite":"fibers""#, "not JSON"),
            (
                r#"{"suite":"fibers","case":"switch","competitor":"go-goroutine","value":1}"#,
                "missing `metric`",
            ),
            (
                r#"{"suite":"fibers","case":"switch","competitor":"go-goroutine","metric":"x"}"#,
                "missing `value`",
            ),
            (
                r#"{"suite":"fibers","case":"switch","competitor":"go-goroutine","metric":"x","value":"1.0"}"#,
                "not a number",
            ),
            (
                r#"{"suite":"fibers","case":5,"competitor":"go-goroutine","metric":"x","value":1}"#,
                "`case` is not a string",
            ),
            (
                r#"{"suite":"tcp","case":"bind","competitor":"go-goroutine","metric":"ns_per_op","value":1}"#,
                "suite `tcp`",
            ),
            (
                r#"{"suite":"fibers","case":"alloc","competitor":"ruby-fiber","metric":"us_per_unit","value":1}"#,
                "competitor `ruby-fiber`",
            ),
            (
                r#"{"suite":"fibers","case":"","competitor":"go-goroutine","metric":"x","value":1}"#,
                "`case` is empty",
            ),
        ];
        for (line, expected) in cases {
            match parse(line) {
                Line::Malformed(reason) => assert!(reason.contains(expected), "{line}: {reason}"),
                other => panic!("{line}: {other:?}"),
            }
        }
    }

    #[test]
    fn case_error_lines_name_their_case() {
        let line = r#"{"suite":"fibers","case":"switch","competitor":"go-goroutine","error":"it crashed"}"#;
        assert_eq!(parse(line), Line::CaseError("switch".into(), "it crashed".into()));
        let other = r#"{"suite":"fibers","case":"switch","competitor":"node","error":"x"}"#;
        assert!(matches!(parse(other), Line::Malformed(_)));
        let out = format!("{LINE}\n{line}\n");
        let parsed = parse_output(&out, Suite::Fibers, "go-goroutine");
        assert_eq!((parsed.samples.len(), parsed.case_errors.len(), parsed.malformed), (1, 1, 0));
    }

    #[test]
    fn parse_output_counts_and_keeps_a_few_reasons() {
        let out = format!("banner\n{LINE}\n{{bad\n{{bad\n{LINE}\n{{bad\n{{bad\n");
        let parsed = parse_output(&out, Suite::Fibers, "go-goroutine");
        assert_eq!(parsed.samples.len(), 2);
        assert_eq!(parsed.malformed, 4);
        assert_eq!(parsed.malformed_examples.len(), KEPT_EXAMPLES);
        assert!(parsed.malformed_examples[0].starts_with("line 3:"));
    }
}
