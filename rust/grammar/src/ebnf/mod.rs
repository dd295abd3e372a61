//! EBNF grammar text (GBNF `name ::= ...` and Lark-style `name: ...`) -> [`Grammar`].
//!
//! Supported: alternation `|`, grouping `( )`, postfix `?` `*` `+` `{m}` `{m,}` `{m,n}`,
//! string literals `"..."` / `'...'`, character classes `[a-z]` `[^"\\]`, Lark regex
//! terminals `/.../`, comments `#` and `//`. The start rule is `root`, else `start`, else the
//! first rule. Errors are [`GrammarError::Syntax`] with a 1-based line and column.

mod ast;
mod lower;
mod parse;
mod print;

use crate::error::GrammarError;
use crate::grammar::Grammar;

pub use print::grammar_to_ebnf;

/// Parses EBNF text into a grammar.
pub fn parse_ebnf(text: &str) -> Result<Grammar, GrammarError> {
    let rules = parse::parse_rules(text)?;
    lower::lower(&rules)
}
