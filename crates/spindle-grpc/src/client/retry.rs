//! Retry policies, as gRPC's retry design (gRFC A6) and service config define them: which
//! calls a [`BalancedChannel`](crate::BalancedChannel) sends again, how often, after how long,
//! and the channel-wide throttle that stops retries when most calls fail. The calls
//! themselves are in module `retry_call`.
//!
//! # Invariants
//!
//! - **A policy is valid or refused.** `max_attempts` at least 2 (at most 5, as the design
//!   caps it), positive backoffs and multiplier, at least one retryable code; a service
//!   config that breaks a rule is an `InvalidInput` error naming it, never a policy that
//!   silently retries differently.
//! - **The throttle's tokens stay in `0..=max_tokens`.** Each failed attempt with a retryable
//!   code takes one token, each success gives back `token_ratio`; retries are allowed only
//!   while more than half the tokens are left. Updated under a lock (a call's end, not a
//!   hot path next to the call).

use std::io;
use std::sync::Mutex;
use std::time::Duration;

use tonic::Code;

use crate::lock::lock;
use crate::status::code_name;

/// When and how a call is sent again (gRPC's `retryPolicy`).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub(crate) max_attempts: u32,
    pub(crate) initial_backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) multiplier: f64,
    pub(crate) codes: Vec<Code>,
}

/// The most attempts a policy may ask for (the retry design's cap).
pub const MAX_ATTEMPTS: u32 = 5;

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("spindle-grpc: retry policy: {why}"))
}

impl RetryPolicy {
    /// A policy: up to `max_attempts` attempts (the first included; capped at 5) of a call
    /// that ends with one of `codes` before any response arrived, the `n`th retry after a
    /// random wait below `min(initial_backoff * multiplier^(n-1), max_backoff)`.
    /// Errors (`InvalidInput`): fewer than 2 attempts, a zero backoff, a multiplier not
    /// above zero, no code.
    pub fn new(
        max_attempts: u32,
        initial_backoff: Duration,
        max_backoff: Duration,
        multiplier: f64,
        codes: impl IntoIterator<Item = Code>,
    ) -> io::Result<RetryPolicy> {
        let codes: Vec<Code> = codes.into_iter().collect();
        if max_attempts < 2 {
            return Err(invalid(format!("maxAttempts must be at least 2, not {max_attempts}")));
        }
        if initial_backoff.is_zero() || max_backoff.is_zero() {
            return Err(invalid("the backoffs must be above zero".into()));
        }
        if multiplier.is_nan() || multiplier <= 0.0 {
            return Err(invalid(format!("backoffMultiplier must be above zero, not {multiplier}")));
        }
        if codes.is_empty() {
            return Err(invalid("retryableStatusCodes must name at least one code".into()));
        }
        Ok(RetryPolicy {
            max_attempts: max_attempts.min(MAX_ATTEMPTS),
            initial_backoff,
            max_backoff,
            multiplier,
            codes,
        })
    }

    /// Whether a call that ended with `code` may be sent again under this policy.
    pub(crate) fn retries(&self, code: Code) -> bool {
        self.codes.contains(&code)
    }

    /// The wait before retry `n` (1 for the first): random, below the backoff's ceiling.
    pub(crate) fn backoff(&self, n: u32) -> Duration {
        let ceiling = self.initial_backoff.as_secs_f64() * self.multiplier.powi(n.saturating_sub(1) as i32);
        let ceiling = ceiling.min(self.max_backoff.as_secs_f64());
        Duration::from_secs_f64(ceiling * fastrand::f64())
    }

    /// The attempts allowed, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }
}

/// The channel-wide retry throttle (gRPC's `retryThrottling`; module docs).
#[derive(Debug)]
pub struct RetryThrottle {
    max_tokens: f64,
    ratio: f64,
    tokens: Mutex<f64>,
}

impl RetryThrottle {
    /// A throttle with `max_tokens` (1 to 1000) tokens, each success giving back
    /// `token_ratio` (above zero). Errors: values out of range (`InvalidInput`).
    pub fn new(max_tokens: u32, token_ratio: f64) -> io::Result<RetryThrottle> {
        if !(1..=1000).contains(&max_tokens) {
            return Err(invalid(format!("retryThrottling.maxTokens must be in 1..=1000, not {max_tokens}")));
        }
        if token_ratio.is_nan() || token_ratio <= 0.0 {
            return Err(invalid(format!("retryThrottling.tokenRatio must be above zero, not {token_ratio}")));
        }
        // The design keeps three decimals of the ratio.
        let ratio = (token_ratio * 1000.0).trunc() / 1000.0;
        Ok(RetryThrottle { max_tokens: max_tokens as f64, ratio, tokens: Mutex::new(max_tokens as f64) })
    }

    /// An attempt failed with a retryable code: one token less; whether a retry is allowed.
    pub(crate) fn failed(&self) -> bool {
        let mut tokens = lock(&self.tokens);
        *tokens = (*tokens - 1.0).max(0.0);
        *tokens > self.max_tokens / 2.0
    }

    /// An attempt succeeded (or failed with a code that is not retried).
    pub(crate) fn succeeded(&self) {
        let mut tokens = lock(&self.tokens);
        *tokens = (*tokens + self.ratio).min(self.max_tokens);
    }

    /// The tokens left.
    pub fn tokens(&self) -> f64 {
        *lock(&self.tokens)
    }
}

/// Which methods a policy covers: a service config's `name` entries.
#[derive(Debug, Clone, PartialEq)]
struct MethodName {
    /// Empty: every service.
    service: String,
    /// `None`: every method of the service.
    method: Option<String>,
}

/// The retry parts of a gRPC service config: a policy per method, service or default, and
/// the throttle. [`ServiceConfig::from_json`] reads the JSON form grpc-go and others take.
#[derive(Debug, Default)]
pub struct ServiceConfig {
    policies: Vec<(Vec<MethodName>, RetryPolicy)>,
    pub(crate) throttle: Option<RetryThrottle>,
}

impl ServiceConfig {
    /// A config applying `policy` to every method.
    pub fn retry_all(policy: RetryPolicy) -> ServiceConfig {
        ServiceConfig {
            policies: vec![(vec![MethodName { service: String::new(), method: None }], policy)],
            throttle: None,
        }
    }

    /// Adds a channel-wide throttle.
    pub fn throttle(mut self, throttle: RetryThrottle) -> ServiceConfig {
        self.throttle = Some(throttle);
        self
    }

    /// Reads a service config in its JSON form: `methodConfig[].name[]` (`service`, optional
    /// `method`; an empty name is the default) with `retryPolicy` (`maxAttempts`,
    /// `initialBackoff` and `maxBackoff` as `"0.1s"`, `backoffMultiplier`,
    /// `retryableStatusCodes` as names such as `"UNAVAILABLE"` or numbers), and
    /// `retryThrottling` (`maxTokens`, `tokenRatio`). Other fields are ignored. Errors
    /// (`InvalidInput`, naming the field): bad JSON, a field of the wrong type, a policy the
    /// design refuses, a `hedgingPolicy` (not supported).
    pub fn from_json(json: &str) -> io::Result<ServiceConfig> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| invalid(format!("service config is not JSON: {e}")))?;
        let mut config = ServiceConfig::default();
        if let Some(methods) = value.get("methodConfig") {
            let methods = methods.as_array().ok_or_else(|| invalid("methodConfig must be a list".into()))?;
            for entry in methods {
                if entry.get("hedgingPolicy").is_some() {
                    return Err(invalid("hedgingPolicy is not supported".into()));
                }
                let Some(policy) = entry.get("retryPolicy") else { continue };
                let names = parse_names(entry.get("name"))?;
                config.policies.push((names, parse_policy(policy)?));
            }
        }
        if let Some(throttle) = value.get("retryThrottling") {
            let max = throttle
                .get("maxTokens")
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| invalid("retryThrottling.maxTokens must be a number".into()))?;
            let ratio = throttle
                .get("tokenRatio")
                .and_then(serde_json::Value::as_f64)
                .ok_or_else(|| invalid("retryThrottling.tokenRatio must be a number".into()))?;
            config.throttle = Some(RetryThrottle::new(u32::try_from(max).unwrap_or(u32::MAX), ratio)?);
        }
        Ok(config)
    }

    /// The policy of the method at `path` (`/package.Service/Method`): the method's own, else
    /// its service's, else the default's (the most specific name wins).
    pub(crate) fn policy_for(&self, path: &str) -> Option<&RetryPolicy> {
        let (service, method) =
            crate::path::service_and_method(path.trim_start_matches('/')).unwrap_or(("", ""));
        let rank = |n: &MethodName| match (&n.method, n.service.as_str()) {
            (Some(m), s) if s == service && m == method => Some(0),
            (None, s) if s == service => Some(1),
            (None, "") => Some(2),
            _ => None,
        };
        self.policies
            .iter()
            .filter_map(|(names, policy)| names.iter().filter_map(rank).min().map(|r| (r, policy)))
            .min_by_key(|(r, _)| *r)
            .map(|(_, policy)| policy)
    }
}

fn parse_names(names: Option<&serde_json::Value>) -> io::Result<Vec<MethodName>> {
    let Some(names) = names else {
        return Ok(vec![MethodName { service: String::new(), method: None }]);
    };
    let names = names.as_array().ok_or_else(|| invalid("methodConfig.name must be a list".into()))?;
    let mut out = Vec::new();
    for name in names {
        let field = |key: &str| -> io::Result<Option<String>> {
            match name.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_str()
                    .map(|s| Some(s.to_string()))
                    .ok_or_else(|| invalid(format!("methodConfig.name.{key} must be a string"))),
            }
        };
        let service = field("service")?.unwrap_or_default();
        let method = field("method")?.filter(|m| !m.is_empty());
        if service.is_empty() && method.is_some() {
            return Err(invalid("a methodConfig name with a method needs its service".into()));
        }
        out.push(MethodName { service, method });
    }
    Ok(out)
}

/// `"1.5s"` as the service config writes durations.
fn parse_duration(field: &str, value: Option<&serde_json::Value>) -> io::Result<Duration> {
    let text = value
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| invalid(format!("retryPolicy.{field} must be a string such as \"0.1s\"")))?;
    let secs: f64 = text
        .strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .filter(|s: &f64| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| invalid(format!("retryPolicy.{field}: not a duration such as \"0.1s\": {text:?}")))?;
    Ok(Duration::from_secs_f64(secs))
}

fn parse_code(value: &serde_json::Value) -> io::Result<Code> {
    if let Some(n) = value.as_i64() {
        return match i32::try_from(n).map(Code::from_i32) {
            Ok(code) if (0..=16).contains(&n) => Ok(code),
            _ => Err(invalid(format!("not a status code: {n}"))),
        };
    }
    let name = value.as_str().ok_or_else(|| invalid(format!("not a status code: {value}")))?;
    (0..=16)
        .map(Code::from_i32)
        .find(|code| code_name(*code) == name.to_ascii_uppercase())
        .ok_or_else(|| invalid(format!("not a status code name: {name:?}")))
}

fn parse_policy(policy: &serde_json::Value) -> io::Result<RetryPolicy> {
    let attempts = policy
        .get("maxAttempts")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| invalid("retryPolicy.maxAttempts must be a number".into()))?;
    let multiplier = policy
        .get("backoffMultiplier")
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| invalid("retryPolicy.backoffMultiplier must be a number".into()))?;
    let codes = policy
        .get("retryableStatusCodes")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| invalid("retryPolicy.retryableStatusCodes must be a list".into()))?
        .iter()
        .map(parse_code)
        .collect::<io::Result<Vec<Code>>>()?;
    RetryPolicy::new(
        u32::try_from(attempts).unwrap_or(u32::MAX),
        parse_duration("initialBackoff", policy.get("initialBackoff"))?,
        parse_duration("maxBackoff", policy.get("maxBackoff"))?,
        multiplier,
        codes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"{
        "methodConfig": [
            {"name": [{"service": "grpc.testing.TestService", "method": "UnaryCall"}],
             "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
                             "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", 10]}},
            {"name": [{"service": "grpc.testing.TestService"}],
             "retryPolicy": {"maxAttempts": 9, "initialBackoff": "1s", "maxBackoff": "2s",
                             "backoffMultiplier": 1.5, "retryableStatusCodes": ["unavailable"]}},
            {"name": [{}], "timeout": "1s"}
        ],
        "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1234}
    }"#;

    #[test]
    fn the_most_specific_name_wins() {
        let config = ServiceConfig::from_json(CONFIG).unwrap();
        let unary = config.policy_for("/grpc.testing.TestService/UnaryCall").unwrap();
        assert_eq!(unary.max_attempts, 4);
        assert_eq!(unary.codes, [Code::Unavailable, Code::Aborted]);
        let other = config.policy_for("/grpc.testing.TestService/EmptyCall").unwrap();
        assert_eq!(other.max_attempts, MAX_ATTEMPTS, "capped");
        assert_eq!(other.initial_backoff, Duration::from_secs(1));
        // The default entry has no retry policy.
        assert!(config.policy_for("/other.Service/Call").is_none());
        let throttle = config.throttle.as_ref().unwrap();
        assert_eq!(throttle.ratio, 0.123);
    }

    #[test]
    fn the_throttle_stops_retries_below_half_its_tokens_and_refills() {
        let throttle = RetryThrottle::new(10, 0.5).unwrap();
        let allowed: Vec<bool> = (0..6).map(|_| throttle.failed()).collect();
        assert_eq!(allowed, [true, true, true, true, false, false]);
        assert_eq!(throttle.tokens(), 4.0);
        for _ in 0..100 {
            throttle.succeeded();
        }
        assert_eq!(throttle.tokens(), 10.0, "capped at max_tokens");
        for _ in 0..20 {
            throttle.failed();
        }
        assert_eq!(throttle.tokens(), 0.0, "never below zero");
    }

    #[test]
    fn backoffs_stay_below_their_ceiling() {
        let policy = RetryPolicy::new(
            5,
            Duration::from_millis(100),
            Duration::from_millis(300),
            2.0,
            [Code::Unavailable],
        )
        .unwrap();
        for _ in 0..1000 {
            assert!(policy.backoff(1) < Duration::from_millis(100));
            assert!(policy.backoff(2) < Duration::from_millis(200));
            assert!(policy.backoff(4) < Duration::from_millis(300));
        }
    }

    #[test]
    fn bad_configs_name_the_field() {
        for (json, why) in [
            ("{", "not JSON"),
            (r#"{"methodConfig": {}}"#, "must be a list"),
            (
                r#"{"methodConfig": [{"retryPolicy": {"maxAttempts": 1, "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
                "at least 2",
            ),
            (
                r#"{"methodConfig": [{"retryPolicy": {"maxAttempts": 2, "initialBackoff": "1", "maxBackoff": "1s", "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
                "initialBackoff",
            ),
            (
                r#"{"methodConfig": [{"retryPolicy": {"maxAttempts": 2, "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 0, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
                "backoffMultiplier",
            ),
            (
                r#"{"methodConfig": [{"retryPolicy": {"maxAttempts": 2, "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 1, "retryableStatusCodes": []}}]}"#,
                "at least one code",
            ),
            (
                r#"{"methodConfig": [{"retryPolicy": {"maxAttempts": 2, "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 1, "retryableStatusCodes": ["SOMETIMES"]}}]}"#,
                "not a status code name",
            ),
            (r#"{"methodConfig": [{"hedgingPolicy": {}}]}"#, "hedgingPolicy"),
            (r#"{"retryThrottling": {"maxTokens": 0, "tokenRatio": 1}}"#, "maxTokens"),
        ] {
            let err = ServiceConfig::from_json(json).expect_err(json).to_string();
            assert!(err.contains(why), "{json}: {err}");
        }
    }
}
