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
use std::sync::Arc;

use rustc_hash::FxHashMap;
use sglr_vocab::{TokenTrie, Vocabulary};

use crate::dfa::{ByteDfa, DEAD};
use crate::walk::{allow_tokens_at, walk_below};

/// Longest cycle through s (in bytes) that puts a state into K(s): a `\uXXXX` escape is 6.
const CYCLE_LEN: usize = 6;
/// Largest component worth describing; bigger neighbourhoods fall back to the plain walk.
const MAX_COMPONENT: usize = 1024;
/// Largest neighbourhood explored to find K(s).
const MAX_NEIGHBOURHOOD: usize = 256;
/// Exit subtrees up to this many trie nodes are merged into per-edge suffix tries.
const MAX_GROUPED_SUBTREE: usize = 256;

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

/// K(s), or `None` when it would not pay off (no short cycle through s, or too large).
pub(crate) fn local_component(dfa: &ByteDfa, state: u32) -> Option<Component> {
    // Forward: every state within CYCLE_LEN bytes, with the edges leaving them. A cycle
    // through s of at most CYCLE_LEN bytes lies entirely inside this set, so the backward
    // distances can be computed on it alone.
    let mut forward: FxHashMap<u32, usize> = FxHashMap::default();
    forward.insert(state, 0);
    let mut order = vec![state];
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut head = 0;
    while head < order.len() {
        let source = order[head];
        head += 1;
        let depth = forward[&source];
        let mut targets: Vec<u32> = dfa.successors(source).collect();
        targets.sort_unstable();
        targets.dedup();
        for target in targets {
            edges.push((target, source));
            if depth < CYCLE_LEN && !forward.contains_key(&target) {
                if order.len() >= MAX_NEIGHBOURHOOD {
                    return None;
                }
                forward.insert(target, depth + 1);
                order.push(target);
            }
        }
    }
    edges.sort_unstable();
    let mut backward: FxHashMap<u32, usize> = FxHashMap::default();
    backward.insert(state, 0);
    let mut queue = VecDeque::from([state]);
    while let Some(target) = queue.pop_front() {
        let depth = backward[&target];
        if depth == CYCLE_LEN {
            continue;
        }
        let from = edges.partition_point(|&(t, _)| t < target);
        for &(_, source) in edges[from..].iter().take_while(|&&(t, _)| t == target) {
            if let std::collections::hash_map::Entry::Vacant(slot) = backward.entry(source) {
                slot.insert(depth + 1);
                queue.push_back(source);
            }
        }
    }
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

/// The live tokens of a state in `component` (set in `mask`, all zero on entry; returns how
/// many), from the vocabulary's shared walk of the component's signature (walked here on first
/// use).
pub(crate) fn shared_component_row(
    dfa: &ByteDfa,
    vocab: &Vocabulary,
    component: &Component,
    mask: &mut [u32],
) -> usize {
    let walk = shared_walk(vocab, &component.signature);
    row_from_component(dfa, vocab.trie(), component, &walk, mask)
}

/// The vocabulary's walk of a component signature, shared by every automaton over it.
fn shared_walk(vocab: &Vocabulary, signature: &[u16]) -> Arc<ComponentWalk> {
    // SAFETY: a `u16` slice read as its bytes (any alignment and bit pattern is valid for u8).
    let key = unsafe { std::slice::from_raw_parts(signature.as_ptr().cast::<u8>(), signature.len() * 2) };
    vocab.shared_walk(key, ComponentWalk::memory_bytes, || {
        walk_component(vocab.trie(), signature, vocab.num_mask_words())
    })
}

/// Tokens that leave K by one (canonical state, byte) edge, keyed by what follows that byte.
#[derive(Debug)]
pub(crate) struct ExitGroup {
    /// Canonical state the edge leaves from.
    pub from: u16,
    pub byte: u8,
    /// The rest of each such token after `byte`, as a trie (tokens ending right at `byte`
    /// are in the shared mask: the exit target is live for every state of the signature).
    pub suffixes: TokenTrie,
}

/// The shared part of the rows of every state with one signature.
#[derive(Debug)]
pub(crate) struct ComponentWalk {
    /// Tokens whose bytes stay inside K, or leave it exactly at their last byte.
    pub mask: Box<[u32]>,
    pub num_allowed: usize,
    pub groups: Box<[ExitGroup]>,
    /// Exit edges into big subtrees (say a space at the root), walked per state: their
    /// tokens mostly die within a byte or two, so merging them would cost more than it saves.
    pub raw_exits: Box<[(u32, u16)]>,
}

impl ComponentWalk {
    pub fn memory_bytes(&self) -> usize {
        self.mask.len() * 4
            + self.groups.iter().map(|g| g.suffixes.memory_bytes() + 8).sum::<usize>()
            + self.raw_exits.len() * 8
    }
}

/// Walks the trie through the signature alone (no DFA), once per signature and vocabulary.
pub(crate) fn walk_component(trie: &TokenTrie, signature: &[u16], num_mask_words: usize) -> ComponentWalk {
    let nodes = &trie.nodes;
    let mut mask = vec![0u32; num_mask_words];
    let mut stack = vec![0u16; trie.max_depth + 1];
    let mut num_allowed = 0;
    let mut groups: FxHashMap<(u16, u8), Vec<TokenSuffix>> = FxHashMap::default();
    let mut raw_exits = Vec::new();
    let end = nodes[0].subtree_end as usize;
    let num_codes = signature.len();
    assert!(trie.id_bound <= mask.len() * 32);
    let mut index = 1;
    while index < end {
        // SAFETY: `index < end < nodes.len()` (sentinel), depths are 1..=max_depth < stack
        // length, every code pushed on the stack is a canonical index (< num_codes / 256),
        // token ids are below `id_bound` (checked above).
        let (node, from, code) = unsafe {
            let node = *nodes.get_unchecked(index);
            let from = *stack.get_unchecked(node.depth as usize - 1);
            let at = from as usize * 256 + node.byte as usize;
            debug_assert!(at < num_codes);
            (node, from, *signature.get_unchecked(at))
        };
        let depth = node.depth as usize;
        match code {
            DEAD_CODE => index = node.subtree_end as usize,
            EXIT => {
                num_allowed += allow_tokens_at(trie, index, &mut mask);
                if node.subtree_end as usize - index <= MAX_GROUPED_SUBTREE {
                    collect_suffixes(trie, index, groups.entry((from, node.byte)).or_default());
                } else {
                    raw_exits.push((index as u32, from));
                }
                index = node.subtree_end as usize;
            }
            code => {
                // SAFETY: as above.
                unsafe {
                    *stack.get_unchecked_mut(depth) = code;
                    let start = node.token_start as usize;
                    let stop = nodes.get_unchecked(index + 1).token_start as usize;
                    for &token in trie.token_ids.get_unchecked(start..stop) {
                        *mask.get_unchecked_mut(token as usize >> 5) |= 1 << (token & 31);
                    }
                    num_allowed += stop - start;
                }
                index += 1;
            }
        }
    }
    let mut groups: Vec<ExitGroup> = groups
        .into_iter()
        .map(|((from, byte), suffixes)| ExitGroup {
            from,
            byte,
            suffixes: TokenTrie::build(suffixes.iter().map(|(id, bytes)| (*id, bytes.as_slice()))),
        })
        .collect();
    groups.sort_by_key(|g| (g.from, g.byte));
    ComponentWalk {
        mask: mask.into_boxed_slice(),
        num_allowed,
        groups: groups.into_boxed_slice(),
        raw_exits: raw_exits.into_boxed_slice(),
    }
}

/// A token id and its bytes after an exit edge.
type TokenSuffix = (u32, Vec<u8>);

/// Every token strictly below trie node `root`, with its bytes after `root`.
fn collect_suffixes(trie: &TokenTrie, root: usize, out: &mut Vec<TokenSuffix>) {
    let nodes = &trie.nodes;
    let base = nodes[root].depth as usize;
    let mut path: Vec<u8> = Vec::new();
    for index in root + 1..nodes[root].subtree_end as usize {
        let node = nodes[index];
        path.truncate(node.depth as usize - base - 1);
        path.push(node.byte);
        let start = node.token_start as usize;
        let end = nodes[index + 1].token_start as usize;
        for &token in &trie.token_ids[start..end] {
            out.push((token, path.clone()));
        }
    }
}

/// The row of the state that `component` was computed for: the shared mask plus, per exit
/// edge, the suffixes that stay live from the actual exit target.
pub(crate) fn row_from_component(
    dfa: &ByteDfa,
    trie: &TokenTrie,
    component: &Component,
    walk: &ComponentWalk,
    mask: &mut [u32],
) -> usize {
    mask.copy_from_slice(&walk.mask);
    let mut num_allowed = walk.num_allowed;
    let mut stack = Vec::new();
    for group in walk.groups.iter() {
        let target = dfa.next(component.states[group.from as usize], group.byte);
        debug_assert_ne!(target, DEAD, "an exit edge of the signature is live");
        if target == DEAD || group.suffixes.token_ids.is_empty() {
            continue;
        }
        stack.resize(stack.len().max(group.suffixes.max_depth + 1), DEAD);
        num_allowed += walk_below(dfa, &group.suffixes, 0, target, mask, &mut stack, None);
    }
    stack.resize(stack.len().max(trie.max_depth + 1), DEAD);
    for &(node, from) in walk.raw_exits.iter() {
        let node = node as usize;
        let target = dfa.next(component.states[from as usize], trie.nodes[node].byte);
        debug_assert_ne!(target, DEAD, "an exit edge of the signature is live");
        if target != DEAD {
            num_allowed += walk_below(dfa, trie, node, target, mask, &mut stack, None);
        }
    }
    num_allowed
}
