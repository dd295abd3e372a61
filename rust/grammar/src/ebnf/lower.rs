//! Parsed rules -> grammar. Every sub-expression without rule references becomes one lexeme
//! (one regex, so one DFA), and adjacent ones in a sequence merge: fewer, longer lexemes mean
//! fewer Earley items per byte. Only what references rules becomes nonterminals.

use rustc_hash::FxHashMap;

use crate::ebnf::ast::{Expr, RuleDef};
use crate::ebnf::parse::error_at;
use crate::error::GrammarError;
use crate::grammar::{Grammar, GrammarBuilder, NonterminalId, Symbol};

/// Largest number of copies a `{m,n}` of a rule reference expands to.
const MAX_EXPANSION: u32 = 1000;
/// Most grammar symbols the repetitions of one grammar expand to in all: bounds multiply when
/// repetitions nest (`a{1000}{1000}{1000}` would be 10^9 symbols from a few bytes of text).
const MAX_EXPANDED_SYMBOLS: usize = 100_000;

pub(crate) fn lower(rules: &[RuleDef]) -> Result<Grammar, GrammarError> {
    let mut first_definition: FxHashMap<&str, &RuleDef> = FxHashMap::default();
    for rule in rules {
        first_definition.entry(&rule.name).or_insert(rule);
    }
    let mut lowering = Lowering { builder: GrammarBuilder::new(), num_expanded: 0 };
    for rule in rules {
        check_references(&rule.body, &first_definition)?;
        let lhs = lowering.builder.nonterminal(&rule.name);
        lowering.define(lhs, &rule.body)?;
    }
    let start = ["root", "start"]
        .into_iter()
        .find(|name| first_definition.contains_key(name))
        .unwrap_or(&rules[0].name);
    let start = lowering.builder.nonterminal(start);
    lowering.builder.build(start)
}

fn check_references(expr: &Expr, defined: &FxHashMap<&str, &RuleDef>) -> Result<(), GrammarError> {
    match expr {
        Expr::Reference { name, at } if !defined.contains_key(name.as_str()) => {
            Err(error_at(*at, format!("undefined rule '{name}'")))
        }
        Expr::Sequence(items) | Expr::Alternation(items) => {
            items.iter().try_for_each(|item| check_references(item, defined))
        }
        Expr::Repeat { inner, .. } => check_references(inner, defined),
        _ => Ok(()),
    }
}

struct Lowering {
    builder: GrammarBuilder,
    /// Symbols the repetitions expanded to so far (bounded by [`MAX_EXPANDED_SYMBOLS`]).
    num_expanded: usize,
}

impl Lowering {
    /// Adds the rules `lhs -> expr` (one per top-level alternative).
    fn define(&mut self, lhs: NonterminalId, expr: &Expr) -> Result<(), GrammarError> {
        match expr {
            Expr::Alternation(branches) if regex_of(expr).is_none() => {
                for branch in branches {
                    let rhs = self.symbols(branch)?;
                    self.builder.rule(lhs, rhs);
                }
            }
            _ => {
                let rhs = self.symbols(expr)?;
                self.builder.rule(lhs, rhs);
            }
        }
        Ok(())
    }

    fn symbols(&mut self, expr: &Expr) -> Result<Vec<Symbol>, GrammarError> {
        if let Some(pattern) = regex_of(expr) {
            if pattern.is_empty() {
                return Ok(Vec::new());
            }
            return Ok(vec![Symbol::Lexeme(self.builder.lexeme(&pattern))]);
        }
        match expr {
            Expr::Reference { name, .. } => Ok(vec![Symbol::Nonterminal(self.builder.nonterminal(name))]),
            Expr::Sequence(items) => {
                let mut symbols = Vec::new();
                let mut run = String::new();
                for item in items {
                    match regex_of(item) {
                        Some(pattern) => run.push_str(&pattern),
                        None => {
                            self.flush(&mut run, &mut symbols);
                            symbols.extend(self.symbols(item)?);
                        }
                    }
                }
                self.flush(&mut run, &mut symbols);
                Ok(symbols)
            }
            Expr::Alternation(_) => {
                let fresh = self.builder.fresh("alt");
                self.define(fresh, expr)?;
                Ok(vec![Symbol::Nonterminal(fresh)])
            }
            Expr::Repeat { inner, min, max } => self.repeat(inner, *min, *max),
            Expr::Literal(_) | Expr::Class { .. } | Expr::Regex(_) => unreachable!("regular"),
        }
    }

    fn flush(&mut self, run: &mut String, symbols: &mut Vec<Symbol>) {
        if !run.is_empty() {
            symbols.push(Symbol::Lexeme(self.builder.lexeme(run)));
            run.clear();
        }
    }

    /// `inner{min,max}` over a rule reference: `min` copies, then a left-recursive star or a
    /// chain of optional copies.
    fn repeat(&mut self, inner: &Expr, min: u32, max: Option<u32>) -> Result<Vec<Symbol>, GrammarError> {
        if max.unwrap_or(min) > MAX_EXPANSION {
            return Err(GrammarError::GrammarTooLarge(format!("repetition bound above {MAX_EXPANSION}")));
        }
        let item = self.symbols(inner)?;
        let num_copies = max.unwrap_or(min).max(1) as usize;
        self.num_expanded = self.num_expanded.saturating_add(num_copies.saturating_mul(item.len().max(1)));
        if self.num_expanded > MAX_EXPANDED_SYMBOLS {
            return Err(GrammarError::GrammarTooLarge(format!(
                "repetitions expand to more than {MAX_EXPANDED_SYMBOLS} grammar symbols"
            )));
        }
        let mut symbols = Vec::new();
        for _ in 0..min {
            symbols.extend(item.iter().copied());
        }
        match max {
            None => {
                // star -> ε | star item
                let star = self.builder.fresh("star");
                self.builder.rule(star, Vec::new());
                let mut rhs = vec![Symbol::Nonterminal(star)];
                rhs.extend(item.iter().copied());
                self.builder.rule(star, rhs);
                symbols.push(Symbol::Nonterminal(star));
            }
            Some(max) => {
                // opt_k -> ε | item opt_{k-1}: up to max - min more copies.
                let mut tail: Option<NonterminalId> = None;
                for _ in min..max {
                    let optional = self.builder.fresh("opt");
                    self.builder.rule(optional, Vec::new());
                    let mut rhs = item.clone();
                    rhs.extend(tail.map(Symbol::Nonterminal));
                    self.builder.rule(optional, rhs);
                    tail = Some(optional);
                }
                symbols.extend(tail.map(Symbol::Nonterminal));
            }
        }
        Ok(symbols)
    }
}

/// The regex of an expression that references no rule ("" for the empty sequence).
fn regex_of(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Reference { .. } => None,
        Expr::Literal(text) => Some(text.chars().map(escape_char).collect()),
        Expr::Class { negated, ranges } => {
            let mut class = String::from(if *negated { "[^" } else { "[" });
            for &(low, high) in ranges {
                class.push_str(&escape_char(low));
                if high != low {
                    class.push('-');
                    class.push_str(&escape_char(high));
                }
            }
            class.push(']');
            Some(class)
        }
        Expr::Regex(pattern) => Some(format!("(?:{pattern})")),
        Expr::Sequence(items) => items.iter().map(regex_of).collect::<Option<Vec<_>>>().map(|p| p.concat()),
        Expr::Alternation(branches) => {
            let parts = branches.iter().map(regex_of).collect::<Option<Vec<_>>>()?;
            Some(format!("(?:{})", parts.join("|")))
        }
        Expr::Repeat { inner, min, max } => {
            let inner = regex_of(inner)?;
            if inner.is_empty() {
                return Some(String::new());
            }
            let bounds = match (min, max) {
                (0, Some(1)) => "?".to_string(),
                (0, None) => "*".to_string(),
                (1, None) => "+".to_string(),
                (min, None) => format!("{{{min},}}"),
                (min, Some(max)) => format!("{{{min},{max}}}"),
            };
            Some(format!("(?:{inner}){bounds}"))
        }
    }
}

/// A character as a regex that matches exactly it (hex escapes for anything not alphanumeric).
fn escape_char(c: char) -> String {
    if c.is_ascii_alphanumeric() {
        c.to_string()
    } else {
        format!("\\x{{{:X}}}", c as u32)
    }
}
