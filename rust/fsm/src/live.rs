//! The live tokens of one state of any byte DFA, for automata that are not a [`TokenFsm`]
//! (the grammar path's lexemes): the same local-component sharing as a `TokenFsm` row, so a
//! string body met in a new schema costs short exit walks, not a whole-vocabulary walk.
//!
//! [`TokenFsm`]: crate::TokenFsm

use crate::component::{local_component, row_from_component, walk_component};
use crate::delegate::{delegated_row, delegation, is_donor, Delegation};
use crate::dfa::ByteDfa;
use crate::vocab::Vocabulary;
use crate::walk::walk_allowed;

/// Sets in `mask` (exactly `vocab.num_mask_words()` words, all zero on entry) the bit of every
/// token whose bytes keep `state` live; returns how many were set. EOS is not included.
pub fn live_tokens(dfa: &ByteDfa, vocab: &Vocabulary, state: u32, mask: &mut [u32]) -> usize {
    assert_eq!(mask.len(), vocab.num_mask_words(), "mask length");
    let Some(component) = local_component(dfa, state) else {
        return walk_allowed(dfa, &vocab.trie, state, mask, None);
    };
    let num_words = vocab.num_mask_words();
    let walk = vocab.component_walk(&component.signature, || {
        walk_component(&vocab.trie, &component.signature, num_words)
    });
    row_from_component(dfa, &vocab.trie, &component, &walk, mask)
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
            walk_allowed(&dfa, &vocab.trie, state, &mut plain, None);
            assert_eq!(shared, plain, "state {state}");
            assert_eq!(counted, plain.iter().map(|w| w.count_ones() as usize).sum::<usize>());
        }
        assert!(vocab.num_cached_components() > 0, "string bodies went through components");
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
            walk_allowed(&dfa, &vocab.trie, state, &mut plain, None);
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
}
