//! The live tokens of one state of any byte DFA, for automata that are not a [`TokenFsm`]
//! (the grammar path's lexemes): the same local-component sharing as a `TokenFsm` row, so a
//! string body met in a new schema costs short exit walks, not a whole-vocabulary walk.
//!
//! [`TokenFsm`]: crate::TokenFsm

use sglr_vocab::Vocabulary;

use crate::component::{local_component, shared_component_row};
use crate::delegate::{delegated_row, delegation, is_donor, Delegation};
use crate::dfa::{ByteDfa, DEAD};
use crate::walk::{walk_allowed, walk_below_visiting};

/// Sets in `mask` (exactly `vocab.num_mask_words()` words, all zero on entry) the bit of every
/// token whose bytes keep `state` live; returns how many were set. EOS is not included.
pub fn live_tokens(dfa: &ByteDfa, vocab: &Vocabulary, state: u32, mask: &mut [u32]) -> usize {
    assert_eq!(mask.len(), vocab.num_mask_words(), "mask length");
    match local_component(dfa, state) {
        Some(component) => shared_component_row(dfa, vocab, &component, mask),
        None => walk_allowed(dfa, vocab.trie(), state, mask, None),
    }
}

/// [`live_tokens`], and when no shared walk holds them (the trie is walked here) also the
/// lexeme's *ends* found on the way: live nodes where the DFA accepts (`accept_distances` 0)
/// and the trie goes on below, ascending. `None` when the tokens came from a shared walk:
/// the caller finds the ends itself.
pub fn live_tokens_and_ends(
    dfa: &ByteDfa,
    vocab: &Vocabulary,
    state: u32,
    accept_distances: &[u16],
    mask: &mut [u32],
) -> Option<Vec<u32>> {
    assert_eq!(mask.len(), vocab.num_mask_words(), "mask length");
    if let Some(component) = local_component(dfa, state) {
        shared_component_row(dfa, vocab, &component, mask);
        return None;
    }
    let trie = vocab.trie();
    let mut ends = Vec::new();
    let mut stack = vec![DEAD; trie.max_depth + 1];
    walk_below_visiting(dfa, trie, 0, state, mask, &mut stack, None, |index, next| {
        if accept_distances[next as usize] == 0 && trie.nodes[index].subtree_end as usize > index + 1 {
            ends.push(index as u32);
        }
    });
    Some(ends)
}

/// The loop state whose live tokens give most of `state`'s (a key-name prefix inside a
/// free-text key, the first character of a `[a-z]+` run: see `delegate.rs`), with the first
/// bytes it covers, if any; the caller passes that state's tokens (computed and kept once) to
/// [`live_tokens_from_donor`] instead of calling [`live_tokens`], which would walk the whole
/// vocabulary for such a state. A donor never has a donor itself.
pub fn live_tokens_donor(dfa: &ByteDfa, state: u32) -> Option<Delegation> {
    if is_donor(dfa, state) {
        return None;
    }
    delegation(dfa, state)
}

/// [`live_tokens`] of `state` from `donor_words`, the live tokens of `delegation.donor` (its
/// [`live_tokens_donor`]): the donor's bits of tokens whose first byte is delegated, plus walks
/// under every other first byte. Overwrites `mask`.
pub fn live_tokens_from_donor(
    dfa: &ByteDfa,
    vocab: &Vocabulary,
    state: u32,
    delegation: &Delegation,
    donor_words: &[u32],
    mask: &mut [u32],
) -> usize {
    assert_eq!(mask.len(), vocab.num_mask_words(), "mask length");
    delegated_row(dfa, vocab, state, delegation, donor_words, mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::CompileLimits;

    fn vocabulary() -> Vocabulary {
        let texts = ["\"", "a", "ab", "b\"", "\",", "\\", "\\n", "\"}", " ", "x\"y", "é", "\\u00e9"];
        let mut tokens: Vec<Option<Vec<u8>>> = texts.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
        tokens.push(None);
        Vocabulary::new(tokens, vec![texts.len() as u32]).unwrap()
    }

    #[test]
    fn agrees_with_a_plain_walk_in_every_state() {
        let vocab = vocabulary();
        let pattern = r#"\{"a":"([^"\\]|\\.)*","b":"([^"\\]|\\u[0-9a-f]{4})*"\}"#;
        let dfa = ByteDfa::build(pattern, &CompileLimits::default()).unwrap();
        for state in 0..dfa.num_states() as u32 {
            let mut shared = vec![0u32; vocab.num_mask_words()];
            let mut plain = vec![0u32; vocab.num_mask_words()];
            let counted = live_tokens(&dfa, &vocab, state, &mut shared);
            walk_allowed(&dfa, vocab.trie(), state, &mut plain, None);
            assert_eq!(shared, plain, "state {state}");
            assert_eq!(counted, plain.iter().map(|w| w.count_ones() as usize).sum::<usize>());
        }
        assert!(vocab.num_shared_walks() > 0, "string bodies went through components");
    }

    #[test]
    fn a_donor_gives_the_same_tokens_as_a_plain_walk() {
        let texts = ["\"", "a", "ab", "b\"", "abc", "x", "\",", "b", "ba\"", " "];
        let mut tokens: Vec<Option<Vec<u8>>> = texts.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
        tokens.push(None);
        let vocab = Vocabulary::new(tokens, vec![texts.len() as u32]).unwrap();
        let dfa = ByteDfa::build(r#""[^"]+""#, &CompileLimits::default()).unwrap();
        let mut delegating = 0;
        for state in 0..dfa.num_states() as u32 {
            let mut plain = vec![0u32; vocab.num_mask_words()];
            walk_allowed(&dfa, vocab.trie(), state, &mut plain, None);
            let Some(found) = live_tokens_donor(&dfa, state) else { continue };
            let donor = found.donor;
            assert!(live_tokens_donor(&dfa, donor).is_none(), "a donor has no donor");
            delegating += 1;
            let mut donor_words = vec![0u32; vocab.num_mask_words()];
            live_tokens(&dfa, &vocab, donor, &mut donor_words);
            let mut mask = vec![u32::MAX; vocab.num_mask_words()];
            live_tokens_from_donor(&dfa, &vocab, state, &found, &donor_words, &mut mask);
            assert_eq!(mask, plain, "state {state}");
        }
        assert!(delegating > 0, "the first body character delegates");
    }

    /// Every trie node (by its path's bytes) where the DFA run from `state` accepts and some
    /// token goes on: the definition of a lexeme's ends, checked node by node.
    fn ends_by_definition(dfa: &ByteDfa, vocab: &Vocabulary, state: u32) -> Vec<u32> {
        let trie = vocab.trie();
        let mut paths: Vec<Vec<u8>> = vec![Vec::new(); trie.nodes.len()];
        let mut ends = Vec::new();
        for index in 1..trie.nodes.len() - 1 {
            let node = trie.nodes[index];
            // The parent is the nearest earlier node one level up.
            let parent = (0..index).rev().find(|&i| trie.nodes[i].depth + 1 == node.depth).unwrap();
            let mut path = paths[parent].clone();
            path.push(node.byte);
            let reached = dfa.walk(state, &path);
            let has_children = node.subtree_end as usize > index + 1;
            if reached != DEAD && dfa.is_accepting(reached) && has_children {
                ends.push(index as u32);
            }
            paths[index] = path;
        }
        ends
    }

    #[test]
    fn ends_found_by_the_walk_are_the_accepting_nodes_with_children() {
        let texts =
            ["1", "12", "1,", "1}", "12,", "\"", "\",", "a", "ab", "a\"", "a\"}", " ", "x", "9", "b\"", "zz"];
        let mut tokens: Vec<Option<Vec<u8>>> = texts.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
        tokens.push(None);
        let vocab = Vocabulary::new(tokens, vec![texts.len() as u32]).unwrap();
        let mut walked = 0;
        for pattern in ["[0-9]+", r#""[a-z]*""#, "(1|12|a)"] {
            let dfa = ByteDfa::build(pattern, &CompileLimits::default()).unwrap();
            let distances = dfa.accept_distances();
            for state in 0..dfa.num_states() as u32 {
                let mut mask = vec![0u32; vocab.num_mask_words()];
                let mut plain = vec![0u32; vocab.num_mask_words()];
                let ends = live_tokens_and_ends(&dfa, &vocab, state, &distances, &mut mask);
                walk_allowed(&dfa, vocab.trie(), state, &mut plain, None);
                assert_eq!(mask, plain, "{pattern} state {state}");
                if let Some(ends) = ends {
                    walked += 1;
                    assert_eq!(ends, ends_by_definition(&dfa, &vocab, state), "{pattern} state {state}");
                }
            }
        }
        assert!(walked > 0);
    }
}
