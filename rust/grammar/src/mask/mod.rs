//! Allowed tokens of a parse state.
//!
//! A token is allowed when some in-lexeme item of the last Earley set can take its bytes. Two
//! kinds of tokens: those whose bytes all stay inside one item's lexeme (its DFA stays live),
//! and those that finish a lexeme part-way and go on in the grammar. The first kind depends
//! only on (lexeme, DFA state), so its token set is computed once with that DFA alone
//! (rust/fsm's `live_tokens`: a string body's walk is shared through the vocabulary's
//! local-component cache, so a new field costs short exit walks) and memoised in the matcher
//! ([`LexemeMask`], shared by every request and step). The second kind starts below *boundary*
//! trie nodes (where the DFA accepts and the token goes on), found by a walk that skips every
//! subtree too shallow to reach the lexeme's end; only those subtrees are walked with Earley
//! steps, one per trie node, skipping dead subtrees. Every Earley item is a viable prefix of
//! the grammar (rules that derive nothing are dropped when it is built), so a live DFA state
//! inside an item's lexeme always has a completion: the memoised part admits no dead end.
//!
//! Here: the mask of a parse state (`fill_mask`) and the boundaries where a token can leave its
//! lexeme. Beside it: `lexeme_mask.rs` (the memoised in-lexeme masks), `lexeme_walks.rs` (how
//! one is computed and shared), `twin.rs` (a free key's state beside its twin),
//! `boundary_walk.rs` (the parser's walk below the boundaries), `seed_closures.rs` (the sets it
//! closes where a lexeme ends) and `nodes.rs` (steps over trie nodes).

mod boundary_walk;
mod lexeme_mask;
mod lexeme_walks;
mod nodes;
mod seed_closures;
mod twin;

use std::sync::Arc;

use sglr_fsm::{ByteDfa, DEAD};
use sglr_vocab::{TokenTrie, Vocabulary};

use lexeme_mask::LexemeMask;
pub(crate) use lexeme_mask::LexemeMaskCache;
use seed_closures::{Kept, Layered, SeedClosures};

use crate::earley::{ScanScratch, NO_LEX};
use crate::error::GrammarError;
use crate::grammar::{LexemeId, Symbol};
use crate::matcher::{GrammarMatcher, ParseState};
use crate::suffix_trie::SuffixTrie;
use crate::walk_memo::context_key;

impl GrammarMatcher {
    /// Sets (ORs) the bit of every allowed token in `mask` (`u32` words, bit t of word t / 32);
    /// EOS is allowed exactly when `state` is accepting.
    pub fn fill_mask(
        &self,
        state: &ParseState,
        vocabulary: &Vocabulary,
        mask: &mut [u32],
    ) -> Result<(), GrammarError> {
        let needed = vocabulary.num_mask_words();
        if mask.len() < needed {
            return Err(GrammarError::BitmaskTooSmall { needed, got: mask.len() });
        }
        // NOTE: written in place (every step only sets bits): a buffer of its own cost a
        // mask-sized allocation, copy and count per call, a third of a typical mask's time.
        let allowed = &mut mask[..needed];
        if self.is_accepting(state) || state.finished {
            for &eos in vocabulary.eos_token_ids() {
                allowed[eos as usize >> 5] |= 1 << (eos & 31);
            }
        }
        if !state.finished {
            let mut keys: Vec<(LexemeId, u32)> = Vec::new();
            for item in state.last().iter().filter(|item| item.lex != NO_LEX) {
                if let Symbol::Lexeme(lexeme) = self.grammar.rules[item.rule as usize].rhs[item.dot as usize]
                {
                    keys.push((lexeme, item.lex));
                }
            }
            keys.sort_unstable();
            keys.dedup();
            let mut boundaries = Vec::new();
            let mut insides = Vec::with_capacity(keys.len());
            for &(lexeme, lex) in &keys {
                let inside = self.lexeme_mask(vocabulary, lexeme, lex)?;
                inside.add_to(allowed);
                boundaries.extend_from_slice(&inside.boundaries);
                insides.push(inside);
            }
            boundaries.sort_unstable();
            boundaries.dedup();
            if !boundaries.is_empty() {
                let key = context_key(&state.sets, vocabulary.fingerprint());
                match key.as_deref().and_then(|key| self.boundary_walks.get(key)) {
                    Some(token_ids) => {
                        for &token in token_ids.iter() {
                            allowed[token as usize >> 5] |= 1 << (token & 31);
                        }
                    }
                    None => {
                        // NOTE: the walk lists its tokens only where the memo can keep them.
                        let mut token_ids = key.as_ref().map(|_| Vec::new());
                        let mut closures = SeedClosures::default();
                        boundaries =
                            self.exit_boundaries(state, vocabulary.trie(), &keys, &insides, &mut closures)?;
                        for (index, &(lexeme, lex)) in keys.iter().enumerate() {
                            for group in self.suffix_groups(vocabulary, lexeme, lex, &insides[index])? {
                                let Some(suffix) = group.trie.as_ref() else { continue };
                                if !self.others_stay_out(
                                    vocabulary,
                                    &keys,
                                    index,
                                    suffix,
                                    &group.ends_before,
                                )? {
                                    continue;
                                }
                                boundaries.retain(|b| suffix.grouped.binary_search(b).is_err());
                                self.walk_boundaries(
                                    state,
                                    &suffix.trie,
                                    &[suffix.boundary],
                                    &mut closures,
                                    allowed,
                                    token_ids.as_mut(),
                                )?;
                            }
                        }
                        if !boundaries.is_empty() {
                            self.walk_boundaries(
                                state,
                                vocabulary.trie(),
                                &boundaries,
                                &mut closures,
                                allowed,
                                token_ids.as_mut(),
                            )?;
                        }
                        if let (Some(key), Some(token_ids)) = (key, token_ids) {
                            self.boundary_walks.insert(key, token_ids);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether at each boundary of `suffix` (of the `index`-th lexeme state of `keys`) the
    /// parser holds that state's completion alone: every other state of `keys` is dead on the
    /// boundary's path without ending on it (nor at the token's start), and where the path
    /// could end the lexeme earlier (`ends_before`), every state at its lexeme's start (which
    /// holds whatever follows the lexeme: it could end at the token's start then, so its
    /// successors are in the committed chart) is dead on the rest of the path without ending.
    fn others_stay_out(
        &self,
        vocabulary: &Vocabulary,
        keys: &[(LexemeId, u32)],
        index: usize,
        suffix: &SuffixTrie,
        ends_before: &[Vec<u16>],
    ) -> Result<bool, GrammarError> {
        let reach = vocabulary.trie().max_depth;
        for (other, &(lexeme, lex)) in keys.iter().enumerate() {
            if other == index {
                continue;
            }
            let view = self.lexemes.mask_view(&self.grammar, lexeme, lex, reach)?;
            let dfa = view.dfa();
            if dfa.is_accepting(view.state) {
                return Ok(false);
            }
            let at_start = lex == self.lexemes.get(&self.grammar, lexeme)?.start();
            for (path, ends) in suffix.paths.iter().zip(ends_before) {
                if !dies_without_ending(dfa, view.state, path) {
                    return Ok(false);
                }
                if at_start
                    && ends.iter().any(|&end| !dies_without_ending(dfa, view.state, &path[end as usize..]))
                {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// The boundaries of `insides` (the masks of `keys`, the lexeme states of `state`'s last
    /// set) where a token can leave its lexeme: some child's byte starts something that may
    /// follow the lexeme there (the closure of its items' completions, kept in `closures` for
    /// the walk). Below any other boundary every token stays inside the lexeme, in its mask: a
    /// number's digits, or a string's characters after a quote inside a longer token.
    fn exit_boundaries(
        &self,
        state: &ParseState,
        trie: &TokenTrie,
        keys: &[(LexemeId, u32)],
        insides: &[Arc<LexemeMask>],
        closures: &mut SeedClosures,
    ) -> Result<Vec<u32>, GrammarError> {
        let num_base = state.sets.len();
        let chart = Layered { base: &state.sets, extra: &[] };
        let mut scratch = ScanScratch::default();
        let mut exits = Vec::new();
        for (&(lexeme, lex), inside) in keys.iter().zip(insides) {
            if inside.boundaries.is_empty() {
                continue;
            }
            // NOTE: the closure of several items' completions is the union of each one's.
            let mut follow = [0u64; 4];
            for item in state.last().iter().filter(|item| item.lex == lex) {
                if self.grammar.rules[item.rule as usize].rhs[item.dot as usize] != Symbol::Lexeme(lexeme) {
                    continue;
                }
                let seeds = [(item.rule, item.dot + 1, item.origin)];
                let id = closures.get_or_close(
                    self,
                    &chart,
                    num_base as u32,
                    &seeds,
                    Kept::Committed,
                    &mut scratch,
                )?;
                for (word, bits) in follow.iter_mut().zip(&closures.first_bytes[id]) {
                    *word |= bits;
                }
            }
            for &boundary in &inside.boundaries {
                let node = trie.nodes[boundary as usize];
                let mut child = boundary as usize + 1;
                while child < node.subtree_end as usize {
                    let byte = trie.nodes[child].byte;
                    if follow[byte as usize >> 6] >> (byte & 63) & 1 == 1 {
                        exits.push(boundary);
                        break;
                    }
                    child = trie.nodes[child].subtree_end as usize;
                }
            }
        }
        exits.sort_unstable();
        exits.dedup();
        Ok(exits)
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

/// Whether `bytes` from `state` reach no state where the lexeme ends and leave it dead.
fn dies_without_ending(dfa: &ByteDfa, mut state: u32, bytes: &[u8]) -> bool {
    for &byte in bytes {
        state = dfa.next(state, byte);
        if state == DEAD {
            return true;
        }
        if dfa.is_accepting(state) {
            return false;
        }
    }
    false
}
