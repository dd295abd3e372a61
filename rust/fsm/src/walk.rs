//! One state's allowed tokens: a depth-first walk of the vocabulary trie driven by the DFA.
//!
//! Each trie node costs one table lookup; a node whose prefix is dead skips its whole subtree,
//! so sparse states (digits, keys, punctuation) touch only a few hundred nodes and dense ones
//! (free text inside a string) touch about every node once.

use crate::dfa::{ByteDfa, DEAD};
use crate::vocab::trie::TokenTrie;

/// Sets the bit of every token whose bytes keep `state` live; returns how many were set.
/// With `successors`, also collects the distinct states those tokens lead to (`seen` is
/// scratch space of one flag per DFA state, all false on entry and on return).
pub(crate) fn walk_allowed(
    dfa: &ByteDfa,
    trie: &TokenTrie,
    state: u32,
    mask: &mut [u32],
    mut successors: Option<(&mut Vec<u32>, &mut [bool])>,
) -> usize {
    let nodes = &trie.nodes;
    let token_ids = &trie.token_ids;
    let mut stack = vec![DEAD; trie.max_depth + 1];
    stack[0] = state;
    let end = nodes[0].subtree_end as usize;
    let mut index = 1;
    let mut num_allowed = 0;
    while index < end {
        let node = nodes[index];
        let depth = node.depth as usize;
        let next = dfa.next(stack[depth - 1], node.byte);
        if next == DEAD {
            index = node.subtree_end as usize;
            continue;
        }
        stack[depth] = next;
        let tokens = &token_ids[node.token_start as usize..nodes[index + 1].token_start as usize];
        if !tokens.is_empty() {
            for &token in tokens {
                mask[token as usize >> 5] |= 1 << (token & 31);
            }
            num_allowed += tokens.len();
            if let Some((list, seen)) = successors.as_mut() {
                if !seen[next as usize] {
                    seen[next as usize] = true;
                    list.push(next);
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
