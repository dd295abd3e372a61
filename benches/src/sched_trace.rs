//! A waiting queue shaped like a busy chat / agent server: prompts share one of a few system
//! prompts, about half of them continue a conversation whose earlier turns are cached, and
//! the rest of each prompt is new.

use std::sync::Arc;

use sglr_radix::{RadixTree, TokenId};
use sglr_sched::NewRequest;

use crate::Rng;

pub struct SchedTrace {
    /// The cache before the first selection: system prompts and earlier turns.
    pub tree: RadixTree,
    pub requests: Vec<NewRequest>,
    pub num_cached_tokens: usize,
}

/// `num_requests` prompts of `min_len..=max_len` tokens over 16 system prompts of 256-1024
/// tokens; every other prompt has its first 50-90% cached.
pub fn sched_trace(num_requests: usize, min_len: usize, max_len: usize, seed: u64) -> SchedTrace {
    let mut rng = Rng::new(seed);
    let system_prompts: Vec<Vec<TokenId>> = (0..16)
        .map(|_| {
            let len = rng.range(256, 1024.min(min_len - 1));
            (0..len).map(|_| (rng.next_u64() % 32_000) as TokenId).collect()
        })
        .collect();
    let mut tree = RadixTree::new();
    let mut next_slot: u32 = 0;
    let mut insert = |tree: &mut RadixTree, tokens: &[TokenId]| {
        let slots: Vec<u32> = (next_slot..next_slot + tokens.len() as u32).collect();
        next_slot += tokens.len() as u32;
        tree.insert(None, tokens, &slots).expect("lengths match");
    };
    for prompt in &system_prompts {
        insert(&mut tree, prompt);
    }
    let mut requests = Vec::with_capacity(num_requests);
    for rid in 0..num_requests {
        let len = rng.range(min_len, max_len);
        let mut tokens = system_prompts[rng.range(0, system_prompts.len() - 1)].clone();
        while tokens.len() < len {
            tokens.push((rng.next_u64() % 32_000) as TokenId);
        }
        if rid % 2 == 0 {
            let cached_len = len * rng.range(50, 90) / 100;
            insert(&mut tree, &tokens[..cached_len]);
        }
        requests.push(NewRequest {
            rid: rid as u64,
            tokens: Arc::from(tokens),
            max_new_tokens: 256,
            namespace: None,
            arrival_s: 0.0,
            max_prefix_len: None,
            priority_key: 0,
        });
    }
    let num_cached_tokens = tree.total_size();
    SchedTrace { tree, requests, num_cached_tokens }
}
