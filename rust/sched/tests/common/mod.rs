//! Shared helpers: a naive prefix index (the fake behind the narrow trait) and builders.
#![allow(dead_code)]

use std::sync::Arc;

use sglr_radix::{Namespace, SlotId, TokenId};
use sglr_sched::{Decision, NewRequest, PrefixIndex, ReqId, SchedConfig, Scheduler, StepInput};

/// A deliberately naive index: each cached sequence is an independent unit (no sharing, no
/// splitting). A match is the longest common prefix with any sequence; locking a match pins
/// its whole sequence; eviction drops whole unpinned sequences, least recently used first.
#[derive(Debug, Default)]
pub struct FakeIndex {
    seqs: Vec<Cached>,
    clock: u64,
    pub num_matches: usize,
}

#[derive(Debug)]
struct Cached {
    namespace: Option<Namespace>,
    tokens: Vec<TokenId>,
    slots: Vec<SlotId>,
    lock_ref: u32,
    last_use: u64,
    is_alive: bool,
}

/// `seq == None` is the root (nothing matched).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeNode {
    pub seq: Option<usize>,
    pub len: usize,
}

impl FakeIndex {
    /// Caches `tokens` with slots `first_slot..`; returns the sequence's index.
    pub fn cache(&mut self, tokens: &[TokenId], first_slot: SlotId) -> usize {
        self.cache_in(None, tokens, first_slot)
    }

    pub fn cache_in(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        first_slot: SlotId,
    ) -> usize {
        self.clock += 1;
        self.seqs.push(Cached {
            namespace,
            tokens: tokens.to_vec(),
            slots: (first_slot..first_slot + tokens.len() as SlotId).collect(),
            lock_ref: 0,
            last_use: self.clock,
            is_alive: true,
        });
        self.seqs.len() - 1
    }

    pub fn lock_ref(&self, seq: usize) -> u32 {
        self.seqs[seq].lock_ref
    }

    pub fn is_cached(&self, seq: usize) -> bool {
        self.seqs[seq].is_alive
    }

    pub fn protected_size(&self) -> usize {
        self.seqs.iter().filter(|s| s.is_alive && s.lock_ref > 0).map(|s| s.tokens.len()).sum()
    }

    fn best(&mut self, namespace: Option<Namespace>, tokens: &[TokenId]) -> FakeNode {
        self.num_matches += 1;
        self.clock += 1;
        let mut best = FakeNode { seq: None, len: 0 };
        for (i, seq) in self.seqs.iter().enumerate() {
            if !seq.is_alive || seq.namespace != namespace {
                continue;
            }
            let len = seq.tokens.iter().zip(tokens).take_while(|(a, b)| a == b).count();
            if len > best.len {
                best = FakeNode { seq: Some(i), len };
            }
        }
        if let Some(i) = best.seq {
            self.seqs[i].last_use = self.clock;
        }
        best
    }
}

impl PrefixIndex for FakeIndex {
    type Node = FakeNode;
    type Error = String;

    fn match_len(&mut self, namespace: Option<Namespace>, tokens: &[TokenId]) -> (usize, FakeNode) {
        let node = self.best(namespace, tokens);
        (node.len, node)
    }

    fn match_slots(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        slots: &mut Vec<SlotId>,
    ) -> (usize, FakeNode) {
        let node = self.best(namespace, tokens);
        if let Some(i) = node.seq {
            slots.extend_from_slice(&self.seqs[i].slots[..node.len]);
        }
        (node.len, node)
    }

    fn lock(&mut self, node: FakeNode) -> Result<(), String> {
        let Some(i) = node.seq else { return Ok(()) };
        let seq = &mut self.seqs[i];
        if !seq.is_alive {
            return Err(format!("sequence {i} was evicted"));
        }
        seq.lock_ref += 1;
        Ok(())
    }

    fn unlock(&mut self, node: FakeNode) -> Result<(), String> {
        let Some(i) = node.seq else { return Ok(()) };
        let seq = &mut self.seqs[i];
        if seq.lock_ref == 0 {
            return Err(format!("sequence {i} is not locked"));
        }
        seq.lock_ref -= 1;
        Ok(())
    }

    fn evictable_size(&self) -> usize {
        self.seqs.iter().filter(|s| s.is_alive && s.lock_ref == 0).map(|s| s.tokens.len()).sum()
    }
}

pub fn config() -> SchedConfig {
    SchedConfig { max_prefill_tokens: 1 << 20, max_running_requests: 1 << 20, ..SchedConfig::default() }
}

pub fn scheduler<N: Copy + Eq + std::fmt::Debug>(config: SchedConfig) -> Scheduler<N> {
    Scheduler::new(config).expect("valid config")
}

pub fn request(rid: ReqId, tokens: &[TokenId], max_new_tokens: usize) -> NewRequest {
    NewRequest {
        rid,
        tokens: Arc::from(tokens.to_vec()),
        max_new_tokens,
        namespace: None,
        arrival_s: 0.0,
        max_prefix_len: None,
        priority_key: 0,
    }
}

/// `prefix` followed by `len - prefix.len()` tokens unique to `rid`.
pub fn tokens_with_prefix(prefix: &[TokenId], rid: ReqId, len: usize) -> Vec<TokenId> {
    let mut tokens = prefix.to_vec();
    let base = 1_000_000 + rid as TokenId * 10_000;
    tokens.extend((0..(len - prefix.len()) as TokenId).map(|i| base + i));
    tokens
}

pub fn step(num_free_slots: usize) -> StepInput<'static> {
    StepInput { num_free_slots, running_tokens_left: &[], now_s: 0.0 }
}

pub fn rids<N>(decision: &Decision<N>) -> Vec<ReqId> {
    decision.admissions.iter().map(|a| a.rid).collect()
}

/// Selects and checks the scheduler's invariants afterwards.
pub fn select<I: PrefixIndex>(
    scheduler: &mut Scheduler<I::Node>,
    index: &mut I,
    input: StepInput<'_>,
) -> Decision<I::Node> {
    let decision = scheduler.select(index, &input).expect("select");
    scheduler.check_invariants().expect("invariants");
    decision
}
