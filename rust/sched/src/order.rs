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

impl<N: Copy + Eq + std::fmt::Debug> Scheduler<N> {
    pub(crate) fn rank<I: PrefixIndex<Node = N>>(
        &mut self,
        index: &mut I,
        step: u64,
        now_s: f64,
    ) -> Vec<Candidate> {
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

        match self.config.policy {
            Policy::Lpm => {
                let mut budget = self.config.max_match_tokens_per_step;
                let mut keyed: Vec<(Reverse<usize>, u64, u32)> = regular
                    .iter()
                    .map(|&key| {
                        let matched = refresh_match(self.queue.get_mut(key), index, &mut budget);
                        (Reverse(matched), self.queue.get(key).seq, key)
                    })
                    .collect();
                keyed.sort_unstable();
                regular = keyed.into_iter().map(|(_, _, key)| key).collect();
            }
            Policy::Fcfs => regular.sort_unstable_by_key(|&key| self.queue.get(key).seq),
            Policy::Lof => regular.sort_unstable_by_key(|&key| {
                let entry = self.queue.get(key);
                (Reverse(entry.max_new_tokens), entry.seq)
            }),
            Policy::Random => {
                regular.sort_unstable_by_key(|&key| self.queue.get(key).seq);
                for i in (1..regular.len()).rev() {
                    let j = (self.rng.next_u64() % (i as u64 + 1)) as usize;
                    regular.swap(i, j);
                }
            }
            Policy::DfsWeight => {
                let mut budget = self.config.max_match_tokens_per_step;
                let mut matched_len = vec![None; self.queue.capacity()];
                for &key in &regular {
                    let matched = refresh_match(self.queue.get_mut(key), index, &mut budget);
                    matched_len[key as usize] = Some(matched);
                }
                regular.clear();
                self.trie.dfs_by_weight(|key| matched_len[key as usize], |key| regular.push(key));
            }
        }

        let mut candidates = Vec::with_capacity(urgent.len() + regular.len());
        candidates.extend(urgent.into_iter().map(|(_, _, key)| Candidate { key, is_urgent: true }));
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
