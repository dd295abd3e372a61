//! The live tokens of one state of any byte DFA, for automata that are not a [`TokenFsm`]
//! (the grammar path's lexemes): the same local-component sharing as a `TokenFsm` row, so a
//! string body met in a new schema costs short exit walks, not a whole-vocabulary walk.
//!
//! [`TokenFsm`]: crate::TokenFsm

use crate::component::{local_component, row_from_component, walk_component};
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
}
