//! One state's allowed tokens: a depth-first walk of the vocabulary trie driven by the DFA.
//!
//! Each trie node costs one table lookup; a node whose prefix is dead skips its whole subtree,
//! so sparse states (digits, keys, punctuation) touch only a few hundred nodes and dense ones
//! (free text inside a string) touch about every node once.

use crate::dfa::{ByteDfa, DEAD};
use sglr_vocab::TokenTrie;

/// Optional collection of the distinct states that allowed tokens lead to: the list, and one
/// scratch flag per DFA state (all false on entry and on return).
pub(crate) type Successors<'a> = Option<(&'a mut Vec<u32>, &'a mut [bool])>;

/// Sets the bit of every token whose bytes keep `state` live; returns how many were set.
pub(crate) fn walk_allowed(
    dfa: &ByteDfa,
    trie: &TokenTrie,
    state: u32,
    mask: &mut [u32],
    successors: Successors<'_>,
) -> usize {
    let mut stack = vec![DEAD; trie.max_depth + 1];
    walk_below(dfa, trie, 0, state, mask, &mut stack, successors)
}

/// Walks the descendants of trie node `root`, whose own path led the DFA to `root_state`
/// (tokens *at* `root` are the caller's business). `stack` holds at least `max_depth + 1`.
pub(crate) fn walk_below(
    dfa: &ByteDfa,
    trie: &TokenTrie,
    root: usize,
    root_state: u32,
    mask: &mut [u32],
    stack: &mut [u32],
    successors: Successors<'_>,
) -> usize {
    walk_below_visiting(dfa, trie, root, root_state, mask, stack, successors, |_, _| {})
}

/// [`walk_below`], calling `visit(node, state)` at every node whose prefix is live, with the
/// state it leads to.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn walk_below_visiting(
    dfa: &ByteDfa,
    trie: &TokenTrie,
    root: usize,
    root_state: u32,
    mask: &mut [u32],
    stack: &mut [u32],
    mut successors: Successors<'_>,
    mut visit: impl FnMut(usize, u32),
) -> usize {
    let nodes = &trie.nodes;
    let token_ids = &trie.token_ids;
    assert!(stack.len() > trie.max_depth && root_state != DEAD);
    assert!(trie.id_bound <= mask.len() * 32);
    stack[nodes[root].depth as usize] = root_state;
    let end = nodes[root].subtree_end as usize;
    let mut index = root + 1;
    let mut num_allowed = 0;
    while index < end {
        // SAFETY: `index < end <= nodes.len() - 1` (the sentinel closes every subtree), node
        // depths are 1..=max_depth (< stack.len(), checked above), `stack[depth - 1]` holds a
        // live state (only non-DEAD states are pushed, the root's was checked), token ranges
        // come from the trie builder and token ids index `mask` (checked above).
        unsafe {
            let node = *nodes.get_unchecked(index);
            let depth = node.depth as usize;
            let next = dfa.next_unchecked(*stack.get_unchecked(depth - 1), node.byte);
            if next == DEAD {
                index = node.subtree_end as usize;
                continue;
            }
            *stack.get_unchecked_mut(depth) = next;
            visit(index, next);
            let start = node.token_start as usize;
            let stop = nodes.get_unchecked(index + 1).token_start as usize;
            if start != stop {
                for &token in token_ids.get_unchecked(start..stop) {
                    *mask.get_unchecked_mut(token as usize >> 5) |= 1 << (token & 31);
                }
                num_allowed += stop - start;
                if let Some((list, seen)) = successors.as_mut() {
                    if !seen[next as usize] {
                        seen[next as usize] = true;
                        list.push(next);
                    }
                }
            }
        }
        index += 1;
    }
    if let Some((list, seen)) = successors {
        for &reached in list.iter() {
            seen[reached as usize] = false;
        }
    }
    num_allowed
}

/// Sets the bits of the tokens ending exactly at trie node `index`; returns how many.
pub(crate) fn allow_tokens_at(trie: &TokenTrie, index: usize, mask: &mut [u32]) -> usize {
    let start = trie.nodes[index].token_start as usize;
    let end = trie.nodes[index + 1].token_start as usize;
    for &token in &trie.token_ids[start..end] {
        mask[token as usize >> 5] |= 1 << (token & 31);
    }
    end - start
}
