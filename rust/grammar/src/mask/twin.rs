//! A free key's state beside its *twin* (the same key text outside the declared names): the
//! two allow the same tokens but along a declared name's spelling, so a state's mask is its
//! twin's with a few changes, found by one walk in lockstep, and its suffix groups are the
//! twin's.

use std::sync::{Arc, OnceLock};

use sglr_fsm::{ByteDfa, Delegation, DEAD};
use sglr_vocab::TokenTrie;

use super::lexeme_mask::{LexemeMask, SuffixGroup, Tokens, SPARSE_WORDS_PER_TOKEN};
use super::nodes::{children_on, MAX_BYTES_APART};
use crate::suffix_trie::{Member, MIN_GROUPED};

/// The suffix groups of a free key's state inside the declared names, from its twin's
/// (`twin_groups`): a state and its twin step alike or into twins (never accepting inside the
/// names) and accept alike, so a boundary of the state's (`boundaries`, ascending: its twin's
/// but for paths spelling a whole name) ends in the twin's end state, with the same earlier
/// ends. A twin's group the state holds whole is shared as it is (into `groups`); the members
/// it holds of the others are returned, to be grouped as found (a state that spells none of
/// the names whole at the ends of its boundaries holds every group whole: no path is walked).
pub(super) fn groups_beside_twin(
    trie: &TokenTrie,
    twin_groups: &[SuffixGroup],
    boundaries: &[u32],
    groups: &mut Vec<SuffixGroup>,
) -> Vec<Vec<Member>> {
    let mut partial = Vec::new();
    for group in twin_groups {
        // NOTE: a group without a trie is too large to walk as one, and so is any part of it
        // worth grouping: its members are walked one by one, as the twin's are.
        let Some(suffix) = group.trie.as_ref() else { continue };
        let kept: Vec<usize> = (0..suffix.grouped.len())
            .filter(|&i| boundaries.binary_search(&suffix.grouped[i]).is_ok())
            .collect();
        if kept.len() == suffix.grouped.len() {
            groups.push(SuffixGroup { trie: group.trie.clone(), ends_before: group.ends_before.clone() });
        } else if kept.len() >= MIN_GROUPED {
            partial.push(
                kept.into_iter()
                    .map(|i| Member {
                        boundary: suffix.grouped[i],
                        path: trie.path_bytes(suffix.grouped[i] as usize),
                        ends_before: group.ends_before[i].clone(),
                    })
                    .collect(),
            );
        }
    }
    partial
}

/// The [`LexemeMask`] of `state` from its twin's (`twin_mask`, of state `twin`), by one walk
/// in lockstep from both states that enters only where the two part (a declared name's
/// spelling: `ByteDfa::bytes_apart` names the few children to look up, none of the others):
/// below every other node the twin's tokens and boundaries are the state's. A [`Tokens::Delta`]
/// over a twin kept as words, a list beside a twin kept as a list (a key's opening quote);
/// `None` when the twin is itself a delta or the two differ on too many tokens for a delta.
pub(super) fn mask_beside_twin(
    dfa: &ByteDfa,
    trie: &TokenTrie,
    num_words: usize,
    state: u32,
    twin: u32,
    twin_mask: &Arc<LexemeMask>,
) -> Option<LexemeMask> {
    if let Tokens::Delta { .. } = twin_mask.tokens {
        return None;
    }
    let mut walk = TwinWalk {
        dfa,
        trie,
        twin_tokens: &twin_mask.tokens,
        twin_boundaries: &twin_mask.boundaries,
        removed: Vec::new(),
        added: Vec::new(),
        boundaries: Vec::new(),
    };
    walk.below(0, state, twin);
    let TwinWalk { mut removed, mut added, boundaries, .. } = walk;
    if removed.len() + added.len() > num_words / SPARSE_WORDS_PER_TOKEN {
        return None;
    }
    removed.sort_unstable();
    removed.dedup();
    added.sort_unstable();
    added.dedup();
    let tokens = match &twin_mask.tokens {
        Tokens::Ids(ids) => {
            let mut own: Vec<u32> =
                ids.iter().copied().filter(|t| removed.binary_search(t).is_err()).collect();
            own.extend_from_slice(&added);
            own.sort_unstable();
            own.dedup();
            Tokens::Ids(own)
        }
        _ => Tokens::Delta { base: twin_mask.clone(), removed, added },
    };
    Some(LexemeMask { tokens, boundaries, suffix: OnceLock::new() })
}

/// [`mask_beside_twin`]'s walk: what differs from the twin's tokens, and the boundaries.
struct TwinWalk<'a> {
    dfa: &'a ByteDfa,
    trie: &'a TokenTrie,
    twin_tokens: &'a Tokens,
    twin_boundaries: &'a [u32],
    removed: Vec<u32>,
    added: Vec<u32>,
    boundaries: Vec<u32>,
}

impl TwinWalk<'_> {
    /// Below trie node `index`, reached in (live) state `own` here and `other` from the twin
    /// ([`DEAD`] when the twin's run died), the two runs apart.
    fn below(&mut self, index: usize, own: u32, other: u32) {
        let trie = self.trie;
        let end = trie.nodes[index].subtree_end as usize;
        // `cursor`: where the twin's boundaries are still to be taken from (ascending nodes).
        let mut cursor = index + 1;
        for child in children_on(trie, index, self.dfa.bytes_apart(own, other, MAX_BYTES_APART)) {
            self.take_twin_boundaries(cursor, child);
            let node = trie.nodes[child];
            let child_end = node.subtree_end as usize;
            cursor = child_end;
            let next = self.dfa.next(own, node.byte);
            let other_next = if other == DEAD { DEAD } else { self.dfa.next(other, node.byte) };
            if next == other_next {
                self.take_twin_boundaries(child, child_end);
                continue;
            }
            if next == DEAD {
                // The twin's tokens below here are not this state's.
                let stop = trie.nodes[child_end].token_start as usize;
                for &token in &trie.token_ids[node.token_start as usize..stop] {
                    if self.twin_has(token) {
                        self.removed.push(token);
                    }
                }
                continue;
            }
            if other_next == DEAD {
                let stop = trie.nodes[child + 1].token_start as usize;
                self.added.extend_from_slice(&trie.token_ids[node.token_start as usize..stop]);
            }
            if child_end > child + 1 {
                if self.dfa.is_accepting(next) {
                    self.boundaries.push(child as u32);
                }
                self.below(child, next, other_next);
            }
        }
        self.take_twin_boundaries(cursor, end);
    }

    /// Whether the twin allows `token` (its tokens are words or a list).
    fn twin_has(&self, token: u32) -> bool {
        match self.twin_tokens {
            Tokens::Words(words) => words[token as usize >> 5] >> (token & 31) & 1 == 1,
            Tokens::Ids(ids) => ids.binary_search(&token).is_ok(),
            Tokens::Delta { .. } => unreachable!("no walk beside a delta"),
        }
    }

    /// The twin's boundaries among nodes `begin..end`.
    fn take_twin_boundaries(&mut self, begin: usize, end: usize) {
        let first = self.twin_boundaries.partition_point(|&b| (b as usize) < begin);
        let last = self.twin_boundaries.partition_point(|&b| (b as usize) < end);
        self.boundaries.extend_from_slice(&self.twin_boundaries[first..last]);
    }
}

/// `twin` as `state`'s donor, with the first bytes on which the two reach the same state.
pub(super) fn twin_delegation(dfa: &ByteDfa, state: u32, twin: u32) -> Delegation {
    let mut bytes = [0u64; 4];
    for byte in 0..=255u8 {
        if dfa.next(state, byte) == dfa.next(twin, byte) {
            bytes[byte as usize >> 6] |= 1 << (byte & 63);
        }
    }
    Delegation { donor: twin, bytes }
}
