//! Outlier ejection for a [`BalancedChannel`](super::BalancedChannel): a server whose calls
//! keep failing (`UNAVAILABLE`, `DEADLINE_EXCEEDED`) while its connection stays up is left out
//! of the picks for a while, as grpc-go's outlier detection (consecutive failures, a base
//! ejection time growing with each ejection) and Envoy's do.
//!
//! # Invariants
//!
//! - **Counted per attempt.** Each attempt of a call on a child reports its outcome once: a
//!   failure code in a status-only answer counts as a failure, any answer with response
//!   headers as a success (the server is serving), which resets the count.
//! - **Ejections end on their own.** An ejected child is back once its ejection time has
//!   passed (`base * times ejected`, at most `max(base, max_ejection_time)`); nothing needs
//!   to run for that. A success after it resets `times ejected` to 0 only after a clean period
//!   of one base time.
//! - **Never all.** At most `max_ejection_percent` of the children (and at least one) are
//!   ejected at once, counted in a budget the children of one channel share; and a pick that
//!   finds every child ejected ignores the ejections.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic::Code;

use crate::lock::lock;

/// The outlier ejection settings of a channel (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct OutlierEjection {
    pub(crate) consecutive_failures: u32,
    pub(crate) base_ejection_time: Duration,
    pub(crate) max_ejection_time: Duration,
    pub(crate) max_ejection_percent: u32,
}

impl Default for OutlierEjection {
    /// grpc-go's defaults: 5 consecutive failures, 30 s base ejection time, at most 300 s, at
    /// most 10 % of the servers ejected (and at least one).
    fn default() -> OutlierEjection {
        OutlierEjection {
            consecutive_failures: 5,
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10,
        }
    }
}

impl OutlierEjection {
    /// Eject a server after `failures` consecutive failed attempts (at least 1).
    pub fn consecutive_failures(mut self, failures: u32) -> OutlierEjection {
        self.consecutive_failures = failures.max(1);
        self
    }

    /// The first ejection's length; the `n`th lasts `n` times as long, at most
    /// `max(base, max)`.
    pub fn ejection_time(mut self, base: Duration, max: Duration) -> OutlierEjection {
        self.base_ejection_time = base;
        self.max_ejection_time = max;
        self
    }

    /// The most servers ejected at once, in per cent of the channel's servers (at least one
    /// is always allowed; capped at 100).
    pub fn max_ejection_percent(mut self, percent: u32) -> OutlierEjection {
        self.max_ejection_percent = percent.min(100);
        self
    }
}

/// What the children of one channel share: the settings and the count of children ejected
/// now against the number of children.
#[derive(Debug)]
pub(crate) struct Budget {
    config: OutlierEjection,
    ejected: AtomicUsize,
    children: AtomicUsize,
}

impl Budget {
    pub(crate) fn new(config: OutlierEjection) -> Arc<Budget> {
        Arc::new(Budget { config, ejected: AtomicUsize::new(0), children: AtomicUsize::new(0) })
    }

    /// The channel has `n` children now.
    pub(crate) fn set_children(&self, n: usize) {
        self.children.store(n, Ordering::Relaxed);
    }

    fn allowance(&self) -> usize {
        let n = self.children.load(Ordering::Relaxed);
        (n * self.config.max_ejection_percent as usize / 100).max(1)
    }
}

/// One child's record (module docs).
#[derive(Debug)]
pub(crate) struct Outlier {
    budget: Arc<Budget>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    failures: u32,
    times_ejected: u32,
    ejected_until: Option<Instant>,
    /// When the last ejection ended: `times_ejected` decays after a clean base period.
    back_at: Option<Instant>,
}

impl Outlier {
    pub(crate) fn new(budget: &Arc<Budget>) -> Arc<Outlier> {
        Arc::new(Outlier { budget: budget.clone(), state: Mutex::new(State::default()) })
    }

    /// Whether the child is ejected now (an ejection past its end is ended here).
    pub(crate) fn is_ejected(&self, now: Instant) -> bool {
        let mut state = lock(&self.state);
        match state.ejected_until {
            Some(until) if now < until => true,
            Some(_) => {
                state.ejected_until = None;
                state.back_at = Some(now);
                self.budget.ejected.fetch_sub(1, Ordering::Relaxed);
                false
            }
            None => false,
        }
    }

    /// An attempt on this child ended with `code` in a status-only answer, or (`None`) with
    /// response headers.
    pub(crate) fn record(&self, code: Option<Code>, now: Instant) {
        let failed = matches!(code, Some(Code::Unavailable | Code::DeadlineExceeded));
        let config = &self.budget.config;
        let mut state = lock(&self.state);
        if !failed {
            state.failures = 0;
            if state
                .back_at
                .is_some_and(|back| now.saturating_duration_since(back) >= config.base_ejection_time)
            {
                state.times_ejected = 0;
                state.back_at = None;
            }
            return;
        }
        state.failures += 1;
        if state.ejected_until.is_some() || state.failures < config.consecutive_failures {
            return;
        }
        // Within the budget (module docs, "Never all").
        let budget = &self.budget;
        let allowance = budget.allowance();
        if budget
            .ejected
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |e| (e < allowance).then_some(e + 1))
            .is_err()
        {
            return;
        }
        state.times_ejected += 1;
        state.failures = 0;
        let length = config
            .base_ejection_time
            .saturating_mul(state.times_ejected)
            .min(config.max_ejection_time.max(config.base_ejection_time));
        state.ejected_until = Some(now + length);
        log::debug!(
            "spindle-grpc: a server ejected for {length:?} after {} failed calls",
            config.consecutive_failures
        );
    }
}

impl Drop for Outlier {
    fn drop(&mut self) {
        // A child dropped while ejected (its address left the name) gives its place back.
        if lock(&self.state).ejected_until.is_some() {
            self.budget.ejected.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> OutlierEjection {
        OutlierEjection::default()
            .consecutive_failures(3)
            .ejection_time(Duration::from_secs(10), Duration::from_secs(25))
            .max_ejection_percent(50)
    }

    #[test]
    fn consecutive_failures_eject_for_a_growing_time_and_a_success_resets_the_count() {
        let budget = Budget::new(config());
        budget.set_children(4);
        let child = Outlier::new(&budget);
        let t0 = Instant::now();
        child.record(Some(Code::Unavailable), t0);
        child.record(Some(Code::Unavailable), t0);
        child.record(None, t0); // a success: the count starts again
        child.record(Some(Code::DeadlineExceeded), t0);
        child.record(Some(Code::Unavailable), t0);
        assert!(!child.is_ejected(t0));
        child.record(Some(Code::Unavailable), t0);
        assert!(child.is_ejected(t0));
        assert!(child.is_ejected(t0 + Duration::from_secs(9)));
        let back = t0 + Duration::from_secs(10);
        assert!(!child.is_ejected(back), "an ejection ends on its own");
        // The second ejection lasts twice as long; the third is capped at the maximum.
        for _ in 0..3 {
            child.record(Some(Code::Unavailable), back);
        }
        assert!(child.is_ejected(back + Duration::from_secs(19)));
        let back = back + Duration::from_secs(20);
        assert!(!child.is_ejected(back));
        for _ in 0..3 {
            child.record(Some(Code::Unavailable), back);
        }
        assert!(child.is_ejected(back + Duration::from_secs(24)));
        assert!(!child.is_ejected(back + Duration::from_secs(25)));
    }

    #[test]
    fn other_codes_are_not_failures() {
        let budget = Budget::new(config());
        budget.set_children(2);
        let child = Outlier::new(&budget);
        let now = Instant::now();
        for code in [Code::NotFound, Code::InvalidArgument, Code::Internal, Code::Ok] {
            for _ in 0..5 {
                child.record(Some(code), now);
            }
        }
        assert!(!child.is_ejected(now));
    }

    #[test]
    fn the_budget_bounds_the_ejected_children() {
        let budget = Budget::new(config()); // 50 % of 4: two at most
        budget.set_children(4);
        let children: Vec<_> = (0..4).map(|_| Outlier::new(&budget)).collect();
        let now = Instant::now();
        for child in &children {
            for _ in 0..3 {
                child.record(Some(Code::Unavailable), now);
            }
        }
        assert_eq!(children.iter().filter(|c| c.is_ejected(now)).count(), 2);
        // One comes back: a place is free again.
        let later = now + Duration::from_secs(10);
        assert!(children.iter().all(|c| !c.is_ejected(later)));
        for _ in 0..3 {
            children[3].record(Some(Code::Unavailable), later);
        }
        assert!(children[3].is_ejected(later));
        // A dropped ejected child gives its place back; one child always may be ejected.
        drop(children);
        let budget = Budget::new(config().max_ejection_percent(0));
        budget.set_children(3);
        let child = Outlier::new(&budget);
        for _ in 0..3 {
            child.record(Some(Code::Unavailable), now);
        }
        assert!(child.is_ejected(now), "at least one may be ejected");
    }
}
