//! `Scheduler`: the waiting queue plus one `select` per engine step.

use std::fmt::Debug;
use std::sync::Arc;

use sglr_radix::{Namespace, TokenId};

use crate::config::SchedConfig;
use crate::decision::Decision;
use crate::error::SchedError;
use crate::index::PrefixIndex;
use crate::queue::{Entry, Queue};
use crate::ratio::NewTokenRatio;
use crate::rng::SplitMix64;
use crate::trie::WaitingTrie;
use crate::ReqId;

/// A request entering the queue.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub rid: ReqId,
    /// Prompt tokens; for a retracted request, the prompt plus what it generated so far.
    pub tokens: Arc<[TokenId]>,
    /// Output tokens it may still generate (sizes its output reservation).
    pub max_new_tokens: usize,
    pub namespace: Option<Namespace>,
    /// Arrival time in seconds on the clock `StepInput::now_s` uses.
    pub arrival_s: f64,
    /// Longest cached prefix the request may reuse (e.g. the first position whose logprob it
    /// asks for); `None` = no limit beyond leaving the last token to compute.
    pub max_prefix_len: Option<usize>,
    /// Offered before every request with a larger key, whatever the policy says (priority
    /// scheduling: the engine maps priorities to keys); equal keys keep the policy's order.
    pub priority_key: i64,
}

/// What the engine reports at each step.
#[derive(Debug, Clone, Copy)]
pub struct StepInput<'a> {
    /// Free slots in the KV pool (not counting evictable cached ones).
    pub num_free_slots: usize,
    /// One entry per running (decoding) request: output tokens it may still generate.
    pub running_tokens_left: &'a [u32],
    /// Now, in seconds, on the clock of `NewRequest::arrival_s`.
    pub now_s: f64,
}

/// Cache-aware admission of waiting requests. Generic over the index's node handle `N`.
///
/// Ownership: the scheduler holds waiting requests (and the one whose chunked prefill is in
/// progress) and nothing else. A decision's locks and prefix slots pass to the
/// engine the moment `select` returns.
#[derive(Debug)]
pub struct Scheduler<N> {
    pub(crate) config: SchedConfig,
    pub(crate) queue: Queue<N>,
    pub(crate) trie: WaitingTrie,
    /// Key of the request whose prefill is chunked across steps (at most one).
    pub(crate) chunked: Option<u32>,
    pub(crate) ratio: NewTokenRatio,
    pub(crate) rng: SplitMix64,
    step: u64,
    next_seq: u64,
    num_starved_admissions: u64,
}

impl<N: Copy + Eq + Debug> Scheduler<N> {
    pub fn new(config: SchedConfig) -> Result<Self, SchedError> {
        config.validate()?;
        Ok(Self {
            ratio: NewTokenRatio::new(config.new_token_ratio),
            rng: SplitMix64::new(config.seed),
            config,
            queue: Queue::default(),
            trie: WaitingTrie::default(),
            chunked: None,
            step: 0,
            next_seq: 0,
            num_starved_admissions: 0,
        })
    }

    pub fn config(&self) -> &SchedConfig {
        &self.config
    }

    /// Adds a request at the back of the queue.
    pub fn add(&mut self, request: NewRequest) -> Result<(), SchedError> {
        self.push(request, false)
    }

    /// Puts a request back at the head of the queue (a retracted request, whose tokens
    /// include its output so far). Requeued requests are offered before all others, in the
    /// order they were requeued.
    pub fn requeue(&mut self, request: NewRequest) -> Result<(), SchedError> {
        self.push(request, true)
    }

    /// Drops a request (abort). Returns whether it was held. If its chunked prefill was in
    /// progress, the engine still owns the slots and locks of the chunks it ran.
    pub fn remove(&mut self, rid: ReqId) -> bool {
        let Some(key) = self.queue.key_of(rid) else {
            return false;
        };
        self.drop_key(key);
        true
    }

    pub fn contains(&self, rid: ReqId) -> bool {
        self.queue.key_of(rid).is_some()
    }

    /// Requests held: waiting ones plus the one whose chunked prefill is in progress.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.len() == 0
    }

    /// The request whose chunked prefill is in progress, if any.
    pub fn chunked_rid(&self) -> Option<ReqId> {
        self.chunked.map(|key| self.queue.get(key).rid)
    }

    /// Selections run so far.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Admissions the starvation guard moved ahead of the policy order.
    pub fn num_starved_admissions(&self) -> u64 {
        self.num_starved_admissions
    }

    pub fn new_token_ratio(&self) -> &NewTokenRatio {
        &self.ratio
    }

    pub fn new_token_ratio_mut(&mut self) -> &mut NewTokenRatio {
        &mut self.ratio
    }

    /// `NewTokenRatio::on_retract` with the configured `retract_decode_steps`.
    pub fn on_retract(
        &mut self,
        num_decoded_tokens: usize,
        num_max_new_tokens: usize,
        num_running: usize,
    ) -> f64 {
        let steps = self.config.retract_decode_steps;
        self.ratio.on_retract(num_decoded_tokens, num_max_new_tokens, num_running, steps)
    }

    /// Forgets every remembered cache match (call when switching to another index or after
    /// the index was reset; stale handles are also detected on their own).
    pub fn invalidate_matches(&mut self) {
        for (_, entry) in self.queue.iter_mut() {
            entry.cached = None;
        }
    }

    /// One step of admission against `index`; see the `admit` module for the algorithm.
    ///
    /// Mutates `index`: matches (splits, LRU touches), locks the admitted prefixes and reports how much to evict
    /// what the step's prefill needs. Admitted requests whose prompt completes leave the queue.
    pub fn select<I: PrefixIndex<Node = N>>(
        &mut self,
        index: &mut I,
        input: &StepInput<'_>,
    ) -> Result<Decision<N>, SchedError> {
        let step = self.step;
        self.step += 1;
        if self.queue.len() == 0 {
            return Ok(Decision::empty(step));
        }
        let pass = self.run_selection(index, input, step)?;
        // NOTE: a continuation refused for memory keeps its place: `chunked` only changes
        // when a chunk ran (a new one, or the last one, which drops the request below).
        if let Some((key, computed)) = pass.chunked_after {
            self.queue.get_mut(key).num_computed = Some(computed);
            self.chunked = Some(key);
        }
        for &key in &pass.done_keys {
            self.drop_key(key);
        }
        self.num_starved_admissions += pass.num_starved;
        Ok(pass.decision)
    }

    /// Checks the queue, the waiting trie and their agreement; O(total tokens).
    pub fn check_invariants(&self) -> Result<(), SchedError> {
        let fail = |msg: String| Err(SchedError::Invariant(msg));
        self.trie.check_invariants().map_err(SchedError::Invariant)?;
        if self.trie.num_requests() != self.queue.len() {
            return fail(format!(
                "trie holds {} requests, queue {}",
                self.trie.num_requests(),
                self.queue.len()
            ));
        }
        let mut num_in_progress = 0;
        for (key, entry) in self.queue.iter() {
            if self.queue.rid_index().get(&entry.rid) != Some(&key) {
                return fail(format!("request {} is not indexed by its id", entry.rid));
            }
            if entry.tokens.is_empty() {
                return fail(format!("request {} has no tokens", entry.rid));
            }
            if !self.trie.is_live_ending(entry.trie_node, key)
                || self.trie.path(entry.trie_node) != &entry.tokens[..]
            {
                return fail(format!("request {} is misplaced in the trie", entry.rid));
            }
            if let Some(computed) = entry.num_computed {
                num_in_progress += 1;
                if self.chunked != Some(key) || computed == 0 || computed >= entry.tokens.len() {
                    return fail(format!(
                        "request {} has {computed} computed tokens but is not the chunked one",
                        entry.rid
                    ));
                }
            }
        }
        if num_in_progress != usize::from(self.chunked.is_some()) {
            return fail("chunked request bookkeeping disagrees".into());
        }
        let ratio = self.ratio.value();
        if !(self.ratio.config().min..=1.0).contains(&ratio) {
            return fail(format!("new_token_ratio {ratio} out of bounds"));
        }
        Ok(())
    }

    fn push(&mut self, request: NewRequest, is_front: bool) -> Result<(), SchedError> {
        let NewRequest { rid, tokens, max_new_tokens, namespace, arrival_s, max_prefix_len, priority_key } =
            request;
        if self.contains(rid) {
            return Err(SchedError::DuplicateRequest(rid));
        }
        if tokens.is_empty() {
            return Err(SchedError::EmptyPrompt(rid));
        }
        if let Some(max_tokens) = self.config.max_request_tokens {
            if tokens.len() > max_tokens {
                return Err(SchedError::RequestTooLarge { rid, num_tokens: tokens.len(), max_tokens });
            }
        }
        let key = self.queue.next_key();
        let trie_node = self.trie.insert(namespace, &tokens, key);
        let seq = self.next_seq;
        self.next_seq += 1;
        // NOTE: the last token is never matched: it must run through the model so the request
        // gets logits for its first new token.
        let match_key_len = max_prefix_len.map_or(tokens.len() - 1, |cap| cap.min(tokens.len() - 1));
        let inserted = self.queue.insert(Entry {
            rid,
            match_key_len,
            namespace,
            tokens,
            max_new_tokens,
            seq,
            arrival_step: self.step,
            arrival_s,
            is_front,
            cached: None,
            trie_node,
            num_computed: None,
            priority_key,
        });
        debug_assert_eq!(inserted, key);
        Ok(())
    }

    fn drop_key(&mut self, key: u32) {
        let entry = self.queue.remove(key);
        self.trie.remove(entry.trie_node, key);
        if self.chunked == Some(key) {
            self.chunked = None;
        }
    }
}
