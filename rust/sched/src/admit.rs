//! Admission under budgets (Algorithm 1 of the SGLang paper, with chunked prefill):
//!
//! ```text
//! available = free slots + evictable cached tokens - reserved
//! reserved  = sum over running requests of reserve(tokens left)     (new_token_ratio estimate)
//!           + for each admission: its chunk + reserve(max_new_tokens) if the prompt completes
//! for each candidate in rank order:
//!     stop if the running cap or the step's prefill budget is reached
//!     defer it if it shares >= in_batch_share_min_len uncached tokens with an admission
//!     match its prefix, lock the node (the prefix stops being evictable), then
//!     admit it if its need fits `available`, else unlock and stop
//! offer the deferred candidates the same way
//! report (num_prefill_tokens - free) cached tokens to evict so the prefill can be allocated
//! (the caller's KV owner evicts them; the scheduler never frees memory)
//! ```
//!
//! Nothing about the queue changes until the pass succeeds; on an index error every lock the
//! pass took is released again.

use sglr_radix::TokenId;

use crate::decision::{Admission, Decision, StopReason};
use crate::error::SchedError;
use crate::index::PrefixIndex;
use crate::order::{refresh_match, Candidate};
use crate::scheduler::{Scheduler, StepInput};

/// The running state of one selection.
pub(crate) struct Pass<N> {
    step: u64,
    /// Claim epoch of the waiting trie for this pass (never 0, the initial claim).
    epoch: u64,
    num_free_slots: usize,
    num_running: usize,
    /// Slots promised to running requests and to this pass's admissions.
    reserved: usize,
    rem_prefill_tokens: usize,
    pub(crate) decision: Decision<N>,
    /// Keys whose prompt completes this step (they leave the queue when the pass succeeds).
    pub(crate) done_keys: Vec<u32>,
    /// The request whose prefill is chunked after this step, with its computed length.
    pub(crate) chunked_after: Option<(u32, usize)>,
    /// Admissions the starvation guard moved ahead (requeued requests not counted).
    pub(crate) num_starved: u64,
    locked: Vec<N>,
}

enum Outcome {
    Admitted,
    Deferred,
    Stop(StopReason),
}

impl<N: Copy> Pass<N> {
    fn available<I: PrefixIndex<Node = N>>(&self, index: &I) -> usize {
        (self.num_free_slots + index.evictable_size()).saturating_sub(self.reserved)
    }

    fn rollback<I: PrefixIndex<Node = N>>(&mut self, index: &mut I) {
        for node in self.locked.drain(..).rev() {
            // NOTE: best effort; these nodes were locked by this pass a moment ago.
            let _ = index.unlock(node);
        }
    }
}

impl<N: Copy + Eq + std::fmt::Debug> Scheduler<N> {
    pub(crate) fn run_selection<I: PrefixIndex<Node = N>>(
        &mut self,
        index: &mut I,
        input: &StepInput<'_>,
        step: u64,
    ) -> Result<Pass<N>, SchedError> {
        let clip = self.config.clip_max_new_tokens;
        let running_reserve =
            input.running_tokens_left.iter().map(|&left| self.ratio.reserve(left as usize, clip)).sum();
        let mut pass = Pass {
            step,
            epoch: step + 1,
            num_free_slots: input.num_free_slots,
            num_running: input.running_tokens_left.len(),
            reserved: running_reserve,
            rem_prefill_tokens: self.config.max_prefill_tokens,
            decision: Decision::empty(step),
            done_keys: Vec::new(),
            chunked_after: None,
            num_starved: 0,
            locked: Vec::new(),
        };
        match self.offer_all(index, &mut pass, input.now_s) {
            Ok(stop) => {
                pass.decision.stop = stop;
                pass.decision.num_tokens_to_evict =
                    pass.decision.num_prefill_tokens.saturating_sub(pass.num_free_slots);
                Ok(pass)
            }
            Err(error) => {
                pass.rollback(index);
                Err(error)
            }
        }
    }

    fn offer_all<I: PrefixIndex<Node = N>>(
        &mut self,
        index: &mut I,
        pass: &mut Pass<N>,
        now_s: f64,
    ) -> Result<StopReason, SchedError> {
        if let Some(key) = self.chunked {
            if let Some(stop) = self.continue_chunked(index, pass, key) {
                return Ok(stop);
            }
        }
        let candidates = self.rank(index, pass.step, now_s);
        let mut deferred = Vec::new();
        for candidate in candidates {
            match self.offer(index, pass, candidate, true)? {
                Outcome::Admitted => {}
                Outcome::Deferred => deferred.push(candidate),
                Outcome::Stop(stop) => return Ok(stop),
            }
        }
        // NOTE: followers of a shared, uncached prefix wait one step so they reuse the leader's
        // KV instead of recomputing it; only when nothing else ran do they go now.
        if pass.decision.admissions.is_empty() {
            for candidate in deferred {
                if let Outcome::Stop(stop) = self.offer(index, pass, candidate, false)? {
                    return Ok(stop);
                }
            }
        }
        Ok(StopReason::QueueExhausted)
    }

    /// The next chunk of the request whose prefill is in progress. Returns why the pass must
    /// stop, or `None` when the prompt completes and other requests may follow.
    fn continue_chunked<I: PrefixIndex<Node = N>>(
        &mut self,
        index: &mut I,
        pass: &mut Pass<N>,
        key: u32,
    ) -> Option<StopReason> {
        let entry = self.queue.get(key);
        let computed = entry.num_computed.expect("a chunked request has computed tokens");
        let remaining = entry.tokens.len() - computed;
        let chunk = remaining.min(pass.rem_prefill_tokens);
        let is_prompt_done = chunk == remaining;
        let need = chunk + self.output_reserve(entry.max_new_tokens, is_prompt_done);
        if need > pass.available(index) {
            return Some(StopReason::Memory);
        }
        let slots_at = pass.decision.prefix_slots.len();
        pass.decision.admissions.push(Admission {
            rid: entry.rid,
            prefix_len: computed,
            extend_len: chunk,
            is_prompt_done,
            is_continuation: true,
            node: None,
            slots: slots_at..slots_at,
            waited_steps: 0,
            is_urgent: false,
        });
        self.trie.claim(entry.trie_node, pass.epoch);
        pass.reserved += need;
        pass.rem_prefill_tokens -= chunk;
        pass.decision.num_prefill_tokens += chunk;
        if is_prompt_done {
            pass.done_keys.push(key);
            None
        } else {
            pass.chunked_after = Some((key, computed + chunk));
            Some(StopReason::PrefillBudget)
        }
    }

    fn offer<I: PrefixIndex<Node = N>>(
        &mut self,
        index: &mut I,
        pass: &mut Pass<N>,
        candidate: Candidate,
        may_defer: bool,
    ) -> Result<Outcome, SchedError> {
        if pass.num_running + pass.decision.admissions.len() >= self.config.max_running_requests {
            return Ok(Outcome::Stop(StopReason::RunningCap));
        }
        if pass.rem_prefill_tokens == 0 {
            return Ok(Outcome::Stop(StopReason::PrefillBudget));
        }
        let key = candidate.key;
        // NOTE: urgent requests defer too: a deferral lasts one step (until the leader's prefix
        // is cached), which keeps waiting bounded and avoids computing that prefix twice.
        if may_defer {
            if let Some(min_share) = self.config.in_batch_share_min_len {
                // The shared depth is a few node hops; the cache match is only looked up when
                // enough is shared to possibly defer.
                let shared = self.trie.claimed_depth(self.queue.get(key).trie_node, pass.epoch);
                if shared >= min_share {
                    let mut unbounded = usize::MAX;
                    let matched = refresh_match(self.queue.get_mut(key), index, &mut unbounded);
                    if shared >= matched + min_share {
                        return Ok(Outcome::Deferred);
                    }
                }
            }
        }

        let entry = self.queue.get(key);
        let tokens: &[TokenId] = &entry.tokens;
        let slots_at = pass.decision.prefix_slots.len();
        let (prefix_len, node) = index.match_slots(
            entry.namespace,
            &tokens[..entry.match_key_len],
            &mut pass.decision.prefix_slots,
        );
        let extend_total = tokens.len() - prefix_len;
        let chunk = if extend_total <= pass.rem_prefill_tokens {
            extend_total
        } else if self.config.enable_chunked_prefill {
            pass.rem_prefill_tokens
        } else if pass.decision.admissions.is_empty() {
            // NOTE: without chunking an oversized prompt still runs, alone, or it never would.
            extend_total
        } else {
            pass.decision.prefix_slots.truncate(slots_at);
            return Ok(Outcome::Stop(StopReason::PrefillBudget));
        };
        let is_prompt_done = chunk == extend_total;
        let need = chunk + self.output_reserve(entry.max_new_tokens, is_prompt_done);
        // Locking first: the matched prefix stops counting as evictable, which is exactly the
        // room the request can no longer claim from the cache.
        index.lock(node).map_err(|e| SchedError::Index(e.to_string()))?;
        if need > pass.available(index) {
            pass.decision.prefix_slots.truncate(slots_at);
            index.unlock(node).map_err(|e| SchedError::Index(e.to_string()))?;
            return Ok(Outcome::Stop(StopReason::Memory));
        }
        pass.locked.push(node);

        let entry = self.queue.get_mut(key);
        entry.cached = Some((prefix_len, node));
        let entry = self.queue.get(key);
        pass.decision.admissions.push(Admission {
            rid: entry.rid,
            prefix_len,
            extend_len: chunk,
            is_prompt_done,
            is_continuation: false,
            node: Some(node),
            slots: slots_at..pass.decision.prefix_slots.len(),
            waited_steps: pass.step - entry.arrival_step,
            is_urgent: candidate.is_urgent,
        });
        self.trie.claim(entry.trie_node, pass.epoch);
        pass.num_starved += u64::from(candidate.is_urgent && !entry.is_front);
        pass.reserved += need;
        pass.rem_prefill_tokens = pass.rem_prefill_tokens.saturating_sub(chunk);
        pass.decision.num_prefill_tokens += chunk;
        if is_prompt_done {
            pass.done_keys.push(key);
        } else {
            pass.chunked_after = Some((key, prefix_len + chunk));
        }
        Ok(Outcome::Admitted)
    }

    fn output_reserve(&self, max_new_tokens: usize, is_prompt_done: bool) -> usize {
        if is_prompt_done {
            self.ratio.reserve(max_new_tokens, self.config.clip_max_new_tokens)
        } else {
            0
        }
    }
}
