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

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use sglr_fsm::json::CountedBody;
use sglr_fsm::{
    bits_to_ids, count_bits, live_tokens_and_ends, live_tokens_donor, live_tokens_from_donor, ByteDfa,
    Delegation, DEAD,
};
use sglr_vocab::{TokenTrie, Vocabulary};

use crate::earley::{close_seeds, step_byte, ByteStep, Chart, Item, ScanScratch, NO_LEX};
use crate::error::GrammarError;
use crate::grammar::{Lexeme, LexemeId, Symbol};
use crate::lexeme_dfa::{LexemeDfa, MaskView, Sharing};
use crate::matcher::{GrammarMatcher, ParseState};
use crate::suffix_trie::{boundary_groups, group_key, suffix_trie, Member, SuffixTrie, MIN_GROUPED};
use crate::walk_memo::context_key;

/// Most bytes a state takes (or on which two states part) for a walk to look their children up
/// ([`children_on`]); past it, every child is stepped.
const MAX_BYTES_APART: usize = 16;

/// Tokens whose bytes stay inside one lexeme from one DFA state, and the trie nodes where the
/// lexeme may end with more bytes below (where the grammar takes over).
#[derive(Debug)]
pub(crate) struct LexemeMask {
    tokens: Tokens,
    boundaries: Vec<u32>,
    /// Groups of boundaries where the lexeme ends in one state, each walked as one
    /// ([`SuffixTrie`], shared through the vocabulary), with where each member's path could
    /// end the lexeme earlier; found by the first boundary walk that needs them.
    // NOTE: the vocabulary's cache counts a mask's bytes when it keeps it, before this is
    // built; `memory_bytes` (a matcher's) counts it once built.
    suffix: OnceLock<Vec<SuffixGroup>>,
}

/// A [`LexemeMask`]'s tokens.
#[derive(Debug)]
enum Tokens {
    /// One bit per token.
    Words(Vec<u32>),
    /// Ascending ids, when they are few (a key, a keyword, digits): a mask ORs every live
    /// lexeme's tokens in, and at the start of an object with many declared keys
    /// whole-vocabulary ORs of nearly empty masks would cost more than the rest of the step.
    Ids(Vec<u32>),
    /// Another mask's tokens but `removed`, and `added` (ascending ids): a state beside its
    /// twin (a free key's text beside a declared name's spelling) differs on a few tokens,
    /// and a mask-sized copy per state would cost page faults and memory.
    Delta { base: Arc<LexemeMask>, removed: Vec<u32>, added: Vec<u32> },
}

thread_local! {
    /// A zeroed mask-sized buffer that walks write into before their tokens are kept (as a
    /// list when few): most lexeme states allow a handful of tokens, and a fresh mask-sized
    /// buffer for each cost more in page faults than the walk itself.
    static SCRATCH_WORDS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `fill` on a zeroed buffer of `num_words` words and keeps what it set as a
/// [`LexemeMask`] with `boundaries` (which `fill` returns), as a [`Tokens::Delta`] over `base`
/// where given and the difference is small; the buffer is left zeroed.
fn mask_from_scratch(
    num_words: usize,
    base: Option<&Arc<LexemeMask>>,
    fill: impl FnOnce(&mut [u32]) -> Vec<u32>,
) -> LexemeMask {
    SCRATCH_WORDS.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        if scratch.len() != num_words {
            *scratch = vec![0u32; num_words];
        }
        let boundaries = fill(&mut scratch);
        let tokens = match base.and_then(|base| delta(base, &scratch)) {
            Some(tokens) => tokens,
            None => Tokens::from_words(Cow::Borrowed(&scratch)),
        };
        scratch.fill(0);
        LexemeMask { tokens, boundaries, suffix: OnceLock::new() }
    })
}

/// `words` as a [`Tokens::Delta`] over `base`, if they differ on few tokens.
fn delta(base: &Arc<LexemeMask>, words: &[u32]) -> Option<Tokens> {
    let Tokens::Words(base_words) = &base.tokens else { return None };
    let limit = words.len() / SPARSE_WORDS_PER_TOKEN;
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    for (index, (&own, &other)) in words.iter().zip(base_words).enumerate() {
        if own == other {
            continue;
        }
        for (list, mut bits) in [(&mut removed, other & !own), (&mut added, own & !other)] {
            while bits != 0 {
                list.push(index as u32 * 32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        if removed.len() + added.len() > limit {
            return None;
        }
    }
    Some(Tokens::Delta { base: base.clone(), removed, added })
}

impl Tokens {
    /// `words` as a list when sparse, else as words (copied only if borrowed).
    fn from_words(words: Cow<'_, [u32]>) -> Self {
        if count_bits(&words) <= words.len() / SPARSE_WORDS_PER_TOKEN {
            Tokens::Ids(bits_to_ids(&words))
        } else {
            Tokens::Words(words.into_owned())
        }
    }
}

impl LexemeMask {
    fn new(words: Vec<u32>, boundaries: Vec<u32>) -> Self {
        Self { tokens: Tokens::from_words(Cow::Owned(words)), boundaries, suffix: OnceLock::new() }
    }

    /// Bytes this mask holds (a delta's base is counted where it is kept).
    pub fn memory_bytes(&self) -> usize {
        let tokens = match &self.tokens {
            Tokens::Words(words) => words.capacity(),
            Tokens::Ids(ids) => ids.capacity(),
            Tokens::Delta { removed, added, .. } => removed.capacity() + added.capacity(),
        };
        (tokens + self.boundaries.capacity()) * 4
            + self.suffix.get().map_or(0, |groups| groups.iter().map(|g| g.ends_before.len() * 24).sum())
    }

    /// Whether some group of this mask's boundaries has a suffix trie.
    fn has_suffix_trie(&self) -> bool {
        self.suffix.get().is_some_and(|groups| groups.iter().any(|g| g.trie.is_some()))
    }

    /// ORs these tokens into `allowed`.
    fn add_to(&self, allowed: &mut [u32]) {
        match &self.tokens {
            Tokens::Ids(ids) => set_ids(allowed, ids),
            Tokens::Words(words) => {
                for (word, bits) in allowed.iter_mut().zip(words) {
                    *word |= bits;
                }
            }
            Tokens::Delta { base, removed, added } => {
                // NOTE: `allowed` may already hold a removed token from another lexeme, so the
                // base goes in with its removed tokens cleared word by word, not set and unset.
                match &base.tokens {
                    Tokens::Words(words) => {
                        let mut next = 0;
                        for (index, (word, &bits)) in allowed.iter_mut().zip(words).enumerate() {
                            let mut bits = bits;
                            while removed.get(next).is_some_and(|&t| t as usize >> 5 == index) {
                                bits &= !(1 << (removed[next] & 31));
                                next += 1;
                            }
                            *word |= bits;
                        }
                    }
                    // NOTE: built over a `Words` base only (see `delta`).
                    _ => unreachable!("a delta over a delta or a list"),
                }
                set_ids(allowed, added);
            }
        }
    }

    /// These tokens as one bit per token (`num_words` words).
    fn dense_words(&self, num_words: usize) -> Cow<'_, [u32]> {
        match &self.tokens {
            Tokens::Words(words) => Cow::Borrowed(words),
            _ => {
                let mut words = vec![0u32; num_words];
                self.add_to(&mut words);
                Cow::Owned(words)
            }
        }
    }
}

/// Sets the bits of `ids` in `allowed`.
fn set_ids(allowed: &mut [u32], ids: &[u32]) {
    for &token in ids {
        allowed[token as usize >> 5] |= 1 << (token & 31);
    }
}

/// A group of a lexeme state's boundaries ending in one state: its suffix trie (none when too
/// large) and, per member, where its path could end the lexeme earlier.
#[derive(Debug)]
struct SuffixGroup {
    trie: Arc<Option<SuffixTrie>>,
    ends_before: Vec<Vec<u16>>,
}

/// The suffix groups of a free key's state inside the declared names, from its twin's
/// (`twin_groups`): a state and its twin step alike or into twins (never accepting inside the
/// names) and accept alike, so a boundary of the state's (`boundaries`, ascending: its twin's
/// but for paths spelling a whole name) ends in the twin's end state, with the same earlier
/// ends. A twin's group the state holds whole is shared as it is (into `groups`); the members
/// it holds of the others are returned, to be grouped as found (a state that spells none of
/// the names whole at the ends of its boundaries holds every group whole: no path is walked).
fn groups_beside_twin(
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

/// Largest residual automaton a lexeme mask is shared by (its signature is a walk of every
/// state's 256 bytes: a string body has about 16 states).
const MAX_SIGNATURE_STATES: usize = 64;

/// A mask's tokens are also kept as a list when a token costs less to set than this many words
/// to OR.
const SPARSE_WORDS_PER_TOKEN: usize = 8;

/// Memo key: vocabulary fingerprint, lexeme, DFA state (a counted string's: the state of its
/// window for that vocabulary, `LexemeDfa::mask_view`).
pub(crate) type LexemeMaskKey = (u64, LexemeId, u32);

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

    /// The [`SuffixGroup`]s of (`lexeme`, DFA state `lex`), whose mask is `inside`: found on
    /// first use and kept with the mask, each trie shared through the vocabulary.
    fn suffix_groups<'a>(
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
    fn lexeme_mask(
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

    /// ORs into `allowed` (and lists in `token_ids`, if given) the tokens below the `boundaries`
    /// (sorted trie nodes) that the parser takes: one byte step per node of their subtrees and
    /// of their ancestors (whose sets the subtrees need), every other subtree skipped in one jump.
    ///
    /// A node where a lexeme ends needs the closure of the items advanced past it, but only
    /// for children whose byte starts something that closure predicts: the closure is kept
    /// per seed list for the whole walk (seeds from committed sets close the same way at every
    /// depth, up to the new set's own number) with the bytes it can take first, and a node's
    /// set holds only its in-lexeme items until a child needs more. Inside numbers and strings
    /// (a lexeme that may end at every byte) most nodes are leaves or have only in-lexeme
    /// children, so most steps never close a set.
    fn walk_boundaries(
        &self,
        state: &ParseState,
        trie: &TokenTrie,
        boundaries: &[u32],
        closures: &mut SeedClosures,
        allowed: &mut [u32],
        mut token_ids: Option<&mut Vec<u32>>,
    ) -> Result<(), GrammarError> {
        let base: &[Arc<[Item]>] = &state.sets;
        let num_base = base.len();
        // NOTE: the per-depth state lives in a thread's buffers, reused by every walk (a mask
        // walks once per suffix group and once for the rest); a depth's entries are written when
        // a node at that depth is entered, before a child reads them, so only depth 0 is reset.
        let mut vecs = WALK_VECS.with(|vecs| std::mem::take(&mut *vecs.borrow_mut()));
        vecs.prepare(trie.max_depth + 1);
        let WalkVecs { extra, pending, inside_only, lone_follow, entered, set_first, num_stepped } =
            &mut vecs;
        // `pending[d]`: the closure `extra[d]` still lacks (added when a child needs it).
        let mut scratch = ScanScratch::default();
        let mut step = ByteStep::default();
        let end = trie.nodes[0].subtree_end as usize;
        // `inside_only[d]`: `extra[d]` (the base's last set at 0) holds only the committed
        // in-lexeme items advanced along the path, no item of a lexeme's end (a pending closure
        // aside). Below such a set, a node whose step ends no lexeme and takes no pending
        // closure holds those items alone: its tokens are in the lexeme masks, and its subtree
        // needs a walk only down to the boundaries in it.
        // `lone[d]`: `extra[d]` is one in-lexeme item (of a lexeme begun inside the walk) and no
        // pending closure, with its lexeme's automaton: below it, until the lexeme may end, a
        // node needs one automaton step, not a parser step (a string's characters after ` "`).
        let mut lone: Vec<Option<&LexemeDfa>> = vec![None; trie.max_depth + 1];
        // `lone_follow[d]`: with `lone[d]`, the bytes the closure after that item's lexeme can
        // take first, once known (the same along the lexeme: the item's completion does not
        // change): where the lexeme may end, a node none of whose children starts a follower
        // stays lone (a number's digits after ` 1`).
        // `entered[d]`: a number for the node whose set is `extra[d]` (each node a new one).
        let mut num_entered = 0u32;
        // `set_first[d]`: the bytes some item of `extra[d]` takes first, found once a few of the
        // node's children were stepped (reset whenever the set changes): a byte none takes
        // gives an empty step, skipped without one (after ` `, most of the space's children
        // start no value). `num_stepped[d]`: children of the node at depth d stepped so far.
        // `boundaries[next_boundary]` is the first boundary at or after `index` (the walk only
        // moves forward, so a cursor replaces a search per node).
        let mut next_boundary = 0;
        let mut index = 1;
        while index < end {
            let node = trie.nodes[index];
            let depth = node.depth as usize;
            let parent = depth - 1;
            let from_inside = inside_only[parent];
            if from_inside {
                while boundaries.get(next_boundary).is_some_and(|&b| (b as usize) < index) {
                    next_boundary += 1;
                }
                let boundary_below =
                    boundaries.get(next_boundary).is_some_and(|&b| (b as usize) < node.subtree_end as usize);
                let closure_takes = pending[parent].is_some_and(|id| closures.takes_first(id, node.byte));
                if !boundary_below && !closure_takes {
                    index = node.subtree_end as usize;
                    continue;
                }
            }
            num_entered += 1;
            entered[depth] = num_entered;
            set_first[depth] = None;
            num_stepped[depth] = 0;
            if let Some(dfa) = lone[parent] {
                let item = extra[parent][0];
                let next = dfa.next(item.lex, node.byte);
                if next == DEAD {
                    index = node.subtree_end as usize;
                    continue;
                }
                // NOTE: where the lexeme may end, the parser steps (below), unless what may
                // follow it is known and no child starts it.
                let has_children = node.subtree_end as usize > index + 1;
                let stays = !dfa.is_accepting(next)
                    || lone_follow[parent]
                        .is_some_and(|follow| !has_children || !children_take(trie, index, &follow));
                if stays {
                    allow_node_tokens(trie, index, allowed, token_ids.as_deref_mut());
                    let goes_on = !dfa.is_accepting(next) || dfa.successors(next).next().is_some();
                    if has_children && goes_on {
                        extra[depth].clear();
                        extra[depth].push(Item { lex: next, ..item });
                        lone[depth] = Some(dfa);
                        lone_follow[depth] = lone_follow[parent];
                        pending[depth] = None;
                        inside_only[depth] = false;
                        index += 1;
                    } else {
                        index = node.subtree_end as usize;
                    }
                    continue;
                }
            }
            let parent_index = (num_base - 1 + parent) as u32;
            // The parent's pending closure on this byte, stepped once per walk (kept with the
            // closure), unless it ends a lexeme predicted in the parent set itself: completing
            // that needs the parent's whole set.
            let mut closure_step = None;
            if let Some(id) = pending[parent] {
                if closures.takes_first(id, node.byte) {
                    let closed = closures.step(self, id, node.byte)?;
                    if closed.seeds.iter().any(|&(_, _, origin)| origin == OWN_SET) {
                        pending[parent] = None;
                        closures.add_to(id, parent_index, &mut extra[parent]);
                        set_first[parent] = None;
                        inside_only[parent] = false;
                    } else {
                        closure_step = Some(id);
                    }
                }
            }
            let parent_set: &[Item] = if parent == 0 { &base[num_base - 1] } else { &extra[parent] };
            num_stepped[parent] += 1;
            if closure_step.is_none() && num_stepped[parent] > MIN_STEPPED_FOR_FIRST_BYTES {
                let first = match set_first[parent] {
                    Some(first) => first,
                    None => *set_first[parent].insert(self.first_bytes(parent_set)?),
                };
                if first[node.byte as usize >> 6] >> (node.byte & 63) & 1 == 0 {
                    index = node.subtree_end as usize;
                    continue;
                }
            }
            step_byte(&self.grammar, &self.lexemes, parent_set, node.byte, &mut step)?;
            if let Some(id) = closure_step {
                step.add_relative(closures.stepped(id, node.byte), OWN_SET, parent_index);
            }
            if step.is_empty() {
                index = node.subtree_end as usize;
                continue;
            }
            if from_inside && step.seeds.is_empty() && closure_step.is_none() {
                // NOTE: only the committed lexemes go on here; their tokens are in the masks.
                if node.subtree_end as usize > index + 1 {
                    pending[depth] = None;
                    inside_only[depth] = true;
                    lone[depth] = None;
                    std::mem::swap(&mut extra[depth], &mut step.inside);
                }
                index += 1;
                continue;
            }
            allow_node_tokens(trie, index, allowed, token_ids.as_deref_mut());
            if node.subtree_end as usize == index + 1 {
                // A leaf: its tokens are all this node decides.
                index += 1;
                continue;
            }
            let set_index = (num_base - 1 + depth) as u32;
            pending[depth] = None;
            // NOTE: swapped, not moved: the set's old buffer becomes the next step's.
            inside_only[depth] = false;
            lone[depth] = None;
            if step.seeds.is_empty() {
                std::mem::swap(&mut extra[depth], &mut step.inside);
                if let [item] = extra[depth][..] {
                    if let Symbol::Lexeme(lexeme) =
                        self.grammar.rules[item.rule as usize].rhs[item.dot as usize]
                    {
                        lone[depth] = Some(self.lexemes.get(&self.grammar, lexeme)?);
                        lone_follow[depth] = None;
                    }
                }
            } else if step.seeds.iter().all(|&(_, _, origin)| (origin as usize) < num_base) {
                let chart = Layered { base, extra: &[] };
                let id = closures.get_or_close(
                    self,
                    &chart,
                    set_index,
                    &step.seeds,
                    Kept::Committed,
                    &mut scratch,
                )?;
                std::mem::swap(&mut extra[depth], &mut step.inside);
                pending[depth] = Some(id);
                inside_only[depth] = from_inside && closure_step.is_none();
            } else {
                // NOTE: at most one item going on in its lexeme, and seeds from one set of the
                // walk: when no child starts what follows the lexeme, the node stays lone (or
                // its subtree holds nothing more) and the closure's set is not built. The item
                // going on must be the one ending here (its completion is then what may follow
                // it at every later end too).
                let origin = step.seeds[0].2;
                let one_origin = step.seeds.iter().all(|seed| seed.2 == origin);
                let alone = match step.inside[..] {
                    [] => one_origin,
                    [item] => step.seeds[..] == [(item.rule, item.dot + 1, item.origin)],
                    _ => false,
                };
                // NOTE: completing a lexeme that began inside the walk reads the sets it began
                // in (and, through what they wait for, their origins): every ancestor whole.
                for ancestor in 1..depth {
                    if let Some(id) = pending[ancestor].take() {
                        closures.add_to(id, (num_base - 1 + ancestor) as u32, &mut extra[ancestor]);
                        set_first[ancestor] = None;
                        inside_only[ancestor] = false;
                    }
                }
                // NOTE: seeds from one set of the walk close the same way at every node below
                // it (the closure reads that set and what it waits on, never a deeper one), up
                // to the new set's own number: kept per walk by (seeds, that set's `entered`).
                let kept = if one_origin {
                    Kept::BelowWalkSet(entered[origin as usize + 1 - num_base])
                } else {
                    Kept::No
                };
                let (parents, _) = extra.split_at(depth);
                let chart = Layered { base, extra: parents };
                let id = closures.get_or_close(self, &chart, set_index, &step.seeds, kept, &mut scratch)?;
                let follow = closures.first_bytes[id];
                if alone && !children_take(trie, index, &follow) {
                    if !self.go_lone(&mut step.inside, depth, extra, &mut lone)? {
                        index = node.subtree_end as usize;
                        continue;
                    }
                    lone_follow[depth] = Some(follow);
                    index += 1;
                    continue;
                }
                let mut set = Vec::new();
                closures.add_to(id, set_index, &mut set);
                merge_items(&mut set, &step.inside);
                extra[depth] = set;
            }
            index += 1;
        }
        WALK_VECS.with(|kept| *kept.borrow_mut() = vecs);
        Ok(())
    }

    /// Makes `inside` (at most one in-lexeme item) the set at `depth`, walked lone; false when
    /// it is empty (nothing goes on below).
    fn go_lone<'a>(
        &'a self,
        inside: &mut Vec<Item>,
        depth: usize,
        extra: &mut [Vec<Item>],
        lone: &mut [Option<&'a LexemeDfa>],
    ) -> Result<bool, GrammarError> {
        let Some(&item) = inside.first() else { return Ok(false) };
        let Symbol::Lexeme(lexeme) = self.grammar.rules[item.rule as usize].rhs[item.dot as usize] else {
            return Ok(false);
        };
        lone[depth] = Some(self.lexemes.get(&self.grammar, lexeme)?);
        std::mem::swap(&mut extra[depth], inside);
        Ok(true)
    }

    /// The bytes some in-lexeme item of `items` takes first (a 256-bit set).
    fn first_bytes(&self, items: &[Item]) -> Result<[u64; 4], GrammarError> {
        let mut first = [0u64; 4];
        for item in items.iter().filter(|item| item.lex != NO_LEX) {
            let Symbol::Lexeme(lexeme) = self.grammar.rules[item.rule as usize].rhs[item.dot as usize] else {
                continue;
            };
            let bytes = self.lexemes.first_bytes(&self.grammar, lexeme, item.lex)?;
            for (word, bits) in first.iter_mut().zip(bytes) {
                *word |= bits;
            }
        }
        Ok(first)
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

/// Children of a walk's node stepped one by one before the bytes its set takes first are found
/// and the rest are filtered by them (most nodes have a few children).
const MIN_STEPPED_FOR_FIRST_BYTES: u32 = 4;

/// Whether some child of trie node `index` has a byte of `bytes` (a 256-bit set).
fn children_take(trie: &TokenTrie, index: usize, bytes: &[u64; 4]) -> bool {
    children_on(trie, index, None).any(|child| {
        let byte = trie.nodes[child].byte;
        bytes[byte as usize >> 6] >> (byte & 63) & 1 == 1
    })
}

/// The children of trie node `index`, ascending: those on `bytes` (ascending, looked up) when
/// given, else every one (each subtree skipped in one jump).
fn children_on(trie: &TokenTrie, index: usize, bytes: Option<Vec<u8>>) -> impl Iterator<Item = usize> + '_ {
    let end = trie.nodes[index].subtree_end as usize;
    let all = bytes.is_none().then(|| {
        std::iter::successors(Some(index + 1).filter(|&child| child < end), move |&child| {
            Some(trie.nodes[child].subtree_end as usize).filter(|&next| next < end)
        })
    });
    let listed = bytes.map(|bytes| bytes.into_iter().filter_map(move |byte| trie.child(index, byte)));
    listed.into_iter().flatten().chain(all.into_iter().flatten())
}

/// ORs the tokens ending at trie node `index` into `allowed` (and lists them in `token_ids`).
fn allow_node_tokens(trie: &TokenTrie, index: usize, allowed: &mut [u32], token_ids: Option<&mut Vec<u32>>) {
    let start = trie.nodes[index].token_start as usize;
    let stop = trie.nodes[index + 1].token_start as usize;
    set_ids(allowed, &trie.token_ids[start..stop]);
    if let Some(token_ids) = token_ids {
        token_ids.extend_from_slice(&trie.token_ids[start..stop]);
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

/// The [`LexemeMask`] of `state` from its twin's (`twin_mask`, of state `twin`), by one walk
/// in lockstep from both states that enters only where the two part (a declared name's
/// spelling: `ByteDfa::bytes_apart` names the few children to look up, none of the others):
/// below every other node the twin's tokens and boundaries are the state's. A [`Tokens::Delta`]
/// over a twin kept as words, a list beside a twin kept as a list (a key's opening quote);
/// `None` when the twin is itself a delta or the two differ on too many tokens for a delta.
fn mask_beside_twin(
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

/// `twin` as `state`'s donor, with the first bytes on which the two reach the same state.
fn twin_delegation(dfa: &ByteDfa, state: u32, twin: u32) -> Delegation {
    let mut bytes = [0u64; 4];
    for byte in 0..=255u8 {
        if dfa.next(state, byte) == dfa.next(twin, byte) {
            bytes[byte as usize >> 6] |= 1 << (byte & 63);
        }
    }
    Delegation { donor: twin, bytes }
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

/// Most memoised lexeme masks per matcher (each is one bit per token: 12.5 KiB at 100k
/// tokens, so at most 6.25 MiB there); past it, masks are computed and not kept.
const MAX_LEXEME_MASKS: usize = 512;

/// The matcher's memo of [`LexemeMask`]s, shared by every request using the grammar.
#[derive(Debug, Default)]
pub(crate) struct LexemeMaskCache {
    masks: std::sync::Mutex<rustc_hash::FxHashMap<LexemeMaskKey, Arc<LexemeMask>>>,
}

impl LexemeMaskCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, rustc_hash::FxHashMap<LexemeMaskKey, Arc<LexemeMask>>> {
        // NOTE: a panic while holding the lock cannot leave the map half-updated.
        self.masks.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn get(&self, key: &LexemeMaskKey) -> Option<Arc<LexemeMask>> {
        self.lock().get(key).cloned()
    }

    fn insert(&self, key: LexemeMaskKey, mask: Arc<LexemeMask>) {
        let mut masks = self.lock();
        if masks.len() < MAX_LEXEME_MASKS {
            masks.insert(key, mask);
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Masks with a group of boundaries walked as one [`SuffixTrie`].
    pub fn num_suffix_tries(&self) -> usize {
        self.lock().values().filter(|mask| mask.has_suffix_trie()).count()
    }

    pub fn memory_bytes(&self) -> usize {
        self.lock().values().map(|m| m.memory_bytes()).sum()
    }
}

/// An item advanced past a lexeme, before its set is closed: (rule, dot, origin).
type Seed = (u32, u32, u32);

/// Which closures of a walk a seed list's closure is kept with ([`SeedClosures::get_or_close`]).
#[derive(Clone, Copy)]
enum Kept {
    /// Seeds from committed sets: the same closure at every depth.
    Committed,
    /// Seeds from one set of the walk, the one entered as this number (`entered` in
    /// `walk_boundaries`): the same closure at every node below it.
    BelowWalkSet(u32),
    /// Seeds from several sets of the walk: not kept.
    No,
}

/// [`GrammarMatcher::walk_boundaries`]'s state per trie depth (see there), kept between walks.
#[derive(Default)]
struct WalkVecs {
    extra: Vec<Vec<Item>>,
    pending: Vec<Option<usize>>,
    inside_only: Vec<bool>,
    lone_follow: Vec<Option<[u64; 4]>>,
    entered: Vec<u32>,
    set_first: Vec<Option<[u64; 4]>>,
    num_stepped: Vec<u32>,
}

impl WalkVecs {
    /// Sized for at least depths `0..num_depths`, with depth 0 (the committed chart's last set)
    /// reset.
    fn prepare(&mut self, num_depths: usize) {
        // NOTE: grown, never shrunk: a mask's walks alternate between the vocabulary's trie and
        // shallower suffix tries, and deeper entries are only read below a node that wrote them.
        if self.extra.len() < num_depths {
            self.extra.resize_with(num_depths, Vec::new);
            self.pending.resize(num_depths, None);
            self.inside_only.resize(num_depths, true);
            self.lone_follow.resize(num_depths, None);
            self.entered.resize(num_depths, 0);
            self.set_first.resize(num_depths, None);
            self.num_stepped.resize(num_depths, 0);
        }
        self.pending[0] = None;
        self.inside_only[0] = true;
        self.lone_follow[0] = None;
        self.entered[0] = 0;
        self.set_first[0] = None;
        self.num_stepped[0] = 0;
    }
}

thread_local! {
    static WALK_VECS: RefCell<WalkVecs> = RefCell::new(WalkVecs::default());
}

/// Origin that stands for "the set being built" in a closure kept for several depths.
const OWN_SET: u32 = u32::MAX;

/// A walk's closures of seed lists whose origins are committed sets: the same items at every
/// depth except the origin of what the new set predicts itself (stored as [`OWN_SET`]).
#[derive(Default)]
struct SeedClosures {
    ids: rustc_hash::FxHashMap<Vec<(u32, u32, u32)>, usize>,
    /// Closures of seeds whose origin is one set of the walk, by that set's `entered` (in
    /// `walk_boundaries`), then seeds.
    walk_ids: rustc_hash::FxHashMap<u32, rustc_hash::FxHashMap<Vec<Seed>, usize>>,
    items: Vec<Vec<Item>>,
    /// Per closure, the bytes some item's lexeme can take first (a 256-bit set).
    first_bytes: Vec<[u64; 4]>,
    /// Closures stepped on a byte, by (closure, byte).
    steps: rustc_hash::FxHashMap<(usize, u8), ByteStep>,
}

impl SeedClosures {
    /// The closure of `seeds` in a new set numbered `set_index` (its own predictions' origin
    /// kept as [`OWN_SET`]) with the bytes it takes first, kept as `kept` says.
    fn get_or_close(
        &mut self,
        matcher: &GrammarMatcher,
        chart: &dyn Chart,
        set_index: u32,
        seeds: &[Seed],
        kept: Kept,
        scratch: &mut ScanScratch,
    ) -> Result<usize, GrammarError> {
        let found = match kept {
            Kept::Committed => self.ids.get(seeds).copied(),
            Kept::BelowWalkSet(entered) => {
                self.walk_ids.get(&entered).and_then(|ids| ids.get(seeds)).copied()
            }
            Kept::No => None,
        };
        if let Some(id) = found {
            return Ok(id);
        }
        let mut items = close_seeds(
            &matcher.grammar,
            &matcher.lexemes,
            matcher.limits,
            chart,
            set_index,
            seeds,
            scratch,
        )?;
        for item in &mut items {
            if item.origin == set_index {
                item.origin = OWN_SET;
            }
        }
        let id = self.items.len();
        self.first_bytes.push(matcher.first_bytes(&items)?);
        self.items.push(items);
        match kept {
            Kept::Committed => {
                self.ids.insert(seeds.to_vec(), id);
            }
            Kept::BelowWalkSet(entered) => {
                self.walk_ids.entry(entered).or_default().insert(seeds.to_vec(), id);
            }
            Kept::No => {}
        }
        Ok(id)
    }

    /// Closure `id` stepped on `byte` (origins of its own predictions still [`OWN_SET`]).
    fn step(&mut self, matcher: &GrammarMatcher, id: usize, byte: u8) -> Result<&ByteStep, GrammarError> {
        match self.steps.entry((id, byte)) {
            std::collections::hash_map::Entry::Occupied(found) => Ok(found.into_mut()),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let mut step = ByteStep::default();
                step_byte(&matcher.grammar, &matcher.lexemes, &self.items[id], byte, &mut step)?;
                Ok(slot.insert(step))
            }
        }
    }

    /// [`SeedClosures::step`] already taken.
    fn stepped(&self, id: usize, byte: u8) -> &ByteStep {
        &self.steps[&(id, byte)]
    }

    fn takes_first(&self, id: usize, byte: u8) -> bool {
        self.first_bytes[id][byte as usize >> 6] >> (byte & 63) & 1 == 1
    }

    /// Adds closure `id`, numbered `set_index`, to `set` (sorted in-lexeme items).
    fn add_to(&self, id: usize, set_index: u32, set: &mut Vec<Item>) {
        let closure: Vec<Item> = self.items[id]
            .iter()
            .map(|&item| if item.origin == OWN_SET { Item { origin: set_index, ..item } } else { item })
            .collect();
        let inside = std::mem::replace(set, closure);
        merge_items(set, &inside);
    }
}

/// Appends `more` to `set` without repeating an item.
fn merge_items(set: &mut Vec<Item>, more: &[Item]) {
    if more.is_empty() {
        return;
    }
    set.extend_from_slice(more);
    set.sort_unstable_by_key(|i| (i.rule, i.dot, i.origin, i.lex));
    set.dedup();
}
