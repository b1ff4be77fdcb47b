//! The five suites of the tournament: their cases, metrics, units, which direction of each metric
//! is better, and the competitors each suite expects.
//!
//! This is the results schema in code. Other tools read `results.jsonl` by these names, so a
//! name here changes only together with `bench/peers/README.md` and the peers that print it.
//!
//! Ground rules:
//!
//! - **Direction by name.** A metric whose name ends in `_per_s` is "higher is better"
//!   (throughput); every other metric (times, bytes, allocations, CPU per request, latency
//!   percentiles) is "lower is better". Metrics not in the schema follow the same rule.
//! - **Above one means ahead.** A ratio of spindle against a peer is always phrased so that
//!   `> 1×` means spindle is ahead: for lower-is-better metrics it is `peer / spindle`, for
//!   higher-is-better ones `spindle / peer` (see [`advantage`]).

use std::fmt;

/// One of the five benchmark suites, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Suite {
    /// Fibers against threads (seed 003): allocation, switching, memory, warming, throughput.
    Fibers,
    /// Per-operation cost of TCP operations (seed 002).
    Tcp,
    /// Hello-world HTTP under wrk at 1 and 2 workers (seed 001).
    Http,
    /// In-process and loopback gRPC (seed 000).
    Rpc,
    /// Sync clients of real servers (PostgreSQL, Redis, HTTP) from many concurrent units.
    Blocking,
}

/// One case of a suite and the metrics it reports.
#[derive(Debug, Clone, Copy)]
pub struct CaseSpec {
    /// The `case` field of a measurement.
    pub name: &'static str,
    /// The `metric` fields expected for this case, in table order.
    pub metrics: &'static [&'static str],
}

/// Which direction of a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Smaller values win (times, bytes, allocations).
    Lower,
    /// Larger values win (requests or switches per second).
    Higher,
}

/// The names of spindle's own competitors; only their failures fail the tournament.
pub const SPINDLE_COMPETITORS: [&str; 6] =
    ["spindle", "spindle-grpc", "spindle-mt", "spindle-grpc-mt", "spindle-grpc-tcp", "spindle-grpc-typed"];

/// Rows that measure a limit, not a competitor: the report labels them and the summary leaves
/// them out of its ranking (it states spindle's distance to them instead).
pub const FLOOR_ROWS: [&str; 1] = ["floor-raw-switch"];

/// Every competitor name the schema knows, for validation hints.
pub const KNOWN_COMPETITORS: [&str; 31] = [
    "spindle",
    "spindle-grpc",
    "spindle-mt",
    "spindle-grpc-mt",
    "spindle-grpc-tcp",
    "spindle-grpc-typed",
    "rust-thread",
    "tokio",
    "tokio-hyper",
    "tonic-direct",
    "tonic-duplex",
    "tonic-tcp",
    "ruby-fiber",
    "ruby-thread",
    "go-goroutine",
    "go-locked-thread",
    "go-nethttp",
    "grpchan",
    "grpc-go-tcp",
    "crystal-fiber",
    "crystal",
    "crystal-mt",
    "python-asyncio",
    "python-uvloop",
    "python-thread",
    "node",
    "c-syscalls",
    "may",
    "may-minihttp",
    "monoio",
    "floor-raw-switch",
];

const FIBERS_CASES: &[CaseSpec] = &[
    CaseSpec { name: "alloc", metrics: &["us_per_unit", "bytes_per_unit"] },
    CaseSpec { name: "switch", metrics: &["us_per_switch", "switches_per_s"] },
    CaseSpec { name: "warm", metrics: &["first_alloc_us", "last_alloc_us"] },
    CaseSpec { name: "throughput", metrics: &["total_ms"] },
];

const NS: &[&str] = &["ns_per_op"];

const TCP_CASES: &[CaseSpec] = &[
    CaseSpec { name: "bind", metrics: NS },
    CaseSpec { name: "bind_concurrent", metrics: NS },
    CaseSpec { name: "accept_connect", metrics: NS },
    CaseSpec { name: "pingpong", metrics: NS },
    CaseSpec { name: "idle_conns", metrics: &["bytes_per_conn"] },
];

const HTTP_METRICS: &[&str] = &["req_per_s", "avg_us", "p99_us", "cpu_us_per_req"];

const HTTP_CASES: &[CaseSpec] = &[
    CaseSpec { name: "hello_1w", metrics: HTTP_METRICS },
    CaseSpec { name: "hello_2w", metrics: HTTP_METRICS },
    CaseSpec { name: "h2c_1w", metrics: HTTP_METRICS },
    CaseSpec { name: "h2c_2w", metrics: HTTP_METRICS },
    CaseSpec { name: "client_keepalive", metrics: &["req_per_s", "cpu_us_per_req"] },
];

const RPC_OP: &[&str] = &["ns_per_op", "bytes_per_op", "allocs_per_op"];

const RPC_CASES: &[CaseSpec] = &[
    CaseSpec { name: "unary_32", metrics: RPC_OP },
    CaseSpec { name: "unary_64", metrics: RPC_OP },
    CaseSpec { name: "unary_1k", metrics: RPC_OP },
    CaseSpec { name: "unary_10k", metrics: RPC_OP },
    CaseSpec { name: "unary_100k", metrics: RPC_OP },
    CaseSpec { name: "unary_1m", metrics: RPC_OP },
    CaseSpec { name: "server_stream_100x32", metrics: RPC_OP },
    CaseSpec { name: "bidi_echo", metrics: RPC_OP },
    CaseSpec { name: "concurrent_10", metrics: RPC_OP },
    CaseSpec { name: "concurrent_50", metrics: RPC_OP },
    CaseSpec { name: "concurrent_100", metrics: RPC_OP },
    CaseSpec { name: "latency", metrics: &["p50_us", "p90_us", "p95_us", "p99_us"] },
];

const PG: &[&str] = &["queries_per_s", "cpu_us_per_query"];
const REDIS: &[&str] = &["ops_per_s", "cpu_us_per_op"];
const HTTP_CLIENT: &[&str] = &["req_per_s", "cpu_us_per_req"];

const BLOCKING_CASES: &[CaseSpec] = &[
    CaseSpec { name: "pg_select1_1", metrics: PG },
    CaseSpec { name: "pg_select1_64", metrics: PG },
    CaseSpec { name: "pg_select1_1000", metrics: PG },
    CaseSpec { name: "pg_sleep_1", metrics: PG },
    CaseSpec { name: "pg_sleep_64", metrics: PG },
    CaseSpec { name: "pg_sleep_1000", metrics: PG },
    CaseSpec { name: "redis_1", metrics: REDIS },
    CaseSpec { name: "redis_64", metrics: REDIS },
    CaseSpec { name: "redis_1000", metrics: REDIS },
    CaseSpec { name: "http_1", metrics: HTTP_CLIENT },
    CaseSpec { name: "http_64", metrics: HTTP_CLIENT },
    CaseSpec { name: "http_1000", metrics: HTTP_CLIENT },
];

impl Suite {
    /// All suites, in report order.
    pub const ALL: [Suite; 5] = [Suite::Fibers, Suite::Tcp, Suite::Http, Suite::Rpc, Suite::Blocking];

    /// The name used in manifests, flags and results.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Fibers => "fibers",
            Suite::Tcp => "tcp",
            Suite::Http => "http",
            Suite::Rpc => "rpc",
            Suite::Blocking => "blocking",
        }
    }

    /// Parses a suite name as written in a manifest.
    pub fn from_name(name: &str) -> Option<Suite> {
        Suite::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The cases of this suite and their metrics, in table order.
    pub fn cases(self) -> &'static [CaseSpec] {
        match self {
            Suite::Fibers => FIBERS_CASES,
            Suite::Tcp => TCP_CASES,
            Suite::Http => HTTP_CASES,
            Suite::Rpc => RPC_CASES,
            Suite::Blocking => BLOCKING_CASES,
        }
    }

    /// The competitors this suite should have, spindle's first.
    pub fn expected(self) -> &'static [&'static str] {
        match self {
            Suite::Fibers => &[
                "spindle",
                "rust-thread",
                "tokio",
                "may",
                "floor-raw-switch",
                "ruby-fiber",
                "ruby-thread",
                "go-goroutine",
                "go-locked-thread",
                "crystal-fiber",
                "python-asyncio",
                "python-thread",
            ],
            Suite::Tcp => &[
                "spindle",
                "spindle-mt",
                "c-syscalls",
                "go-goroutine",
                "python-asyncio",
                "python-uvloop",
                "node",
                "rust-thread",
                "tokio",
                "may",
                "monoio",
            ],
            Suite::Http => &[
                "spindle",
                "crystal",
                "crystal-mt",
                "go-nethttp",
                "node",
                "tokio-hyper",
                "may-minihttp",
                "monoio",
            ],
            Suite::Rpc => &[
                "spindle-grpc",
                "spindle-grpc-mt",
                "spindle-grpc-tcp",
                "spindle-grpc-typed",
                "grpchan",
                "grpc-go-tcp",
                "tonic-direct",
                "tonic-duplex",
                "tonic-tcp",
            ],
            Suite::Blocking => &["spindle", "tokio", "go-goroutine", "rust-thread"],
        }
    }

    /// The competitor that stands for spindle in this suite's ratios.
    pub fn ours(self) -> &'static str {
        match self {
            Suite::Rpc => "spindle-grpc",
            _ => "spindle",
        }
    }

    /// A one-line description of what the suite measures, for the report.
    pub fn description(self) -> &'static str {
        match self {
            Suite::Fibers => {
                "Fibers against threads (shapes of seed 003): allocation cost and memory per \
                 unit, context-switch cost, cache warming, and a throughput round."
            }
            Suite::Tcp => {
                "Per-operation cost of TCP on loopback (shapes of seed 002): bind(127.0.0.1:0), \
                 concurrent binds, accept+connect, ping-pong, and memory per idle connection."
            }
            Suite::Http => {
                "A hello-world HTTP server under wrk (shapes of seed 001), with 1 worker pinned \
                 and 2 workers unpinned, and the server's CPU time per request; the h2c_* cases \
                 are the same over HTTP/2 with prior knowledge under h2load, for the servers \
                 that speak it; client_keepalive is an HTTP client's keep-alive GETs against \
                 a local spindle-http hello server."
            }
            Suite::Rpc => {
                "gRPC in process and over loopback (shapes of seed 000): unary by payload size, \
                 server streaming, bidi echo, concurrent unary, latency percentiles."
            }
            Suite::Blocking => {
                "Sync clients of real servers, which the suite starts (PostgreSQL, redis-server, a \
                 spindle-http hello server), from 1, 64 and 1,000 concurrent clients, each with its \
                 own connection: SELECT 1 and SELECT pg_sleep(0.01) in a loop, Redis SET+GET, HTTP \
                 GET; throughput and the client process's CPU time per operation. spindle runs the \
                 sync crates (postgres, redis, ureq) in fibers with its libc hook, against their \
                 async versions on tokio, Go's goroutines, and an OS thread per client."
            }
        }
    }

    /// Position of `case` in this suite's case order; unknown cases sort last.
    pub fn case_index(self, case: &str) -> usize {
        let cases = self.cases();
        cases.iter().position(|c| c.name == case).unwrap_or(cases.len())
    }

    /// Position of `metric` within `case`; unknown metrics sort last.
    pub fn metric_index(self, case: &str, metric: &str) -> usize {
        match self.cases().iter().find(|c| c.name == case) {
            Some(spec) => spec.metrics.iter().position(|m| *m == metric).unwrap_or(spec.metrics.len()),
            None => usize::MAX,
        }
    }

    /// Whether `(case, metric)` is part of this suite's schema.
    pub fn knows(self, case: &str, metric: &str) -> bool {
        self.cases().iter().any(|c| c.name == case && c.metrics.contains(&metric))
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `name` is one of spindle's own competitors.
pub fn is_spindle(name: &str) -> bool {
    SPINDLE_COMPETITORS.contains(&name)
}

/// Whether `name` is a floor row (a limit such as a bare context switch), not a competitor.
pub fn is_floor(name: &str) -> bool {
    FLOOR_ROWS.contains(&name)
}

/// The unit a metric is reported in, used when a peer's line leaves `unit` out.
pub fn default_unit(metric: &str) -> &'static str {
    match metric {
        "us_per_unit" | "us_per_switch" | "first_alloc_us" | "last_alloc_us" | "avg_us" | "p50_us"
        | "p90_us" | "p95_us" | "p99_us" | "cpu_us_per_req" | "cpu_us_per_query" | "cpu_us_per_op" => "us",
        "bytes_per_unit" | "bytes_per_conn" | "bytes_per_op" => "bytes",
        "switches_per_s" => "1/s",
        "req_per_s" => "req/s",
        "queries_per_s" => "queries/s",
        "ops_per_s" => "ops/s",
        "total_ms" => "ms",
        "ns_per_op" => "ns",
        "allocs_per_op" => "allocs",
        _ => "",
    }
}

/// Which direction of `metric` is better ("direction by name").
pub fn better(metric: &str) -> Better {
    if metric.ends_with("_per_s") {
        Better::Higher
    } else {
        Better::Lower
    }
}

/// How far spindle is ahead of a peer on one metric: `> 1.0` means spindle is ahead.
///
/// Returns `None` when either value is not a positive finite number (a ratio against zero
/// says nothing useful).
pub fn advantage(ours: f64, peer: f64, better: Better) -> Option<f64> {
    let usable = |v: f64| v.is_finite() && v > 0.0;
    if !usable(ours) || !usable(peer) {
        return None;
    }
    Some(match better {
        Better::Lower => peer / ours,
        Better::Higher => ours / peer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for suite in Suite::ALL {
            assert_eq!(Suite::from_name(suite.name()), Some(suite));
        }
        assert_eq!(Suite::from_name("gpu"), None);
    }

    #[test]
    fn throughput_metrics_are_higher_is_better() {
        assert_eq!(better("req_per_s"), Better::Higher);
        assert_eq!(better("switches_per_s"), Better::Higher);
        for lower in [
            "ns_per_op",
            "us_per_switch",
            "bytes_per_unit",
            "p99_us",
            "cpu_us_per_req",
            "total_ms",
            "allocs_per_op",
        ] {
            assert_eq!(better(lower), Better::Lower, "{lower}");
        }
    }

    #[test]
    fn ratio_direction_says_spindle_ahead_above_one() {
        // spindle 10 ns, peer 30 ns: spindle three times faster.
        assert_eq!(advantage(10.0, 30.0, Better::Lower), Some(3.0));
        // spindle 50k req/s, peer 100k req/s: spindle at half the throughput.
        assert_eq!(advantage(50_000.0, 100_000.0, Better::Higher), Some(0.5));
        // spindle 200k req/s against 100k: ahead.
        assert_eq!(advantage(200_000.0, 100_000.0, Better::Higher), Some(2.0));
        // spindle slower on a time metric: below one.
        assert_eq!(advantage(40.0, 20.0, Better::Lower), Some(0.5));
    }

    #[test]
    fn ratio_against_zero_or_nan_is_none() {
        assert_eq!(advantage(0.0, 1.0, Better::Lower), None);
        assert_eq!(advantage(1.0, 0.0, Better::Higher), None);
        assert_eq!(advantage(f64::NAN, 1.0, Better::Lower), None);
        assert_eq!(advantage(1.0, f64::INFINITY, Better::Lower), None);
    }

    #[test]
    fn expected_competitors_are_known_and_ours_come_first() {
        for suite in Suite::ALL {
            let expected = suite.expected();
            assert_eq!(expected[0], suite.ours());
            for name in expected {
                assert!(KNOWN_COMPETITORS.contains(name), "{name}");
            }
        }
    }

    #[test]
    fn floor_rows_are_known_and_not_ours() {
        for name in FLOOR_ROWS {
            assert!(is_floor(name));
            assert!(KNOWN_COMPETITORS.contains(&name), "{name}");
            assert!(!is_spindle(name), "{name}");
        }
        assert!(!is_floor("may"));
        assert!(Suite::Fibers.expected().contains(&"floor-raw-switch"));
    }

    #[test]
    fn every_schema_metric_has_a_unit() {
        for suite in Suite::ALL {
            for case in suite.cases() {
                for metric in case.metrics {
                    assert!(!default_unit(metric).is_empty(), "{metric}");
                    assert!(suite.knows(case.name, metric));
                }
            }
        }
        assert!(!Suite::Tcp.knows("bind", "req_per_s"));
        assert_eq!(Suite::Rpc.case_index("nope"), Suite::Rpc.cases().len());
    }
}
