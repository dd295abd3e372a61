//! Shared work for dense states: the *local component* of a state.
//!
//! Inside a JSON string every field has its own "string body" DFA state, and each one allows
//! almost the whole vocabulary, so walking the trie per state costs a full vocabulary pass per
//! field. Those states differ only in what follows the closing quote. The local component
//! K(s) of state s is the set of states on short cycles through s (the body, its UTF-8 and
//! escape states); described byte by byte from s (targets inside K numbered canonically,
//! targets outside marked "exit"), it is identical for every string field of every schema.
//!
//! The trie walk *within* K depends only on that description (the signature), so it is done
//! once per vocabulary and shared: it yields the tokens that stay inside K (all allowed) and
//! the trie edges that leave K. A state's row is then that mask plus short walks below each
//! exit edge from the actual exit target.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::dfa::{ByteDfa, DEAD};
use crate::vocab::trie::TokenTrie;
use crate::walk::{allow_tokens_at, walk_below};

/// Longest cycle through s (in bytes) that puts a state into K(s): a `\uXXXX` escape is 6.
const CYCLE_LEN: usize = 6;
/// Largest component worth describing; bigger neighbourhoods fall back to the plain walk.
const MAX_COMPONENT: usize = 32;

/// Signature codes besides canonical indices.
const EXIT: u16 = u16::MAX;
const DEAD_CODE: u16 = u16::MAX - 1;

/// K(s) for one state: its canonical numbering and its signature.
pub(crate) struct Component {
    /// Canonical index -> DFA state (index 0 is s).
    pub states: Vec<u32>,
    /// For canonical state k and byte b, `signature[k * 256 + b]` is the canonical target,
    /// `EXIT` or `DEAD_CODE`.
    pub signature: Vec<u16>,
}

/// Predecessor lists of every DFA state (CSR), for the backward half of K(s).
#[derive(Debug)]
pub(crate) struct ReverseEdges {
    starts: Vec<u32>,
    sources: Vec<u32>,
}

impl ReverseEdges {
    pub fn new(dfa: &ByteDfa) -> Self {
        let num_states = dfa.num_states();
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for state in 0..num_states as u32 {
            let mut targets: Vec<u32> = dfa.successors(state).collect();
            targets.sort_unstable();
            targets.dedup();
            pairs.extend(targets.into_iter().map(|t| (t, state)));
        }
        pairs.sort_unstable();
        let mut starts = vec![0u32; num_states + 1];
        for &(target, _) in &pairs {
            starts[target as usize + 1] += 1;
        }
        for i in 0..num_states {
            starts[i + 1] += starts[i];
        }
        Self {
            starts,
            sources: pairs.into_iter().map(|(_, s)| s).collect(),
        }
    }

    fn of(&self, state: u32) -> &[u32] {
        &self.sources
            [self.starts[state as usize] as usize..self.starts[state as usize + 1] as usize]
    }

    pub fn memory_bytes(&self) -> usize {
        (self.starts.capacity() + self.sources.capacity()) * 4
    }
}

/// States within `CYCLE_LEN` steps of `from` along `next` edges (at most `limit`).
fn within(
    from: u32,
    limit: usize,
    mut next: impl FnMut(u32, &mut Vec<u32>),
) -> Option<FxHashMap<u32, usize>> {
    let mut dist: FxHashMap<u32, usize> = FxHashMap::default();
    dist.insert(from, 0);
    let mut queue = VecDeque::from([from]);
    let mut buffer = Vec::new();
    while let Some(state) = queue.pop_front() {
        let d = dist[&state];
        if d == CYCLE_LEN {
            continue;
        }
        buffer.clear();
        next(state, &mut buffer);
        for &n in &buffer {
            if !dist.contains_key(&n) {
                if dist.len() >= limit {
                    return None;
                }
                dist.insert(n, d + 1);
                queue.push_back(n);
            }
        }
    }
    Some(dist)
}

/// K(s), or `None` when it would not pay off (no short cycle through s, or too large).
pub(crate) fn local_component(
    dfa: &ByteDfa,
    reverse: &ReverseEdges,
    state: u32,
) -> Option<Component> {
    let forward = within(state, 512, |s, out| out.extend(dfa.successors(s)))?;
    let backward = within(state, 512, |s, out| out.extend_from_slice(reverse.of(s)))?;
    // On a cycle through s of at most CYCLE_LEN bytes (s itself: distance 0 both ways).
    let members: Vec<u32> = forward
        .iter()
        .filter(|(s, d)| backward.get(s).is_some_and(|b| **d + b <= CYCLE_LEN))
        .map(|(s, _)| *s)
        .collect();
    if members.len() > MAX_COMPONENT {
        return None;
    }
    let in_k: FxHashMap<u32, ()> = members.iter().map(|&s| (s, ())).collect();
    let has_cycle = members.len() > 1 || dfa.successors(state).any(|n| n == state);
    if !has_cycle {
        return None;
    }
    // Canonical numbering: BFS from s over bytes 0..=255 within K.
    let mut index: FxHashMap<u32, u16> = FxHashMap::default();
    index.insert(state, 0);
    let mut states = vec![state];
    let mut signature = Vec::with_capacity(members.len() * 256);
    let mut head = 0;
    while head < states.len() {
        let source = states[head];
        head += 1;
        for byte in 0..=255u8 {
            let target = dfa.next(source, byte);
            let code = if target == DEAD {
                DEAD_CODE
            } else if in_k.contains_key(&target) {
                *index.entry(target).or_insert_with(|| {
                    states.push(target);
                    (states.len() - 1) as u16
                })
            } else {
                EXIT
            };
            signature.push(code);
        }
    }
    Some(Component { states, signature })
}

/// The shared part of the rows of every state with one signature.
#[derive(Debug)]
pub(crate) struct ComponentWalk {
    /// Tokens whose bytes stay inside K.
    pub mask: Box<[u32]>,
    pub num_allowed: usize,
    /// Trie nodes whose edge leaves K, with the canonical state before that edge.
    pub exits: Box<[(u32, u16)]>,
}

impl ComponentWalk {
    pub fn memory_bytes(&self) -> usize {
        self.mask.len() * 4 + self.exits.len() * 8
    }
}

/// Walks the trie through the signature alone (no DFA), once per signature and vocabulary.
pub(crate) fn walk_component(
    trie: &TokenTrie,
    signature: &[u16],
    num_mask_words: usize,
) -> ComponentWalk {
    let nodes = &trie.nodes;
    let mut mask = vec![0u32; num_mask_words];
    let mut exits = Vec::new();
    let mut stack = vec![0u16; trie.max_depth + 1];
    let mut num_allowed = 0;
    let end = nodes[0].subtree_end as usize;
    let mut index = 1;
    while index < end {
        let node = nodes[index];
        let depth = node.depth as usize;
        let from = stack[depth - 1];
        match signature[from as usize * 256 + node.byte as usize] {
            DEAD_CODE => index = node.subtree_end as usize,
            EXIT => {
                exits.push((index as u32, from));
                index = node.subtree_end as usize;
            }
            code => {
                stack[depth] = code;
                num_allowed += allow_tokens_at(trie, index, &mut mask);
                index += 1;
            }
        }
    }
    ComponentWalk {
        mask: mask.into_boxed_slice(),
        num_allowed,
        exits: exits.into_boxed_slice(),
    }
}

/// The row of the state that `component` was computed for: the shared mask plus the tokens
/// that leave K through an exit edge and stay live.
pub(crate) fn row_from_component(
    dfa: &ByteDfa,
    trie: &TokenTrie,
    component: &Component,
    walk: &ComponentWalk,
    mask: &mut [u32],
) -> usize {
    mask.copy_from_slice(&walk.mask);
    let mut num_allowed = walk.num_allowed;
    let mut stack = vec![DEAD; trie.max_depth + 1];
    for &(node, from) in walk.exits.iter() {
        let node = node as usize;
        let parent = component.states[from as usize];
        let target = dfa.next(parent, trie.nodes[node].byte);
        if target == DEAD {
            continue;
        }
        num_allowed += allow_tokens_at(trie, node, mask);
        num_allowed += walk_below(dfa, trie, node, target, mask, &mut stack, None);
    }
    num_allowed
}
