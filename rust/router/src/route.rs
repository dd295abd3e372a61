//! The cache-aware policy's decision in one call ([`PrefixForest::route`]): match the key in
//! every replica's tree, choose, insert into the chosen tree from where its match ended. The
//! router crosses into Rust once per request, and the chosen tree's shared prefix is compared
//! once, not once to choose and again to insert.
//!
//! The rule is the router's (`sglr.router.policy.Router`), with its loads and thresholds
//! passed in: when the loads are imbalanced the shortest queue wins; otherwise the longest
//! match wins if it covers at least `cache_threshold` of the key, else the replica holding the
//! fewest keys (then the shortest queue, then the lowest id).

use crate::error::RouterTreeError;
use crate::forest::{PrefixForest, ReplicaId, ReplicaMatch};
use crate::tree::MatchEnd;

/// A replica and its requests in flight, as the router counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaLoad {
    pub replica: ReplicaId,
    pub num_in_flight: u64,
}

/// The cache-aware policy's thresholds (the router's `RouterConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheAwareRule {
    pub balance_abs_threshold: u64,
    pub balance_rel_threshold: f64,
    pub cache_threshold: f64,
}

impl CacheAwareRule {
    /// Both hold: max - min > abs and max > rel * min (then the cache is ignored, so a hot
    /// prefix cannot pile on one replica). Float arithmetic as in Python, for the same answer.
    pub fn is_imbalanced(&self, loads: &[ReplicaLoad]) -> bool {
        let in_flight = loads.iter().map(|load| load.num_in_flight);
        let (Some(most), Some(least)) = (in_flight.clone().max(), in_flight.min()) else {
            return false;
        };
        most - least > self.balance_abs_threshold && most as f64 > self.balance_rel_threshold * least as f64
    }

    /// At least `cache_threshold` of a non-empty key matched (`matched / len`, one rounding,
    /// as Python's true division).
    pub fn is_cache_hit(&self, matched_len: usize, key_len: usize) -> bool {
        key_len > 0 && matched_len as f64 / key_len as f64 >= self.cache_threshold
    }
}

impl PrefixForest {
    /// Chooses a replica among `loads` (each must have a tree) for `key` by `rule`, inserts
    /// `key` into its tree, and returns it with the length matched there before the insert.
    pub fn route(
        &mut self,
        key: &[u32],
        loads: &[ReplicaLoad],
        rule: &CacheAwareRule,
    ) -> Result<ReplicaMatch, RouterTreeError> {
        if loads.is_empty() {
            return Err(RouterTreeError::NoReplicas);
        }
        if let Some(unknown) = loads.iter().find(|load| !self.trees.contains_key(&load.replica)) {
            return Err(RouterTreeError::UnknownReplica(unknown.replica));
        }
        let (replica, matched) = if rule.is_imbalanced(loads) {
            let shortest =
                loads.iter().min_by_key(|load| (load.num_in_flight, load.replica)).expect("non-empty");
            (shortest.replica, self.trees[&shortest.replica].find(key))
        } else {
            self.choose_cache_aware(key, loads, rule)
        };
        self.trees.get_mut(&replica).expect("checked above").insert_at(key, matched);
        Ok(ReplicaMatch { replica, matched_len: matched.len })
    }

    fn choose_cache_aware(
        &self,
        key: &[u32],
        loads: &[ReplicaLoad],
        rule: &CacheAwareRule,
    ) -> (ReplicaId, MatchEnd) {
        let ends: Vec<(ReplicaLoad, MatchEnd)> =
            loads.iter().map(|&load| (load, self.trees[&load.replica].find(key))).collect();
        // Longest match; ties to the lowest id.
        let best = ends
            .iter()
            .max_by(|(a, a_end), (b, b_end)| a_end.len.cmp(&b_end.len).then(b.replica.cmp(&a.replica)))
            .expect("non-empty");
        let chosen = if rule.is_cache_hit(best.1.len, key.len()) {
            best
        } else {
            // A new prefix: the replica that has been sent the least holds the most free cache.
            ends.iter()
                .min_by_key(|(load, _)| {
                    (self.trees[&load.replica].num_keys(), load.num_in_flight, load.replica)
                })
                .expect("non-empty")
        };
        (chosen.0.replica, chosen.1)
    }
}
