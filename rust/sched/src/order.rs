//! Ranking: the order in which one selection offers waiting requests to admission.
//!
//! Urgent requests come first (requeued ones, then those the starvation guard flags, oldest
//! first); the rest follow the policy. Only `lpm` needs cache matches for ranking, and it
//! continues each request's previous match instead of re-comparing its tokens, so a step
//! costs a few node hops per request; first matches are bounded per step by
//! `max_match_tokens_per_step`. Priority keys (priority scheduling) order all of it first:
//! a retracted low-priority request does not jump ahead of a waiting high-priority one.

use std::cmp::Reverse;

use crate::config::Policy;
use crate::index::PrefixIndex;
use crate::queue::Entry;
use crate::scheduler::Scheduler;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) key: u32,
    pub(crate) is_urgent: bool,
}

/// A waiting request as the next selection would offer it ([`Scheduler::preview`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    pub rid: crate::ReqId,
    /// Its last known cache match (0 before its first ranking under `lpm` / `dfs-weight`).
    pub matched_len: usize,
    /// Offered ahead of the policy: requeued, or flagged by the starvation guard.
    pub is_urgent: bool,
    pub priority_key: i64,
}

impl<N: Copy + Eq + std::fmt::Debug> Scheduler<N> {
    pub(crate) fn rank<I: PrefixIndex<Node = N>>(
        &mut self,
        index: &mut I,
        step: u64,
        now_s: f64,
    ) -> Vec<Candidate> {
        let (urgent, mut regular) = self.split_urgent(step, now_s);
        if self.config.policy == Policy::Random {
            regular.sort_unstable_by_key(|&key| self.queue.get(key).seq);
            for i in (1..regular.len()).rev() {
                let j = (self.rng.next_u64() % (i as u64 + 1)) as usize;
                regular.swap(i, j);
            }
        } else {
            let mut matched_len = vec![0; self.queue.capacity()];
            if matches!(self.config.policy, Policy::Lpm | Policy::DfsWeight) {
                let mut budget = self.config.max_match_tokens_per_step;
                for &key in &regular {
                    matched_len[key as usize] = refresh_match(self.queue.get_mut(key), index, &mut budget);
                }
            }
            regular = self.order_regular(&regular, |key| matched_len[key as usize]);
        }
        self.by_priority(urgent, regular)
    }

    /// The first `limit` waiting requests in the order the next selection offers them, from
    /// each one's last known cache match: it reads no index and changes nothing, so a
    /// dashboard may call it any time. Under `random` it answers arrival order (the next
    /// shuffle is not drawn yet); the request whose chunked prefill is in progress is left out.
    pub fn preview(&self, now_s: f64, limit: usize) -> Vec<Waiting> {
        let last_match = |key: u32| self.queue.get(key).cached.map_or(0, |(len, _)| len);
        let (urgent, mut regular) = self.split_urgent(self.step(), now_s);
        if self.config.policy == Policy::Random {
            regular.sort_unstable_by_key(|&key| self.queue.get(key).seq);
        } else {
            regular = self.order_regular(&regular, last_match);
        }
        let mut candidates = self.by_priority(urgent, regular);
        candidates.truncate(limit);
        candidates
            .into_iter()
            .map(|candidate| {
                let entry = self.queue.get(candidate.key);
                Waiting {
                    rid: entry.rid,
                    matched_len: last_match(candidate.key),
                    is_urgent: candidate.is_urgent,
                    priority_key: entry.priority_key,
                }
            })
            .collect()
    }

    /// Urgent keys (requeued first, then starving, oldest first) and the rest, unordered.
    fn split_urgent(&self, step: u64, now_s: f64) -> (Vec<u32>, Vec<u32>) {
        let guard = self.config.starvation_guard;
        let is_starving = |entry: &Entry<N>| {
            guard.is_some_and(|guard| {
                guard.max_wait_steps.is_some_and(|steps| step - entry.arrival_step >= steps)
                    || guard.max_wait_s.is_some_and(|seconds| now_s - entry.arrival_s >= seconds)
            })
        };
        let mut urgent: Vec<(bool, u64, u32)> = Vec::new();
        let mut regular: Vec<u32> = Vec::with_capacity(self.queue.len());
        for (key, entry) in self.queue.iter() {
            if Some(key) == self.chunked {
                continue;
            }
            if entry.is_front || is_starving(entry) {
                urgent.push((!entry.is_front, entry.seq, key));
            } else {
                regular.push(key);
            }
        }
        urgent.sort_unstable();
        (urgent.into_iter().map(|(_, _, key)| key).collect(), regular)
    }

    /// `regular` in the policy's order (not `random`), given each key's cache match.
    fn order_regular(&self, regular: &[u32], matched_len: impl Fn(u32) -> usize) -> Vec<u32> {
        let mut ordered = regular.to_vec();
        match self.config.policy {
            Policy::Lpm => {
                ordered.sort_unstable_by_key(|&key| (Reverse(matched_len(key)), self.queue.get(key).seq))
            }
            Policy::Fcfs | Policy::Random => ordered.sort_unstable_by_key(|&key| self.queue.get(key).seq),
            Policy::Lof => ordered.sort_unstable_by_key(|&key| {
                let entry = self.queue.get(key);
                (Reverse(entry.max_new_tokens), entry.seq)
            }),
            Policy::DfsWeight => {
                let mut is_regular = vec![false; self.queue.capacity()];
                for &key in regular {
                    is_regular[key as usize] = true;
                }
                ordered.clear();
                self.trie.dfs_by_weight(
                    |key| is_regular[key as usize].then(|| matched_len(key)),
                    |key| ordered.push(key),
                );
            }
        }
        ordered
    }

    fn by_priority(&self, urgent: Vec<u32>, regular: Vec<u32>) -> Vec<Candidate> {
        let mut candidates = Vec::with_capacity(urgent.len() + regular.len());
        candidates.extend(urgent.into_iter().map(|key| Candidate { key, is_urgent: true }));
        candidates.extend(regular.into_iter().map(|key| Candidate { key, is_urgent: false }));
        // Stable: within one priority the order above (urgent, then policy) stands.
        candidates.sort_by_key(|candidate| self.queue.get(candidate.key).priority_key);
        candidates
    }
}

/// Brings `entry`'s cache match up to date and returns its length. A first match costs its
/// tokens out of `budget`; when the budget is short the request ranks as a miss this step.
pub(crate) fn refresh_match<N: Copy, I: PrefixIndex<Node = N>>(
    entry: &mut Entry<N>,
    index: &mut I,
    budget: &mut usize,
) -> usize {
    let key_len = entry.match_key_len;
    let key = &entry.tokens[..key_len];
    let fresh = match entry.cached {
        Some(previous) => index.rematch_len(entry.namespace, key, previous),
        None if key_len <= *budget => {
            *budget -= key_len;
            index.match_len(entry.namespace, key)
        }
        None => return 0,
    };
    entry.cached = Some(fresh);
    fresh.0
}
