//! [`GrammarMatcher`] (a compiled grammar, shared) and [`ParseState`] (one output's position).

use std::sync::Arc;

use rustc_hash::FxHashSet;
use sglr_fsm::{CompileLimits, DEAD};
use sglr_vocab::Vocabulary;

use crate::earley::{initial_set, is_accepting_set, scan, Chart, Item, ParserLimits, ScanScratch, NO_LEX};
use crate::error::GrammarError;
use crate::grammar::{Grammar, Symbol};
use crate::lexemes::LexemeDfas;
use crate::mask::LexemeMaskCache;
use crate::walk_memo::BoundaryWalkMemo;

/// A grammar plus its lazily built lexeme DFAs; immutable apart from that cache, so one
/// matcher serves every request using the grammar (share it in an `Arc`).
#[derive(Debug)]
pub struct GrammarMatcher {
    pub(crate) grammar: Grammar,
    pub(crate) lexemes: LexemeDfas,
    pub(crate) limits: ParserLimits,
    /// Inside-a-lexeme token masks, by (vocabulary, lexeme, DFA state).
    pub(crate) lexeme_masks: LexemeMaskCache,
    /// Tokens that end a lexeme and go on in the grammar, by parse context.
    pub(crate) boundary_walks: BoundaryWalkMemo,
}

/// The Earley chart of the bytes taken so far (one set per byte, plus the initial one).
/// Clone it to keep a position; advancing one clone never affects another.
#[derive(Debug, Clone)]
pub struct ParseState {
    pub(crate) sets: Vec<Arc<[Item]>>,
    /// EOS was taken: nothing but EOS may follow.
    pub(crate) finished: bool,
}

impl Chart for Vec<Arc<[Item]>> {
    fn num_sets(&self) -> usize {
        self.len()
    }
    fn set(&self, index: usize) -> &[Item] {
        &self[index]
    }
}

impl ParseState {
    /// Bytes taken so far.
    pub fn num_bytes(&self) -> usize {
        self.sets.len() - 1
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    pub(crate) fn last(&self) -> &[Item] {
        self.sets.last().expect("a chart always has its initial set")
    }
}

impl GrammarMatcher {
    pub fn new(grammar: Grammar, compile_limits: CompileLimits, limits: ParserLimits) -> Self {
        let lexemes = LexemeDfas::new(grammar.num_lexemes(), compile_limits);
        Self {
            grammar,
            lexemes,
            limits,
            lexeme_masks: LexemeMaskCache::default(),
            boundary_walks: BoundaryWalkMemo::default(),
        }
    }

    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// Lexeme DFAs built so far (laziness is observable).
    pub fn num_lexemes_built(&self) -> usize {
        self.lexemes.num_built()
    }

    /// Lexeme DFAs, memoised lexeme masks and memoised boundary walks.
    pub fn memory_bytes(&self) -> usize {
        self.lexemes.memory_bytes() + self.lexeme_masks.memory_bytes() + self.boundary_walks.memory_bytes()
    }

    /// Boundary walks memoised by parse context, and masks that reused one (observable reuse).
    pub fn boundary_walk_counts(&self) -> (usize, usize) {
        self.boundary_walks.counts()
    }

    /// Memoised lexeme masks with a group of boundaries walked as one suffix trie.
    pub fn num_suffix_tries(&self) -> usize {
        self.lexeme_masks.num_suffix_tries()
    }

    /// Memoised inside-a-lexeme token masks (reuse across steps is observable).
    pub fn num_lexeme_masks(&self) -> usize {
        self.lexeme_masks.len()
    }

    pub fn start(&self) -> Result<ParseState, GrammarError> {
        let set = initial_set(&self.grammar, &self.lexemes, self.limits)?;
        Ok(ParseState { sets: vec![set.into()], finished: false })
    }

    pub fn is_accepting(&self, state: &ParseState) -> bool {
        !state.finished && is_accepting_set(state.last())
    }

    /// Takes `bytes`; false (and `state` unchanged) when they leave the language.
    pub fn advance_bytes(&self, state: &mut ParseState, bytes: &[u8]) -> Result<bool, GrammarError> {
        if state.finished {
            return Ok(bytes.is_empty());
        }
        let before = state.sets.len();
        let mut scratch = ScanScratch::default();
        for &byte in bytes {
            let next = scan(&self.grammar, &self.lexemes, self.limits, &state.sets, byte, &mut scratch);
            match next {
                Ok(set) if !set.is_empty() => state.sets.push(set.into()),
                other => {
                    state.sets.truncate(before);
                    return other.map(|_| false);
                }
            }
        }
        Ok(true)
    }

    /// Takes one token; false (and `state` unchanged) when the grammar forbids it. EOS is
    /// allowed exactly in accepting states and finishes the state.
    pub fn advance_token(
        &self,
        state: &mut ParseState,
        vocabulary: &Vocabulary,
        token: u32,
    ) -> Result<bool, GrammarError> {
        if token as usize >= vocabulary.vocab_size() {
            return Err(GrammarError::TokenOutOfRange { token, vocab_size: vocabulary.vocab_size() as u32 });
        }
        if vocabulary.is_eos(token) {
            // A finished state allows only EOS (like the FSM's terminal state) and stays put.
            if !state.finished && !self.is_accepting(state) {
                return Ok(false);
            }
            state.finished = true;
            return Ok(true);
        }
        match vocabulary.token_bytes(token) {
            Some(bytes) if !state.finished => self.advance_bytes(state, bytes),
            _ => Ok(false),
        }
    }

    /// The longest byte string every continuation of `state` starts with, cut at a UTF-8
    /// character boundary and never past an accepting position (EOS is a choice there).
    pub fn forced_bytes(&self, state: &ParseState, max_len: usize) -> Result<Vec<u8>, GrammarError> {
        let mut probe = state.clone();
        let mut forced = Vec::new();
        while forced.len() < max_len && !probe.finished && !self.is_accepting(&probe) {
            let Some(byte) = self.only_live_byte(probe.last())? else { break };
            if !self.advance_bytes(&mut probe, &[byte])? {
                return Err(GrammarError::Invariant("a forced byte was refused".into()));
            }
            forced.push(byte);
        }
        forced.truncate(utf8_boundary(&forced));
        Ok(forced)
    }

    /// The one byte some in-lexeme item can take, if exactly one byte can be taken at all.
    fn only_live_byte(&self, set: &[Item]) -> Result<Option<u8>, GrammarError> {
        let mut found: Option<u8> = None;
        for item in set.iter().filter(|item| item.lex != NO_LEX) {
            let Symbol::Lexeme(lexeme) = self.grammar.rules[item.rule as usize].rhs[item.dot as usize] else {
                continue;
            };
            let dfa = self.lexemes.get(&self.grammar, lexeme)?;
            for byte in 0..=255u8 {
                if dfa.next(item.lex, byte) != DEAD {
                    if found.is_some_and(|f| f != byte) {
                        return Ok(None);
                    }
                    found = Some(byte);
                }
            }
        }
        Ok(found)
    }

    /// Checks the chart's structure; builds nothing.
    pub fn check_invariants(&self, state: &ParseState) -> Result<(), GrammarError> {
        let fail = |message: String| Err(GrammarError::Invariant(message));
        for (index, set) in state.sets.iter().enumerate() {
            if set.is_empty() {
                return fail(format!("set {index} is empty"));
            }
            let mut seen = FxHashSet::default();
            for item in set.iter() {
                if !seen.insert(*item) {
                    return fail(format!("set {index} repeats {item:?}"));
                }
                let Some(rule) = self.grammar.rules.get(item.rule as usize) else {
                    return fail(format!("set {index}: unknown rule in {item:?}"));
                };
                if item.dot as usize > rule.rhs.len() || item.origin as usize > index {
                    return fail(format!("set {index}: {item:?} has a bad dot or origin"));
                }
                match rule.rhs.get(item.dot as usize) {
                    Some(&Symbol::Lexeme(lexeme)) => {
                        let Some(dfa) = self.lexemes.built(lexeme) else {
                            return fail(format!("set {index}: lexeme {lexeme} used but never built"));
                        };
                        if item.lex as usize >= dfa.num_states() {
                            return fail(format!("set {index}: {item:?} has a bad lexeme state"));
                        }
                    }
                    _ if item.lex != NO_LEX => {
                        return fail(format!("set {index}: {item:?} has a stray lexeme state"))
                    }
                    _ => {}
                }
            }
        }
        if state.finished && !is_accepting_set(state.last()) {
            return fail("finished in a non-accepting position".into());
        }
        Ok(())
    }
}

/// Length of the longest prefix of `bytes` that ends on a UTF-8 character boundary.
fn utf8_boundary(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(error) if error.error_len().is_none() => error.valid_up_to(),
        // NOTE: invalid UTF-8 (a byte-level grammar): cut nothing, the caller decides.
        Err(_) => bytes.len(),
    }
}
