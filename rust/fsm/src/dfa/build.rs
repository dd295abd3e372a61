//! Regex -> [`ByteDfa`]: parsed and compiled to a Thompson NFA by `regex-syntax` /
//! `regex-automata`, determinized by the subset construction (`subset.rs`), by
//! `regex-automata`'s dense builder where the pattern has look-around, or read off directly for
//! a finite language (`finite.rs`).

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};

use super::classes::class_members;
use super::{finite, subset, ByteDfa, CompileLimits, DEAD};
use crate::error::FsmError;

impl ByteDfa {
    pub fn build(pattern: &str, limits: &CompileLimits) -> Result<Self, FsmError> {
        if let Some(strings) = finite::plain_pattern_strings(pattern) {
            if let Some(dfa) = finite::strings_dfa(&strings, limits) {
                return Ok(dfa);
            }
        }
        let hir = Self::hir(pattern, limits)?;
        // A few short strings (an enum's values): their minimal DFA directly.
        if let Some(dfa) = finite::finite_language_dfa(&hir, limits) {
            return Ok(dfa);
        }
        Self::determinized(&Self::nfa_of(&hir, limits)?, limits)
    }

    /// [`ByteDfa::build`] without the fast path for finite languages (its test oracle).
    #[cfg(test)]
    pub(crate) fn build_general(pattern: &str, limits: &CompileLimits) -> Result<Self, FsmError> {
        Self::determinized(&Self::nfa(pattern, limits)?, limits)
    }

    fn determinized(nfa: &thompson::NFA, limits: &CompileLimits) -> Result<Self, FsmError> {
        match subset::determinize(nfa, limits) {
            Some(dfa) => dfa,
            None => Self::from_nfa_dense(nfa, limits),
        }
    }

    fn hir(pattern: &str, limits: &CompileLimits) -> Result<regex_syntax::hir::Hir, FsmError> {
        regex_syntax::ParserBuilder::new()
            .unicode(true)
            .utf8(true)
            .nest_limit(limits.nest_limit)
            .build()
            .parse(pattern)
            .map_err(|e| FsmError::InvalidRegex(e.to_string()))
    }

    /// The pattern's Thompson NFA (UTF-8, no captures).
    #[cfg(test)]
    pub(crate) fn nfa(pattern: &str, limits: &CompileLimits) -> Result<thompson::NFA, FsmError> {
        Self::nfa_of(&Self::hir(pattern, limits)?, limits)
    }

    fn nfa_of(hir: &regex_syntax::hir::Hir, limits: &CompileLimits) -> Result<thompson::NFA, FsmError> {
        thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .nfa_size_limit(Some(limits.nfa_size_limit))
                    .which_captures(WhichCaptures::None),
            )
            .build_from_hir(hir)
            .map_err(|e| match e.size_limit() {
                Some(limit) => FsmError::AutomatonTooLarge { what: "NFA", limit },
                None => FsmError::UnsupportedRegex(e.to_string()),
            })
    }

    /// `regex-automata`'s dense determinizer, for NFAs with look-around (`subset.rs`
    /// handles the rest).
    fn from_nfa_dense(nfa: &thompson::NFA, limits: &CompileLimits) -> Result<Self, FsmError> {
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .accelerate(false)
                    .minimize(false)
                    .dfa_size_limit(Some(limits.dfa_size_limit))
                    .determinize_size_limit(Some(limits.determinize_size_limit)),
            )
            .build_from_nfa(nfa)
            .map_err(|e| {
                if e.is_size_limit_exceeded() {
                    FsmError::AutomatonTooLarge { what: "DFA", limit: limits.dfa_size_limit }
                } else {
                    FsmError::UnsupportedRegex(e.to_string())
                }
            })?;
        Self::from_dense(&dfa)
    }

    /// Both determinizers on one pattern (tests compare their languages).
    #[cfg(test)]
    pub(crate) fn build_both(pattern: &str, limits: &CompileLimits) -> Result<(Self, Self), FsmError> {
        let nfa = Self::nfa(pattern, limits)?;
        let subset = subset::determinize(&nfa, limits).expect("no look-around")?;
        Ok((subset, Self::from_nfa_dense(&nfa, limits)?))
    }

    fn from_dense(dfa: &dense::DFA<Vec<u32>>) -> Result<Self, FsmError> {
        let byte_classes = dfa.byte_classes();
        let mut classes = [0u8; 256];
        for byte in 0..=255u8 {
            classes[byte as usize] = byte_classes.get(byte);
        }
        let num_classes = byte_classes.alphabet_len() - 1;
        let (class_len, class_byte) = class_members(&classes, num_classes);
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| FsmError::UnsupportedRegex(e.to_string()))?;

        // Pass 1: every state reachable from the start, numbered in BFS order.
        let stride2 = dfa.stride2();
        let slot = |id: StateID| id.as_usize() >> stride2;
        let mut number_of: Vec<u32> = Vec::new();
        let mut dense_ids: Vec<StateID> = Vec::new();
        let mut raw_trans: Vec<u32> = Vec::new();
        let mut accepting = Vec::new();
        let intern = |id: StateID, number_of: &mut Vec<u32>, dense_ids: &mut Vec<StateID>| {
            if dfa.is_dead_state(id) || dfa.is_quit_state(id) {
                return DEAD;
            }
            let index = slot(id);
            if index >= number_of.len() {
                number_of.resize(index + 1, DEAD);
            }
            if number_of[index] == DEAD {
                number_of[index] = dense_ids.len() as u32;
                dense_ids.push(id);
            }
            number_of[index]
        };
        if intern(start, &mut number_of, &mut dense_ids) == DEAD {
            return Err(FsmError::EmptyLanguage);
        }
        let mut next_to_expand = 0;
        while next_to_expand < dense_ids.len() {
            let id = dense_ids[next_to_expand];
            next_to_expand += 1;
            accepting.push(dfa.is_match_state(dfa.next_eoi_state(id)));
            for &byte in &class_byte {
                let next = dfa.next_state(id, byte);
                raw_trans.push(intern(next, &mut number_of, &mut dense_ids));
            }
        }
        Self::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
    }
}
