//! Parsing wrk's text report (wrk 4.x with `--latency`).
//!
//! The lines read, by their shape:
//!
//! ```text
//!     Latency   199.01us   90.71us   8.53ms   97.75%     <- average latency (Thread Stats)
//!      99%  500.00us                                    <- from --latency's distribution
//!   253000 requests in 5.00s, 31.12MB read              <- request count and duration
//!   Socket errors: connect 0, read 3, write 0, timeout 0
//!   Non-2xx or 3xx responses: 42
//! Requests/sec:  50590.09
//! ```
//!
//! wrk prints times with the units `us`, `ms`, `s`, `m` and `h`; they are all read into
//! microseconds. `Requests/sec`, the request count and the average latency are required, as is
//! the 99% line; the error lines are optional and count as zero when absent.

/// What a wrk run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct WrkReport {
    /// Completed requests.
    pub requests: u64,
    /// The measured duration, in seconds.
    pub seconds: f64,
    /// `Requests/sec`.
    pub req_per_s: f64,
    /// Average latency, µs.
    pub avg_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Responses that were not 2xx or 3xx.
    pub non_2xx: u64,
    /// Connect, read, write and timeout errors, summed.
    pub socket_errors: u64,
}

/// Reads a wrk time such as `199.01us`, `8.53ms`, `1.20s`, `2.00m` into microseconds.
pub fn time_us(token: &str) -> Option<f64> {
    let token = token.trim().trim_end_matches(',');
    let split = token.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(token.len());
    let (number, unit) = token.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(number * scale)
}

/// Parses wrk's report; the error names the first thing that was missing.
pub fn parse(output: &str) -> Result<WrkReport, String> {
    let mut req_per_s = None;
    let mut avg_us = None;
    let mut p99_us = None;
    let mut requests = None;
    let mut non_2xx = 0;
    let mut socket_errors = 0;
    for line in output.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", value, ..] => req_per_s = value.parse::<f64>().ok(),
            ["Latency", "Distribution", ..] => {}
            ["Latency", avg, ..] if avg_us.is_none() => avg_us = time_us(avg),
            ["99%", value, ..] | ["99.000%", value, ..] => p99_us = time_us(value),
            [count, "requests", "in", duration, ..] => {
                if let (Ok(count), Some(us)) = (count.parse::<u64>(), time_us(duration)) {
                    requests = Some((count, us / 1e6));
                }
            }
            ["Non-2xx", "or", "3xx", "responses:", count, ..] => {
                non_2xx = count.parse().unwrap_or(0);
            }
            ["Socket", "errors:", rest @ ..] => {
                // "connect 0, read 3, write 0, timeout 0"
                socket_errors = rest.iter().filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok()).sum();
            }
            _ => {}
        }
    }
    let (requests, seconds) = requests.ok_or("no `N requests in T` line")?;
    Ok(WrkReport {
        requests,
        seconds,
        req_per_s: req_per_s.ok_or("no `Requests/sec:` line")?,
        avg_us: avg_us.ok_or("no `Latency` line")?,
        p99_us: p99_us.ok_or("no `99%` line (was --latency passed?)")?,
        non_2xx,
        socket_errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A typical run against a fast server.
    const FAST: &str = "\
Running 5s test @ http://127.0.0.1:40123/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   199.01us   90.71us   8.53ms   97.75%
    Req/Sec    50.85k     2.10k   55.01k    80.00%
  Latency Distribution
     50%  180.00us
     75%  220.00us
     90%  280.00us
     99%  512.00us
  253000 requests in 5.00s, 31.12MB read
Requests/sec:  50590.09
Transfer/sec:      6.22MB
";

    /// A slow server: millisecond latencies, socket errors and bad statuses.
    const SLOW: &str = "\
Running 1s test @ http://127.0.0.1:5000/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    12.34ms    3.21ms   1.02s    91.00%
    Req/Sec     4.95k   300.12     5.20k    70.00%
  Latency Distribution
     50%   11.00ms
     75%   13.50ms
     90%   16.00ms
     99%    1.50s
  4950 requests in 1.00s, 600.00KB read
  Socket errors: connect 0, read 3, write 1, timeout 2
  Non-2xx or 3xx responses: 17
Requests/sec:   4948.12
Transfer/sec:    599.51KB
";

    #[test]
    fn parses_a_fast_run() {
        let r = parse(FAST).unwrap();
        assert_eq!(r.requests, 253_000);
        assert_eq!(r.seconds, 5.0);
        assert_eq!(r.req_per_s, 50590.09);
        assert!((r.avg_us - 199.01).abs() < 1e-9);
        assert_eq!(r.p99_us, 512.0);
        assert_eq!((r.non_2xx, r.socket_errors), (0, 0));
    }

    #[test]
    fn parses_units_and_error_lines() {
        let r = parse(SLOW).unwrap();
        assert_eq!(r.requests, 4950);
        assert!((r.avg_us - 12_340.0).abs() < 1e-6);
        assert_eq!(r.p99_us, 1_500_000.0);
        assert_eq!(r.non_2xx, 17);
        assert_eq!(r.socket_errors, 6);
    }

    #[test]
    fn time_units() {
        assert_eq!(time_us("150.00us"), Some(150.0));
        assert_eq!(time_us("1.50ms"), Some(1500.0));
        assert_eq!(time_us("2.00s,"), Some(2_000_000.0));
        assert_eq!(time_us("1.00m"), Some(60_000_000.0));
        assert_eq!(time_us("0.50h"), Some(1_800_000_000.0));
        assert_eq!(time_us("12.00parsecs"), None);
        assert_eq!(time_us("fast"), None);
    }

    #[test]
    fn missing_lines_are_errors() {
        let without = |prefix: &str| -> String {
            FAST.lines().filter(|l| !l.trim_start().starts_with(prefix)).map(|l| format!("{l}\n")).collect()
        };
        assert!(parse(&without("99%")).unwrap_err().contains("99%"));
        assert!(parse(&without("Latency   ")).unwrap_err().contains("Latency"));
        assert!(parse(&without("Requests/sec")).unwrap_err().contains("Requests/sec"));
    }

    #[test]
    fn connection_refused_output_is_an_error() {
        let refused = "unable to connect to 127.0.0.1:1 Connection refused\n";
        assert!(parse(refused).unwrap_err().contains("requests in"));
        assert!(parse("").is_err());
    }
}
