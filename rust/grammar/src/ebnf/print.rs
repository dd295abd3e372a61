//! [`Grammar`] -> GBNF text that `parse_ebnf` reads back as the same language, so a compiled
//! grammar (e.g. a recursive JSON schema's) can be embedded in a larger EBNF grammar that
//! the caller writes around it (OpenAI tool calls wrap each tool's arguments schema).

use crate::grammar::{Grammar, Symbol};

/// The grammar as GBNF rules: its start rule is `name`, every other nonterminal `name_<id>`
/// (so two printed grammars with different names never clash), each lexeme a `/regex/`.
pub fn grammar_to_ebnf(grammar: &Grammar, name: &str) -> String {
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
                Symbol::Lexeme(id) => text.push_str(&regex_terminal(grammar.lexeme_pattern(id))),
            }
        }
        text.push('\n');
    }
    text
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
