//! Lexeme DFAs, each built on first use: a grammar's first mask compiles only the lexemes
//! its first positions allow.

use std::sync::OnceLock;

use sglr_fsm::{ByteDfa, CompileLimits};

use crate::error::GrammarError;
use crate::grammar::{Grammar, LexemeId};

#[derive(Debug)]
pub(crate) struct LexemeDfas {
    dfas: Vec<OnceLock<Result<ByteDfa, GrammarError>>>,
    limits: CompileLimits,
}

impl LexemeDfas {
    pub fn new(num_lexemes: usize, limits: CompileLimits) -> Self {
        Self { dfas: (0..num_lexemes).map(|_| OnceLock::new()).collect(), limits }
    }

    pub fn get(&self, grammar: &Grammar, lexeme: LexemeId) -> Result<&ByteDfa, GrammarError> {
        self.dfas[lexeme as usize]
            .get_or_init(|| {
                let pattern = grammar.lexeme_pattern(lexeme);
                ByteDfa::build(pattern, &self.limits)
                    .map_err(|source| GrammarError::Lexeme { pattern: pattern.to_string(), source })
            })
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
        self.dfas.iter().filter_map(|d| d.get()?.as_ref().ok()).map(ByteDfa::memory_bytes).sum()
    }
}
