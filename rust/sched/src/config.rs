//! Scheduler settings: the ordering policy, the budgets of Algorithm 1 and the starvation
//! guard. Validated once, at construction.

use std::fmt;
use std::str::FromStr;

use crate::error::SchedError;
use crate::ratio::RatioConfig;

/// The order in which waiting requests are offered to admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Longest cached prefix first (ties by arrival): the paper's cache-aware order.
    Lpm,
    /// Depth-first over the prefix tree of the waiting requests, heavier subtrees first.
    DfsWeight,
    /// Arrival order.
    Fcfs,
    /// Largest `max_new_tokens` first (ties by arrival).
    Lof,
    /// A seeded shuffle, redrawn every step.
    Random,
}

impl Policy {
    pub const ALL: [Policy; 5] = [Policy::Lpm, Policy::DfsWeight, Policy::Fcfs, Policy::Lof, Policy::Random];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Lpm => "lpm",
            Policy::DfsWeight => "dfs-weight",
            Policy::Fcfs => "fcfs",
            Policy::Lof => "lof",
            Policy::Random => "random",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = SchedError;

    fn from_str(name: &str) -> Result<Self, SchedError> {
        Policy::ALL.into_iter().find(|policy| policy.name() == name).ok_or_else(|| {
            SchedError::Config(format!(
                "unknown policy {name:?}; expected one of lpm, dfs-weight, fcfs, lof, random"
            ))
        })
    }
}

/// Bounded waiting: a request that has been passed over for `max_wait_steps` selections, or
/// has waited `max_wait_s` seconds, is offered before every request in policy order. `None`
/// disables that bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StarvationGuard {
    pub max_wait_steps: Option<u64>,
    pub max_wait_s: Option<f64>,
}

impl Default for StarvationGuard {
    /// Generous enough that the guard only overrides the cache-aware order for requests that
    /// would otherwise wait without bound (about 30 s of decoding at 30 ms a step).
    fn default() -> Self {
        Self { max_wait_steps: Some(1000), max_wait_s: Some(30.0) }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchedConfig {
    pub policy: Policy,
    /// Prompt tokens prefilled per step, across all admitted requests (>= 1).
    pub max_prefill_tokens: usize,
    /// Split a prompt that does not fit the remaining prefill budget into chunks. When off, an
    /// oversized prompt runs alone and whole, as the first admission of a step.
    pub enable_chunked_prefill: bool,
    /// Cap on running requests (decoding ones plus this step's admissions).
    pub max_running_requests: usize,
    /// Output estimates use at most this many of a request's remaining tokens.
    pub clip_max_new_tokens: usize,
    /// In-batch prefix sharing: a request that shares at least this many not-yet-cached tokens
    /// with a request admitted in the same step is offered only after every other candidate
    /// (so it hits the cache next step unless the budgets would otherwise stay unused).
    /// `None` disables it.
    pub in_batch_share_min_len: Option<usize>,
    /// `None` switches the guard off (pure policy order, as in the paper's ablation).
    pub starvation_guard: Option<StarvationGuard>,
    pub new_token_ratio: RatioConfig,
    /// Decode steps a retraction should buy (used by `on_retract`).
    pub retract_decode_steps: usize,
    /// Longest accepted request (prompt plus any generated tokens), if bounded.
    pub max_request_tokens: Option<usize>,
    /// Prefix tokens compared per step when ranking requests never matched before (later
    /// steps continue earlier matches at almost no cost). Beyond it, unmatched requests rank
    /// as cache misses until a later step matches them. Bounds the cost of a burst of arrivals.
    pub max_match_tokens_per_step: usize,
    /// Seed of the `random` policy.
    pub seed: u64,
}

impl Default for SchedConfig {
    fn default() -> Self {
        Self {
            policy: Policy::Lpm,
            max_prefill_tokens: 16384,
            enable_chunked_prefill: true,
            max_running_requests: 256,
            clip_max_new_tokens: 4096,
            in_batch_share_min_len: Some(32),
            starvation_guard: Some(StarvationGuard::default()),
            new_token_ratio: RatioConfig::default(),
            retract_decode_steps: 20,
            max_request_tokens: None,
            max_match_tokens_per_step: 1 << 20,
            seed: 0,
        }
    }
}

impl SchedConfig {
    pub fn validate(&self) -> Result<(), SchedError> {
        let fail = |msg: String| Err(SchedError::Config(msg));
        if self.max_prefill_tokens == 0 {
            return fail("max_prefill_tokens must be >= 1".into());
        }
        if self.max_running_requests == 0 {
            return fail("max_running_requests must be >= 1".into());
        }
        if self.in_batch_share_min_len == Some(0) {
            return fail("in_batch_share_min_len must be >= 1 (or None to disable)".into());
        }
        if self.max_request_tokens == Some(0) {
            return fail("max_request_tokens must be >= 1 (or None for no bound)".into());
        }
        if let Some(guard) = &self.starvation_guard {
            if let Some(seconds) = guard.max_wait_s {
                if !(seconds.is_finite() && seconds >= 0.0) {
                    return fail(format!("max_wait_s must be finite and >= 0, got {seconds}"));
                }
            }
        }
        self.new_token_ratio.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_round_trip() {
        for policy in Policy::ALL {
            assert_eq!(policy.name().parse::<Policy>().unwrap(), policy);
        }
        assert!(matches!("longest".parse::<Policy>(), Err(SchedError::Config(_))));
    }

    #[test]
    fn defaults_validate_and_zero_budgets_do_not() {
        assert!(SchedConfig::default().validate().is_ok());
        let zero_prefill = SchedConfig { max_prefill_tokens: 0, ..SchedConfig::default() };
        assert!(zero_prefill.validate().is_err());
        let zero_running = SchedConfig { max_running_requests: 0, ..SchedConfig::default() };
        assert!(zero_running.validate().is_err());
        let negative_wait = SchedConfig {
            starvation_guard: Some(StarvationGuard { max_wait_steps: None, max_wait_s: Some(-1.0) }),
            ..SchedConfig::default()
        };
        assert!(negative_wait.validate().is_err());
    }
}
