//! Context-free grammar constraints for constrained decoding.
//!
//! A [`Grammar`] is a CFG whose terminals are lexemes: regexes over bytes, each compiled to a
//! DFA (rust/fsm's `ByteDfa`, or its `CountedDfa` for a string with length bounds:
//! `lexeme_dfa.rs`) the first time the parser needs it. An Earley parser runs over
//! lexemes with every lexeme boundary allowed (see `earley.rs`), one set per byte, so the
//! state after any byte string is a single chart ([`ParseState`]). Token masks walk the
//! vocabulary trie against the chart (`mask/`). Grammar text comes from EBNF/GBNF
//! (`ebnf`). Pure Rust, integer ids, typed errors, bounded memory ([`ParserLimits`]).

mod earley;
pub mod ebnf;
mod error;
mod grammar;
mod lexeme_dfa;
mod lexemes;
mod mask;
mod matcher;
pub mod schema;
mod structural_tag;
mod suffix_trie;
mod walk_memo;

pub use earley::ParserLimits;
pub use ebnf::{grammar_to_ebnf, parse_ebnf};
pub use error::GrammarError;
pub use grammar::{
    BuilderCheckpoint, Grammar, GrammarBuilder, Lexeme, LexemeId, NonterminalId, Rule, Symbol,
};
pub use matcher::{GrammarMatcher, ParseState};
pub use schema::json_schema_to_grammar;
pub use structural_tag::{structural_tag_to_grammar, StructuralTag, TagStructure};
