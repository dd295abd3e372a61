//! A context-free grammar whose terminals are lexemes (regexes over bytes), with integer ids.
//!
//! Built with [`GrammarBuilder`]; `build` adds an augmented start rule (`rule 0: S' -> start`),
//! and drops rules that can never derive a string (so every live parser state can still reach
//! an accepting one, which keeps masks free of dead ends).

use std::borrow::Cow;

use rustc_hash::FxHashMap;
use sglr_fsm::json::{json_string_regex, key_not_in};

use crate::error::GrammarError;

/// Index of a nonterminal.
pub type NonterminalId = u32;
/// Index of a lexeme (a regex terminal).
pub type LexemeId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Symbol {
    Nonterminal(NonterminalId),
    Lexeme(LexemeId),
}

/// A terminal's language: one regex, or (for what regex syntax cannot say) the strings all
/// of `all` match and none of `none` do, built as a product DFA.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Lexeme {
    Regex(String),
    /// The bytes of `text` exactly, then what the regex `then` matches (a declared key and its
    /// colon): its DFA is `text`'s chain in front of `then`'s (which the process keeps), built
    /// without a regex.
    Literal {
        text: String,
        then: String,
    },
    Intersection {
        all: Vec<String>,
        none: Vec<String>,
    },
    /// Multiples that every one of `all` matches: of `divisor`, integers in JSON spelling, when
    /// `scale` is `None`; of `divisor` / 10^k, numbers without exponent, when it is `Some(k)`.
    MultipleOf {
        divisor: u32,
        scale: Option<u32>,
        all: Vec<String>,
    },
    /// JSON strings (with quotes) of `min_len` to `max_len` characters that every one of `all`
    /// also matches: the length counted, not unrolled in a regex. Alone, the count is kept
    /// beside the character's state (`sglr_fsm::json::json_string_counter`: constant size
    /// whatever the bound); next to a regex, a table linear in the bound
    /// (`sglr_fsm::json::json_string_of_length`) in the product.
    CountedString {
        min_len: usize,
        max_len: Option<usize>,
        all: Vec<String>,
        /// An optional space before the opening quote (only with `all` empty: a value that
        /// takes the space after its key's colon, `sglr_fsm::json::json_string_counter_after_space`).
        space_before: bool,
    },
    /// JSON keys (with quotes) whose decoded text is none of `declared`, in any spelling. Its
    /// regex is `key_not_in`'s (printed as EBNF); its DFA, any key minus the declared names'
    /// spellings (`key_in`), is built directly (`sglr_fsm::json::undeclared_key_dfa`),
    /// several times smaller and faster to build than that regex's DFA.
    UndeclaredKey {
        declared: Vec<String>,
        /// Regexes every such key must also match (`patternProperties` patterns, `propertyNames`)
        /// and must not (the other patterns): a product with the keys' DFA, unprintable.
        all: Vec<String>,
        none: Vec<String>,
    },
}

/// The default whitespace between JSON tokens (one optional space) as the schema grammar writes
/// it: what a counted string with `space_before` takes before its quote.
pub(crate) const OPTIONAL_SPACE: &str = "(?:[ ]?)";

impl Lexeme {
    /// Appends a byte string that tells this lexeme's definition from every other's (a variant
    /// tag, then each field, strings and lists length-prefixed): a process-wide cache key, far
    /// cheaper to write than the `Debug` text.
    pub(crate) fn write_key(&self, out: &mut Vec<u8>) {
        fn number(out: &mut Vec<u8>, value: u64) {
            out.extend_from_slice(&value.to_le_bytes());
        }
        fn text(out: &mut Vec<u8>, value: &str) {
            number(out, value.len() as u64);
            out.extend_from_slice(value.as_bytes());
        }
        fn texts(out: &mut Vec<u8>, values: &[String]) {
            number(out, values.len() as u64);
            values.iter().for_each(|value| text(out, value));
        }
        let optional = |value: Option<u64>| value.map_or(u64::MAX, |v| v.min(u64::MAX - 1));
        match self {
            Lexeme::Regex(pattern) => {
                out.push(0);
                text(out, pattern);
            }
            Lexeme::Literal { text: literal, then } => {
                out.push(1);
                text(out, literal);
                text(out, then);
            }
            Lexeme::Intersection { all, none } => {
                out.push(2);
                texts(out, all);
                texts(out, none);
            }
            Lexeme::MultipleOf { divisor, scale, all } => {
                out.push(3);
                number(out, u64::from(*divisor));
                number(out, optional(scale.map(u64::from)));
                texts(out, all);
            }
            Lexeme::CountedString { min_len, max_len, all, space_before } => {
                out.push(4);
                number(out, *min_len as u64);
                number(out, optional(max_len.map(|max| max as u64)));
                texts(out, all);
                out.push(u8::from(*space_before));
            }
            Lexeme::UndeclaredKey { declared, all, none } => {
                out.push(5);
                texts(out, declared);
                texts(out, all);
                texts(out, none);
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub lhs: NonterminalId,
    pub rhs: Vec<Symbol>,
}

/// Rule 0 is the augmented start rule `S' -> start`; its completion means "accept".
#[derive(Debug, Clone)]
pub struct Grammar {
    pub(crate) rules: Vec<Rule>,
    /// Rules of each nonterminal, by id.
    pub(crate) rules_by_lhs: Vec<Vec<u32>>,
    pub(crate) names: Vec<String>,
    /// Language of each lexeme (full match over bytes).
    pub(crate) lexemes: Vec<Lexeme>,
}

impl Grammar {
    pub fn num_rules(&self) -> usize {
        self.rules.len()
    }

    pub fn num_lexemes(&self) -> usize {
        self.lexemes.len()
    }

    pub fn lexeme(&self, lexeme: LexemeId) -> &Lexeme {
        &self.lexemes[lexeme as usize]
    }

    /// The regex of a lexeme; `None` for an intersection.
    pub fn lexeme_pattern(&self, lexeme: LexemeId) -> Option<Cow<'_, str>> {
        match &self.lexemes[lexeme as usize] {
            Lexeme::Regex(pattern) => Some(Cow::Borrowed(pattern)),
            Lexeme::Literal { text, then } => {
                Some(Cow::Owned(format!("{}{then}", regex_syntax::escape(text))))
            }
            Lexeme::UndeclaredKey { declared, all, none } if all.is_empty() && none.is_empty() => {
                let names: Vec<&str> = declared.iter().map(String::as_str).collect();
                Some(Cow::Owned(key_not_in(&names)))
            }
            Lexeme::CountedString { min_len, max_len, all, space_before } if all.is_empty() => {
                let space = if *space_before { OPTIONAL_SPACE } else { "" };
                Some(Cow::Owned(format!("{space}{}", json_string_regex(*min_len, *max_len))))
            }
            Lexeme::Intersection { .. }
            | Lexeme::MultipleOf { .. }
            | Lexeme::CountedString { .. }
            | Lexeme::UndeclaredKey { .. } => None,
        }
    }

    pub fn rule(&self, rule: u32) -> &Rule {
        &self.rules[rule as usize]
    }

    pub fn nonterminal_name(&self, id: NonterminalId) -> &str {
        &self.names[id as usize]
    }
}

/// Sizes of a [`GrammarBuilder`] at one point (everything is appended, so sizes say what to drop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuilderCheckpoint {
    names: usize,
    lexemes: usize,
    rules: usize,
}

impl BuilderCheckpoint {
    /// Nonterminals that existed at the checkpoint (ids below this one).
    pub fn num_nonterminals(&self) -> usize {
        self.names
    }
}

/// Collects nonterminals, lexemes (deduplicated by pattern) and rules.
#[derive(Debug, Default, Clone)]
pub struct GrammarBuilder {
    names: Vec<String>,
    by_name: FxHashMap<String, NonterminalId>,
    defined: Vec<bool>,
    lexemes: Vec<Lexeme>,
    lexeme_ids: FxHashMap<Lexeme, LexemeId>,
    rules: Vec<Rule>,
}

impl GrammarBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of nonterminal `name`, created on first mention.
    pub fn nonterminal(&mut self, name: &str) -> NonterminalId {
        if let Some(&id) = self.by_name.get(name) {
            return id;
        }
        let id = self.names.len() as NonterminalId;
        self.names.push(name.to_string());
        self.defined.push(false);
        self.by_name.insert(name.to_string(), id);
        id
    }

    /// A fresh nonterminal for a desugared sub-expression (its name cannot clash: `#`).
    pub fn fresh(&mut self, hint: &str) -> NonterminalId {
        let name = format!("{hint}#{}", self.names.len());
        self.nonterminal(&name)
    }

    /// The id of the lexeme matching exactly `pattern` (a regex over the whole lexeme).
    pub fn lexeme(&mut self, pattern: &str) -> LexemeId {
        self.lexeme_of(Lexeme::Regex(pattern.to_string()))
    }

    /// The id of a lexeme (deduplicated by its definition).
    pub fn lexeme_of(&mut self, lexeme: Lexeme) -> LexemeId {
        if let Some(&id) = self.lexeme_ids.get(&lexeme) {
            return id;
        }
        let id = self.lexemes.len() as LexemeId;
        self.lexemes.push(lexeme.clone());
        self.lexeme_ids.insert(lexeme, id);
        id
    }

    pub fn rule(&mut self, lhs: NonterminalId, rhs: Vec<Symbol>) {
        self.defined[lhs as usize] = true;
        self.rules.push(Rule { lhs, rhs });
    }

    /// Where the builder stands, for [`GrammarBuilder::rollback`].
    pub fn checkpoint(&self) -> BuilderCheckpoint {
        BuilderCheckpoint { names: self.names.len(), lexemes: self.lexemes.len(), rules: self.rules.len() }
    }

    /// Drops every nonterminal, lexeme and rule added since `checkpoint` (an attempt that was
    /// refused), without copying the builder before each attempt.
    pub fn rollback(&mut self, checkpoint: &BuilderCheckpoint) {
        self.names.truncate(checkpoint.names);
        self.by_name.retain(|_, id| (*id as usize) < checkpoint.names);
        self.lexemes.truncate(checkpoint.lexemes);
        self.lexeme_ids.retain(|_, id| (*id as usize) < checkpoint.lexemes);
        self.rules.truncate(checkpoint.rules);
        // A rule of the attempt may have defined an older nonterminal: recount from the rules kept.
        self.defined = vec![false; self.names.len()];
        for rule in &self.rules {
            self.defined[rule.lhs as usize] = true;
        }
    }

    pub fn is_defined(&self, name: &str) -> bool {
        self.by_name.get(name).is_some_and(|&id| self.defined[id as usize])
    }

    /// The grammar deriving from `start`.
    pub fn build(mut self, start: NonterminalId) -> Result<Grammar, GrammarError> {
        if let Some(id) = self.defined.iter().position(|d| !d) {
            return Err(GrammarError::UndefinedRule(self.names[id].clone()));
        }
        if self.rules.len() >= (u32::MAX / 2) as usize || self.lexemes.len() >= (u32::MAX / 2) as usize {
            return Err(GrammarError::GrammarTooLarge(format!("{} rules", self.rules.len())));
        }
        let augmented = self.names.len() as NonterminalId;
        self.names.push("<start>".into());
        let mut rules = vec![Rule { lhs: augmented, rhs: vec![Symbol::Nonterminal(start)] }];
        rules.extend(self.rules);
        let num_nonterminals = self.names.len();

        // Productive nonterminals: some rule's right-hand side is all lexemes / productive.
        // NOTE: every lexeme is productive: its DFA keeps only live states and an empty
        // language is refused when it is built.
        let mut productive = vec![false; num_nonterminals];
        let mut changed = true;
        while changed {
            changed = false;
            for rule in &rules {
                if !productive[rule.lhs as usize] && rule.rhs.iter().all(|s| is_productive(s, &productive)) {
                    productive[rule.lhs as usize] = true;
                    changed = true;
                }
            }
        }
        if !productive[augmented as usize] {
            return Err(GrammarError::EmptyLanguage);
        }
        rules.retain(|rule| rule.rhs.iter().all(|s| is_productive(s, &productive)));

        let mut rules_by_lhs = vec![Vec::new(); num_nonterminals];
        for (index, rule) in rules.iter().enumerate() {
            rules_by_lhs[rule.lhs as usize].push(index as u32);
        }
        Ok(Grammar { rules, rules_by_lhs, names: self.names, lexemes: self.lexemes })
    }
}

fn is_productive(symbol: &Symbol, productive: &[bool]) -> bool {
    match *symbol {
        Symbol::Lexeme(_) => true,
        Symbol::Nonterminal(n) => productive[n as usize],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn describe(grammar: &Grammar) -> String {
        format!("{:?} {:?} {:?}", grammar.names, grammar.lexemes, grammar.rules)
    }

    /// A rolled back attempt leaves exactly the grammar the builder held before it, even where
    /// the attempt reused (and defined) older nonterminals and lexemes.
    #[test]
    fn rollback_forgets_the_attempt() {
        let mut builder = GrammarBuilder::new();
        let start = builder.nonterminal("start");
        let pending = builder.nonterminal("pending");
        let a = builder.lexeme("a");
        builder.rule(start, vec![Symbol::Lexeme(a), Symbol::Nonterminal(pending)]);
        let mut before = builder.clone();
        before.rule(pending, vec![Symbol::Lexeme(a)]);
        let checkpoint = builder.checkpoint();
        let fresh = builder.fresh("attempt");
        let b = builder.lexeme("b");
        builder.rule(fresh, vec![Symbol::Lexeme(b), Symbol::Lexeme(a)]);
        builder.rule(pending, vec![Symbol::Nonterminal(fresh)]);
        builder.rollback(&checkpoint);
        assert!(!builder.is_defined("pending"));
        assert!(!builder.is_defined(&format!("attempt#{fresh}")));
        // Same ids for what comes next, and the same grammar.
        assert_eq!(builder.lexeme("a"), a);
        assert_eq!(builder.lexeme("b"), b);
        assert_eq!(builder.fresh("attempt"), fresh);
        builder.rollback(&checkpoint);
        builder.rule(pending, vec![Symbol::Lexeme(a)]);
        assert_eq!(describe(&builder.build(start).unwrap()), describe(&before.build(start).unwrap()));
    }
}
