//! [`Grammar`] -> GBNF text that `parse_ebnf` reads back as the same language, so a compiled
//! grammar (e.g. a recursive JSON schema's) can be embedded in a larger EBNF grammar that
//! the caller writes around it (OpenAI tool calls wrap each tool's arguments schema).

use crate::error::GrammarError;
use crate::grammar::{Grammar, Lexeme, Symbol};
use sglr_fsm::FsmError;

/// The grammar as GBNF rules: its start rule is `name`, every other nonterminal `name_<id>`
/// (so two printed grammars with different names never clash), each lexeme a `/regex/`.
/// A lexeme with no regex text (an intersection or a `multipleOf` automaton) cannot be
/// printed: that is a `GrammarError::Schema` naming the keyword that made it.
pub fn grammar_to_ebnf(grammar: &Grammar, name: &str) -> Result<String, GrammarError> {
    let rule_name = |id: u32| -> String {
        if id == grammar.rule(0).lhs {
            name.to_string()
        } else {
            format!("{name}_{id}")
        }
    };
    let mut text = String::new();
    for index in 0..grammar.num_rules() as u32 {
        let rule = grammar.rule(index);
        text.push_str(&rule_name(rule.lhs));
        text.push_str(" ::=");
        if rule.rhs.is_empty() {
            text.push_str(" \"\"");
        }
        for symbol in &rule.rhs {
            text.push(' ');
            match *symbol {
                Symbol::Nonterminal(id) => text.push_str(&rule_name(id)),
                Symbol::Lexeme(id) => match grammar.lexeme_pattern(id) {
                    Some(pattern) => text.push_str(&regex_terminal(&pattern)),
                    None => return Err(unprintable(grammar.lexeme(id))),
                },
            }
        }
        text.push('\n');
    }
    Ok(text)
}

fn unprintable(lexeme: &Lexeme) -> GrammarError {
    let keyword = match lexeme {
        Lexeme::MultipleOf { .. } => "multipleOf",
        Lexeme::CountedString { .. } => "maxLength",
        _ => "patternProperties/propertyNames/pattern",
    };
    GrammarError::Schema(FsmError::UnsupportedSchema {
        keyword: keyword.to_string(),
        path: String::new(),
        reason: "its automaton has no regex text, so the grammar cannot be embedded as EBNF".to_string(),
    })
}

/// `/pattern/` with `/` and line breaks escaped (the terminal ends at an unescaped `/` and
/// may not span lines); every other escape is kept as written.
fn regex_terminal(pattern: &str) -> String {
    let mut out = String::from("/");
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                // `\<line break>` is the line break itself, written as its escape.
                Some(next) => match escape_line_break(next) {
                    Some(escaped) => out.push_str(&escaped),
                    None => {
                        out.push('\\');
                        out.push(next);
                    }
                },
                None => out.push('\\'),
            },
            '/' => out.push_str("\\/"),
            c => out.push_str(&escape_line_break(c).unwrap_or_else(|| c.to_string())),
        }
    }
    out.push('/');
    out
}

fn escape_line_break(c: char) -> Option<String> {
    match c {
        '\n' => Some("\\n".into()),
        '\r' => Some("\\r".into()),
        _ => None,
    }
}
