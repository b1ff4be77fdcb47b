//! Parsing h2load's text report and its per-request log (nghttp2's h2load 1.x).
//!
//! The report lines read, by their shape:
//!
//! ```text
//! finished in 1.00s, 42754.00 req/s, 1.60MB/s                                  <- req/s
//! requests: 42754 total, 42818 started, 42754 done, 42754 succeeded, 0 failed, 0 errored, 0 timeout
//! status codes: 42754 2xx, 0 3xx, 0 4xx, 0 5xx
//! time for request:      500us      6.51ms      1.21ms       460us    80.30%  <- min max mean
//! ```
//!
//! h2load prints no percentiles, so the 99th percentile comes from its `--log-file`: one line
//! per request, tab-separated, start time (µs since the epoch), status, µs until the end of
//! the response. Times in the report use wrk's units ([`crate::wrk::time_us`]).

use crate::wrk::time_us;

/// What an h2load run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct H2loadReport {
    /// Completed requests (`done`).
    pub requests: u64,
    /// `req/s` of the `finished in` line.
    pub req_per_s: f64,
    /// Mean request time, µs.
    pub avg_us: f64,
    /// Requests that did not succeed: failed, errored and timed out.
    pub failed: u64,
    /// Responses with a 4xx or 5xx status.
    pub non_2xx: u64,
}

fn field(line: &str, name: &str) -> Option<u64> {
    // "42754 total, 42818 started, ..." -> the number before `name`.
    line.split(',').find_map(|part| {
        let mut words = part.split_whitespace();
        let number = words.next()?;
        (words.next() == Some(name)).then(|| number.parse().ok()).flatten()
    })
}

/// Parses h2load's report; the error names the first thing that was missing.
pub fn parse(output: &str) -> Result<H2loadReport, String> {
    let mut req_per_s = None;
    let mut avg_us = None;
    let mut counts = None;
    let mut non_2xx = 0;
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("finished in ") {
            req_per_s = rest.split(',').nth(1).and_then(|s| s.trim().strip_suffix(" req/s")?.parse().ok());
        } else if let Some(rest) = line.strip_prefix("requests:") {
            let rest = rest.trim();
            let done = field(rest, "done");
            let bad = ["failed", "errored", "timeout"].iter().map(|n| field(rest, n)).sum::<Option<u64>>();
            counts = done.zip(bad);
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            non_2xx = field(rest.trim(), "4xx").unwrap_or(0) + field(rest.trim(), "5xx").unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("time for request:") {
            avg_us = rest.split_whitespace().nth(2).and_then(time_us);
        }
    }
    let req_per_s = req_per_s.ok_or("no `finished in …, N req/s` line")?;
    let (requests, failed) = counts.ok_or("no `requests: … done, … failed, … errored, … timeout` line")?;
    let avg_us = avg_us.ok_or("no `time for request:` line")?;
    Ok(H2loadReport { requests, req_per_s, avg_us, failed, non_2xx })
}

/// The mean and the 99th percentile of the third column of h2load's `--log-file` (µs until
/// the end of each response), or `None` when the log has no readable line. The report's mean
/// has only three significant digits; this one is exact.
pub fn log_stats_us(log: &str) -> Option<(f64, f64)> {
    let mut times: Vec<u64> =
        log.lines().filter_map(|line| line.split('\t').nth(2)?.trim().parse().ok()).collect();
    if times.is_empty() {
        return None;
    }
    times.sort_unstable();
    // Nearest rank: the smallest value with at least 99% of the samples at or below it.
    let rank = (times.len() * 99).div_ceil(100).max(1);
    let mean = times.iter().map(|&t| t as f64).sum::<f64>() / times.len() as f64;
    Some((mean, times[rank - 1] as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "starting benchmark...
Application protocol: h2c

finished in 1.00s, 42754.00 req/s, 1.60MB/s
requests: 42754 total, 42818 started, 42754 done, 42750 succeeded, 1 failed, 2 errored, 1 timeout
status codes: 42740 2xx, 0 3xx, 4 4xx, 6 5xx
traffic: 1.60MB (1674382) total, 337.39KB (345488) headers (space savings 90.02%), 542.78KB (555802) data
                     min         max         mean         sd        +/- sd
time for request:      500us      6.51ms      1.21ms       460us    80.30%
time for connect:       47us       656us       341us       177us    60.94%
";

    #[test]
    fn parses_a_report() {
        let r = parse(REPORT).unwrap();
        assert_eq!(r.requests, 42754);
        assert_eq!(r.req_per_s, 42754.0);
        assert!((r.avg_us - 1210.0).abs() < 1e-6);
        assert_eq!(r.failed, 4);
        assert_eq!(r.non_2xx, 10);
    }

    #[test]
    fn a_report_without_its_lines_names_what_is_missing() {
        assert!(parse("").unwrap_err().contains("finished in"));
        let no_times = REPORT.replace("time for request", "time for nothing");
        assert!(parse(&no_times).unwrap_err().contains("time for request"));
    }

    #[test]
    fn mean_and_p99_of_the_request_log() {
        let log: String = (1..=100).map(|i| format!("1795470950660690\t200\t{i}\n")).collect();
        assert_eq!(log_stats_us(&log), Some((50.5, 99.0)));
        assert_eq!(log_stats_us("1\t200\t7\n"), Some((7.0, 7.0)));
        assert_eq!(log_stats_us("garbage\n"), None);
    }
}
