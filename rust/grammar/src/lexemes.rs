//! Lexeme DFAs, each built on first use: a grammar's first mask compiles only the lexemes
//! its first positions allow.

use std::sync::OnceLock;

use sglr_fsm::schema::{key_in, key_not_in};
use sglr_fsm::{ByteDfa, CompileLimits};

use crate::error::GrammarError;
use crate::grammar::{Grammar, Lexeme, LexemeId};

#[derive(Debug)]
pub(crate) struct LexemeDfas {
    dfas: Vec<OnceLock<Result<ByteDfa, GrammarError>>>,
    /// Per built lexeme, [`ByteDfa::accept_distances`] (computed on the first mask that needs it).
    distances: Vec<OnceLock<Vec<u16>>>,
    limits: CompileLimits,
}

impl LexemeDfas {
    pub fn new(num_lexemes: usize, limits: CompileLimits) -> Self {
        Self {
            dfas: (0..num_lexemes).map(|_| OnceLock::new()).collect(),
            distances: (0..num_lexemes).map(|_| OnceLock::new()).collect(),
            limits,
        }
    }

    /// The fewest bytes from each DFA state of `lexeme` to the lexeme's end.
    pub fn accept_distances(&self, grammar: &Grammar, lexeme: LexemeId) -> Result<&[u16], GrammarError> {
        let dfa = self.get(grammar, lexeme)?;
        Ok(self.distances[lexeme as usize].get_or_init(|| dfa.accept_distances()))
    }

    pub fn get(&self, grammar: &Grammar, lexeme: LexemeId) -> Result<&ByteDfa, GrammarError> {
        self.dfas[lexeme as usize]
            .get_or_init(|| build(grammar.lexeme(lexeme), &self.limits))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Already built lexemes (for invariant checks, which must not build anything).
    pub fn built(&self, lexeme: LexemeId) -> Option<&ByteDfa> {
        self.dfas[lexeme as usize].get().and_then(|r| r.as_ref().ok())
    }

    pub fn num_built(&self) -> usize {
        self.dfas.iter().filter(|d| d.get().is_some()).count()
    }

    pub fn memory_bytes(&self) -> usize {
        let distances: usize =
            self.distances.iter().filter_map(OnceLock::get).map(|d| d.capacity() * 2).sum();
        self.dfas.iter().filter_map(|d| d.get()?.as_ref().ok()).map(ByteDfa::memory_bytes).sum::<usize>()
            + distances
    }
}

/// Most product states of an intersection lexeme (keys and bounded strings stay far below).
const MAX_INTERSECTION_STATES: usize = 1 << 16;

/// The DFA of one lexeme (an intersection builds its parts, then their product).
pub(crate) fn build(lexeme: &Lexeme, limits: &CompileLimits) -> Result<ByteDfa, GrammarError> {
    let one = |pattern: &String| {
        ByteDfa::build(pattern, limits)
            .map_err(|source| GrammarError::Lexeme { pattern: pattern.clone(), source })
    };
    match lexeme {
        Lexeme::Regex(pattern) => one(pattern),
        Lexeme::Intersection { all, none } => {
            let all_dfas: Vec<ByteDfa> = all.iter().map(one).collect::<Result<_, _>>()?;
            let mut none_dfas = Vec::new();
            for pattern in none {
                match ByteDfa::build(pattern, limits) {
                    // Subtracting nothing changes nothing.
                    Err(sglr_fsm::FsmError::EmptyLanguage) => {}
                    other => none_dfas.push(
                        other.map_err(|source| GrammarError::Lexeme { pattern: pattern.clone(), source })?,
                    ),
                }
            }
            let all_refs: Vec<&ByteDfa> = all_dfas.iter().collect();
            let none_refs: Vec<&ByteDfa> = none_dfas.iter().collect();
            ByteDfa::intersect(&all_refs, &none_refs, MAX_INTERSECTION_STATES)
                .map_err(|source| GrammarError::Lexeme { pattern: format!("{all:?} minus {none:?}"), source })
        }
        Lexeme::UndeclaredKey { declared } => {
            let any_key = one(&key_not_in(&[]))?;
            if declared.is_empty() {
                return Ok(any_key);
            }
            let names: Vec<&str> = declared.iter().map(String::as_str).collect();
            let declared_keys = one(&key_in(&names))?;
            ByteDfa::intersect(&[&any_key], &[&declared_keys], MAX_INTERSECTION_STATES).map_err(|source| {
                GrammarError::Lexeme { pattern: format!("keys other than {declared:?}"), source }
            })
        }
        Lexeme::MultipleOf { divisor, all } => {
            let describe = || format!("multiples of {divisor} in {all:?}");
            let multiples = ByteDfa::decimal_multiples(*divisor)
                .map_err(|source| GrammarError::Lexeme { pattern: describe(), source })?;
            let all_dfas: Vec<ByteDfa> = all.iter().map(one).collect::<Result<_, _>>()?;
            let mut refs: Vec<&ByteDfa> = vec![&multiples];
            refs.extend(all_dfas.iter());
            ByteDfa::intersect(&refs, &[], MAX_INTERSECTION_STATES)
                .map_err(|source| GrammarError::Lexeme { pattern: describe(), source })
        }
    }
}
