//! Allowed tokens of a parse state: a depth-first walk of the vocabulary's byte trie, one
//! Earley step per trie node, skipping a whole subtree as soon as its prefix is dead.

use std::sync::Arc;

use sglr_fsm::Vocabulary;

use crate::earley::{scan, Chart, Item};
use crate::error::GrammarError;
use crate::matcher::{GrammarMatcher, ParseState};

/// The committed chart followed by the walk's sets for depths `1..=depth`.
struct Layered<'a> {
    base: &'a [Arc<[Item]>],
    /// `extra[d]` is the set after the first d bytes of the current trie path (`extra[0]` unused).
    extra: &'a [Vec<Item>],
}

impl Chart for Layered<'_> {
    fn num_sets(&self) -> usize {
        self.base.len() + self.extra.len().saturating_sub(1)
    }
    fn set(&self, index: usize) -> &[Item] {
        if index < self.base.len() {
            &self.base[index]
        } else {
            &self.extra[index - self.base.len() + 1]
        }
    }
}

impl GrammarMatcher {
    /// Sets (ORs) the bit of every allowed token in `mask` (`u32` words, bit t of word t / 32);
    /// EOS is allowed exactly when `state` is accepting. Returns how many tokens were allowed.
    pub fn fill_mask(
        &self,
        state: &ParseState,
        vocabulary: &Vocabulary,
        mask: &mut [u32],
    ) -> Result<usize, GrammarError> {
        let needed = vocabulary.num_mask_words();
        if mask.len() < needed {
            return Err(GrammarError::BitmaskTooSmall { needed, got: mask.len() });
        }
        let mut allowed = 0;
        if self.is_accepting(state) || state.finished {
            for &eos in vocabulary.eos_token_ids() {
                mask[eos as usize >> 5] |= 1 << (eos & 31);
                allowed += 1;
            }
        }
        if state.finished {
            return Ok(allowed);
        }
        let trie = vocabulary.trie();
        let mut extra: Vec<Vec<Item>> = vec![Vec::new(); trie.max_depth + 1];
        let end = trie.nodes[0].subtree_end as usize;
        let mut index = 1;
        while index < end {
            let node = trie.nodes[index];
            let depth = node.depth as usize;
            let (parents, rest) = extra.split_at_mut(depth);
            let chart = Layered { base: &state.sets, extra: parents };
            let next = scan(&self.grammar, &self.lexemes, self.limits, &chart, node.byte)?;
            if next.is_empty() {
                index = node.subtree_end as usize;
                continue;
            }
            rest[0] = next;
            let start = node.token_start as usize;
            let stop = trie.nodes[index + 1].token_start as usize;
            for &token in &trie.token_ids[start..stop] {
                mask[token as usize >> 5] |= 1 << (token & 31);
            }
            allowed += stop - start;
            index += 1;
        }
        Ok(allowed)
    }

    /// Allowed token ids of `state`, ascending.
    pub fn allowed_tokens(
        &self,
        state: &ParseState,
        vocabulary: &Vocabulary,
    ) -> Result<Vec<u32>, GrammarError> {
        let mut mask = vec![0u32; vocabulary.num_mask_words()];
        self.fill_mask(state, vocabulary, &mut mask)?;
        Ok((0..vocabulary.vocab_size() as u32)
            .filter(|&t| mask[t as usize >> 5] >> (t & 31) & 1 == 1)
            .collect())
    }
}
