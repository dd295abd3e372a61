//! A lexeme state's [`LexemeMask`], computed once and shared: by the vocabulary's table (a
//! counted string's body), by a walk of the trie with that DFA alone (sparse for a literal,
//! through rust/fsm's `live_tokens` elsewhere: a string body's walk is shared through the
//! vocabulary), from a donor state's mask, or beside its twin's; and its boundaries (trie nodes
//! where the lexeme may end with more bytes below), found by a walk that skips every subtree
//! too shallow to reach the lexeme's end.

use std::sync::{Arc, OnceLock};

use sglr_fsm::json::CountedBody;
use sglr_fsm::{live_tokens_and_ends, live_tokens_donor, live_tokens_from_donor, ByteDfa, Delegation, DEAD};
use sglr_vocab::{TokenTrie, Vocabulary};

use super::lexeme_mask::{mask_from_scratch, LexemeMask, SuffixGroup, Tokens};
use super::nodes::{children_on, MAX_BYTES_APART};
use super::twin::{groups_beside_twin, mask_beside_twin, twin_delegation};
use crate::error::GrammarError;
use crate::grammar::{Lexeme, LexemeId};
use crate::lexeme_dfa::{MaskView, Sharing};
use crate::matcher::GrammarMatcher;
use crate::suffix_trie::{boundary_groups, group_key, suffix_trie, SuffixTrie};

/// Largest residual automaton a lexeme mask is shared by (its signature is a walk of every
/// state's 256 bytes: a string body has about 16 states).
const MAX_SIGNATURE_STATES: usize = 64;

impl GrammarMatcher {
    /// The [`SuffixGroup`]s of (`lexeme`, DFA state `lex`), whose mask is `inside`: found on
    /// first use and kept with the mask, each trie shared through the vocabulary.
    pub(super) fn suffix_groups<'a>(
        &self,
        vocabulary: &Vocabulary,
        lexeme: LexemeId,
        lex: u32,
        inside: &'a LexemeMask,
    ) -> Result<&'a [SuffixGroup], GrammarError> {
        if inside.suffix.get().is_none() {
            let trie = vocabulary.trie();
            let view = self.lexemes.mask_view(&self.grammar, lexeme, lex, trie.max_depth)?;
            let mut groups = Vec::new();
            let found = match view.twin(view.state) {
                Some(twin) => {
                    let twin_mask = self.view_mask(vocabulary, lexeme, &view, twin)?;
                    let twin_groups = self.suffix_groups(vocabulary, lexeme, twin, &twin_mask)?;
                    groups_beside_twin(trie, twin_groups, &inside.boundaries, &mut groups)
                }
                None => boundary_groups(view.dfa(), view.state, trie, &inside.boundaries),
            };
            for members in found {
                let shared = vocabulary.shared_result(
                    &group_key(&members),
                    |built: &Option<SuffixTrie>| built.as_ref().map_or(0, SuffixTrie::memory_bytes),
                    || Ok::<_, GrammarError>(suffix_trie(trie, &members)),
                )?;
                groups.push(SuffixGroup {
                    trie: shared,
                    ends_before: members.into_iter().map(|m| m.ends_before).collect(),
                });
            }
            // NOTE: two threads may both find the groups; either answer is the same.
            let _ = inside.suffix.set(groups);
        }
        Ok(inside.suffix.get().map_or(&[], Vec::as_slice))
    }

    /// The memoised inside-the-lexeme tokens of (`lexeme`, DFA state `lex`).
    pub(super) fn lexeme_mask(
        &self,
        vocabulary: &Vocabulary,
        lexeme: LexemeId,
        lex: u32,
    ) -> Result<Arc<LexemeMask>, GrammarError> {
        // NOTE: a counted string's states map to a window no token can tell apart from them
        // (the vocabulary's longest token fixes it), so its masks are kept by window state.
        let view = self.lexemes.mask_view(&self.grammar, lexeme, lex, vocabulary.trie().max_depth)?;
        self.view_mask(vocabulary, lexeme, &view, view.state)
    }

    /// [`GrammarMatcher::lexeme_mask`] of state `state` of `view`'s table, memoised.
    fn view_mask(
        &self,
        vocabulary: &Vocabulary,
        lexeme: LexemeId,
        view: &MaskView<'_>,
        state: u32,
    ) -> Result<Arc<LexemeMask>, GrammarError> {
        let key = (vocabulary.fingerprint(), lexeme, state);
        if let Some(found) = self.lexeme_masks.get(&key) {
            return Ok(found);
        }
        // NOTE: the mask depends only on what the DFA accepts from `state`, so it is shared with
        // every matcher over this vocabulary whose lexeme state has the same residual automaton
        // (a counted string's state in the same window, told by the window's number; a free
        // key past its declared names, told without a signature); past `MAX_SIGNATURE_STATES`
        // states, with every matcher holding the same lexeme (its definition fixes its DFA,
        // numbering included).
        let definition_key = |kind: &[u8]| {
            let mut key = kind.to_vec();
            self.grammar.lexeme(lexeme).write_key(&mut key);
            key.extend_from_slice(&state.to_le_bytes());
            key
        };
        let same_lexeme = || definition_key(b"sglr-grammar lexeme mask\0");
        let compute = || self.compute_lexeme_mask(vocabulary, lexeme, view, state);
        // NOTE: a literal's mask (a declared key's) is a walk down one path of the trie, which
        // costs less than writing and looking up a key to share it by.
        if let Lexeme::Literal { .. } = self.grammar.lexeme(lexeme) {
            let mask = Arc::new(compute()?);
            self.lexeme_masks.insert(key, mask.clone());
            return Ok(mask);
        }
        let mask = match view.sharing(state) {
            Sharing::FreeKey(any_key_state) => {
                let shared_key = format!("sglr-grammar free key mask\0{any_key_state}");
                vocabulary.shared_result(shared_key.as_bytes(), LexemeMask::memory_bytes, compute)?
            }
            Sharing::SameLexeme => {
                vocabulary.shared_result(&same_lexeme(), LexemeMask::memory_bytes, compute)?
            }
            Sharing::SameWindow(serial) => {
                let key = [
                    b"sglr-grammar counted window mask\0".as_slice(),
                    &serial.to_le_bytes(),
                    &state.to_le_bytes(),
                ]
                .concat();
                vocabulary.shared_result(&key, LexemeMask::memory_bytes, compute)?
            }
            Sharing::SameResidual => {
                // NOTE: a lexeme met again (the same definition in another schema: the same DFA)
                // finds its mask by definition first; the residual's signature (a walk of up to
                // `MAX_SIGNATURE_STATES` states' bytes) costs more than most masks.
                let by_definition = definition_key(b"sglr-grammar mask by definition\0");
                let found = vocabulary.shared_result(
                    &by_definition,
                    |mask: &Arc<LexemeMask>| mask.memory_bytes(),
                    || {
                        let shared_key = match view.dfa().residual_signature(state, MAX_SIGNATURE_STATES) {
                            Some(signature) => {
                                [b"sglr-grammar residual mask\0".as_slice(), &signature].concat()
                            }
                            None => same_lexeme(),
                        };
                        vocabulary.shared_result(&shared_key, LexemeMask::memory_bytes, compute)
                    },
                )?;
                Arc::clone(&*found)
            }
        };
        self.lexeme_masks.insert(key, mask.clone());
        Ok(mask)
    }

    /// [`LexemeMask`] of state `state` of `view`'s table, computed.
    fn compute_lexeme_mask(
        &self,
        vocabulary: &Vocabulary,
        lexeme: LexemeId,
        view: &MaskView<'_>,
        state: u32,
    ) -> Result<LexemeMask, GrammarError> {
        if let (Lexeme::CountedString { all, .. }, Some((to_min, to_max))) =
            (self.grammar.lexeme(lexeme), view.words_to_come())
        {
            // NOTE: a plain string's count is told by the vocabulary's table, not a walk (the
            // view's state is `state` here: a counted lexeme's masks are asked for by window
            // state, through `lexeme_mask`).
            if all.is_empty() && state == view.state {
                let body = vocabulary.shared_result(
                    b"sglr-grammar counted string body",
                    CountedBody::memory_bytes,
                    || CountedBody::new(vocabulary),
                )?;
                let mask = body.mask(to_min, to_max);
                return Ok(LexemeMask::new(mask.words, mask.ends));
            }
        }
        let dfa = view.dfa();
        let num_words = vocabulary.num_mask_words();
        let trie = vocabulary.trie();
        if let Lexeme::Literal { .. } = self.grammar.lexeme(lexeme) {
            // NOTE: a literal's tokens are few (prefixes of its text, then its colon), so they
            // are listed as the walk finds them: a mask-sized buffer would cost more to clear
            // and scan than the walk (which needs no accept distances either).
            return Ok(sparse_lexeme_mask(dfa, trie, state));
        }
        // NOTE: a twin (a free key's state beside one inside the declared names) is a donor
        // whose mask every schema shares; the lockstep walk below follows only the names.
        let twin = view.twin(state);
        if let Some(twin) = twin {
            // NOTE: a twin has no twin, so this goes one level deep.
            let twin_mask = self.view_mask(vocabulary, lexeme, view, twin)?;
            if let Some(mask) = mask_beside_twin(dfa, trie, num_words, state, twin, &twin_mask) {
                return Ok(mask);
            }
        }
        let distances = view.accept_distances();
        let delegation = match twin {
            Some(twin) => Some(twin_delegation(dfa, state, twin)),
            None => live_tokens_donor(dfa, state),
        };
        match delegation {
            Some(delegation) => {
                // NOTE: a donor is a twin (which has no twin) or a loop state (which has no
                // donor), so this goes two levels deep at most. Under a delegated first byte
                // this state and the donor reach the same states, so the donor's boundaries
                // there are this state's too.
                let donor_mask = self.view_mask(vocabulary, lexeme, view, delegation.donor)?;
                let donor_words = donor_mask.dense_words(num_words);
                let base = twin.is_some().then_some(&donor_mask);
                Ok(mask_from_scratch(num_words, base, |words| {
                    live_tokens_from_donor(dfa, vocabulary, state, &delegation, &donor_words, words);
                    delegated_boundaries(dfa, distances, trie, state, &donor_mask.boundaries, &delegation)
                }))
            }
            None => Ok(mask_from_scratch(num_words, None, |words| {
                // NOTE: where the tokens need a walk of their own, the same walk finds the
                // boundaries (a node where the lexeme may end is live, and has children).
                match live_tokens_and_ends(dfa, vocabulary, state, distances, words) {
                    Some(ends) => ends,
                    None => {
                        lexeme_boundaries(dfa, distances, trie, state, 1, trie.nodes[0].subtree_end as usize)
                    }
                }
            })),
        }
    }
}

/// The trie nodes below which a token can end the lexeme started in DFA state `lex` and go on:
/// the DFA accepts there and the node has children. A subtree too shallow to reach an
/// accepting state (its height below the node's state's distance) is skipped whole, so a
/// state far from the lexeme's end (a string body in the middle of an object) costs a few
/// hundred nodes, not a vocabulary walk.
/// Only the nodes `begin..end` (whole subtrees of the root's children) are walked.
fn lexeme_boundaries(
    dfa: &ByteDfa,
    distances: &[u16],
    trie: &TokenTrie,
    lex: u32,
    begin: usize,
    end: usize,
) -> Vec<u32> {
    let mut boundaries = Vec::new();
    let mut states = vec![lex; trie.max_depth + 1];
    let mut index = begin;
    while index < end {
        let node = trie.nodes[index];
        let depth = node.depth as usize;
        let next = dfa.next(states[depth - 1], node.byte);
        // NOTE: a boundary at relative depth k >= 0 below this node needs distance <= k and
        // a child below it, so k < height (a capped height bounds nothing).
        if next == DEAD || node.height != u8::MAX && distances[next as usize] >= u16::from(node.height) {
            index = node.subtree_end as usize;
            continue;
        }
        states[depth] = next;
        if distances[next as usize] == 0 {
            boundaries.push(index as u32);
        }
        index += 1;
    }
    boundaries
}

/// The [`LexemeMask`] of DFA state `lex` by one walk that lists its tokens and boundaries as it
/// meets them (for a lexeme whose states allow few tokens). Where a state takes a few bytes (a
/// literal's next one), their children are looked up, not found among all the node's.
fn sparse_lexeme_mask(dfa: &ByteDfa, trie: &TokenTrie, lex: u32) -> LexemeMask {
    let mut token_ids = Vec::new();
    let mut boundaries = Vec::new();
    sparse_walk(dfa, trie, 0, lex, &mut token_ids, &mut boundaries);
    token_ids.sort_unstable();
    boundaries.sort_unstable();
    LexemeMask { tokens: Tokens::Ids(token_ids), boundaries, suffix: OnceLock::new() }
}

/// [`sparse_lexeme_mask`]'s walk below trie node `index`, reached in (live) state `state`.
fn sparse_walk(
    dfa: &ByteDfa,
    trie: &TokenTrie,
    index: usize,
    state: u32,
    token_ids: &mut Vec<u32>,
    boundaries: &mut Vec<u32>,
) {
    let visit = |child: usize, token_ids: &mut Vec<u32>, boundaries: &mut Vec<u32>| {
        let node = trie.nodes[child];
        let next = dfa.next(state, node.byte);
        if next == DEAD {
            return;
        }
        let start = node.token_start as usize;
        token_ids.extend_from_slice(&trie.token_ids[start..trie.nodes[child + 1].token_start as usize]);
        if node.subtree_end as usize > child + 1 {
            if dfa.is_accepting(next) {
                boundaries.push(child as u32);
            }
            sparse_walk(dfa, trie, child, next, token_ids, boundaries);
        }
    };
    for child in children_on(trie, index, dfa.bytes_apart(state, DEAD, MAX_BYTES_APART)) {
        visit(child, token_ids, boundaries);
    }
}

/// [`lexeme_boundaries`] of a state whose tokens come from a donor (`delegation`) with
/// boundaries `donor_boundaries`: the trie walked in lockstep from both states, the donor's
/// boundaries taken below every node where the two runs meet (as `delegated_row` takes its
/// tokens there), a walk of this state's own below the others.
fn delegated_boundaries(
    dfa: &ByteDfa,
    distances: &[u16],
    trie: &TokenTrie,
    lex: u32,
    donor_boundaries: &[u32],
    delegation: &Delegation,
) -> Vec<u32> {
    let mut boundaries = Vec::new();
    let mut own = vec![DEAD; trie.max_depth + 1];
    let mut donor = vec![DEAD; trie.max_depth + 1];
    own[0] = lex;
    donor[0] = delegation.donor;
    let end = trie.nodes[0].subtree_end as usize;
    let mut index = 1;
    while index < end {
        let node = trie.nodes[index];
        let depth = node.depth as usize;
        let subtree_end = node.subtree_end as usize;
        let next = dfa.next(own[depth - 1], node.byte);
        let parent = donor[depth - 1];
        let donor_next = if parent == DEAD { DEAD } else { dfa.next(parent, node.byte) };
        if next == donor_next {
            let first = donor_boundaries.partition_point(|&b| (b as usize) < index);
            let last = donor_boundaries.partition_point(|&b| (b as usize) < subtree_end);
            boundaries.extend_from_slice(&donor_boundaries[first..last]);
            index = subtree_end;
            continue;
        }
        // NOTE: as in `lexeme_boundaries`, a subtree too shallow to reach the lexeme's end
        // holds no boundary.
        if next == DEAD || node.height != u8::MAX && distances[next as usize] >= u16::from(node.height) {
            index = subtree_end;
            continue;
        }
        if distances[next as usize] == 0 {
            boundaries.push(index as u32);
        }
        own[depth] = next;
        donor[depth] = donor_next;
        index += 1;
    }
    boundaries
}
