//! Earley sets over lexemes, one set per input byte.
//!
//! Lexeme boundaries: every boundary is allowed. An item whose next symbol is a lexeme carries
//! that lexeme's DFA state (`lex`); a byte steps it, and whenever the DFA accepts, the item is
//! *also* advanced past the lexeme. So the parser accepts exactly the strings of the grammar
//! with each lexeme replaced by its regular language (no maximal munch, no lexer ambiguity to
//! resolve), and sets stay deterministic: the state after a byte string is one chart.

use rustc_hash::FxHashSet;
use sglr_fsm::DEAD;

use crate::error::GrammarError;
use crate::grammar::{Grammar, NonterminalId, Symbol};
use crate::lexemes::LexemeDfas;

/// `lex` of an item whose next symbol is not a lexeme.
pub(crate) const NO_LEX: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Item {
    pub rule: u32,
    pub dot: u32,
    /// Index of the set the rule was predicted in.
    pub origin: u32,
    /// DFA state inside the next lexeme, or `NO_LEX`.
    pub lex: u32,
}

/// Read access to the sets of a chart (the committed ones plus a walk's scratch ones).
pub(crate) trait Chart {
    fn num_sets(&self) -> usize;
    fn set(&self, index: usize) -> &[Item];
}

/// Bounds that keep a hostile grammar from exhausting memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParserLimits {
    /// Items in one Earley set.
    pub max_items_per_set: usize,
}

impl Default for ParserLimits {
    fn default() -> Self {
        Self { max_items_per_set: 20_000 }
    }
}

/// The hash sets one set's closure needs, kept between scans so that a mask walk (one scan per
/// trie node) does not allocate and grow them again for every node.
#[derive(Debug, Default)]
pub(crate) struct ScanScratch {
    seen: FxHashSet<Item>,
    /// Nonterminals already completed with origin `index` (an item waiting on one of them,
    /// added later, is advanced at once: empty derivations).
    completed_here: FxHashSet<NonterminalId>,
    predicted: FxHashSet<NonterminalId>,
}

/// Builds one closed set: items are added, then predicted and completed to a fixed point.
struct SetBuilder<'a> {
    grammar: &'a Grammar,
    lexemes: &'a LexemeDfas,
    limits: ParserLimits,
    /// Index of the set being built.
    index: u32,
    items: Vec<Item>,
    seen: &'a mut FxHashSet<Item>,
    completed_here: &'a mut FxHashSet<NonterminalId>,
    predicted: &'a mut FxHashSet<NonterminalId>,
}

impl<'a> SetBuilder<'a> {
    fn new(
        grammar: &'a Grammar,
        lexemes: &'a LexemeDfas,
        limits: ParserLimits,
        index: u32,
        scratch: &'a mut ScanScratch,
    ) -> Self {
        scratch.seen.clear();
        scratch.completed_here.clear();
        scratch.predicted.clear();
        Self {
            grammar,
            lexemes,
            limits,
            index,
            items: Vec::new(),
            seen: &mut scratch.seen,
            completed_here: &mut scratch.completed_here,
            predicted: &mut scratch.predicted,
        }
    }

    /// Adds `(rule, dot, origin)` with `lex` set to the lexeme's start state when the next
    /// symbol is a lexeme (or the given in-lexeme state when `lex` is not `NO_LEX`).
    fn add(&mut self, rule: u32, dot: u32, origin: u32, lex: u32) -> Result<(), GrammarError> {
        let rhs = &self.grammar.rules[rule as usize].rhs;
        let mut item = Item { rule, dot, origin, lex: NO_LEX };
        if let Some(&Symbol::Lexeme(lexeme)) = rhs.get(dot as usize) {
            let dfa = self.lexemes.get(self.grammar, lexeme)?;
            item.lex = if lex == NO_LEX { dfa.start() } else { lex };
        }
        if !self.seen.insert(item) {
            return Ok(());
        }
        if self.items.len() >= self.limits.max_items_per_set {
            return Err(GrammarError::ParserTooLarge {
                what: "items in one Earley set",
                limit: self.limits.max_items_per_set,
            });
        }
        self.items.push(item);
        Ok(())
    }

    /// Predicts and completes every item (including ones added on the way).
    fn close(&mut self, chart: &dyn Chart) -> Result<(), GrammarError> {
        let mut next = 0;
        while next < self.items.len() {
            let item = self.items[next];
            next += 1;
            let rhs = &self.grammar.rules[item.rule as usize].rhs;
            match rhs.get(item.dot as usize) {
                None => self.complete(item, chart)?,
                Some(&Symbol::Nonterminal(callee)) => {
                    if self.predicted.insert(callee) {
                        for &rule in &self.grammar.rules_by_lhs[callee as usize] {
                            self.add(rule, 0, self.index, NO_LEX)?;
                        }
                    }
                    if self.completed_here.contains(&callee) {
                        self.add(item.rule, item.dot + 1, item.origin, NO_LEX)?;
                    }
                }
                Some(&Symbol::Lexeme(lexeme)) => {
                    // A lexeme matching the empty string is also stepped over at once.
                    let dfa = self.lexemes.get(self.grammar, lexeme)?;
                    if item.lex == dfa.start() && dfa.is_accepting(item.lex) {
                        self.add(item.rule, item.dot + 1, item.origin, NO_LEX)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn complete(&mut self, item: Item, chart: &dyn Chart) -> Result<(), GrammarError> {
        let lhs = self.grammar.rules[item.rule as usize].lhs;
        if item.origin == self.index {
            self.completed_here.insert(lhs);
            let mut index = 0;
            while index < self.items.len() {
                let waiting = self.items[index];
                index += 1;
                if self.next_is(waiting, lhs) {
                    self.add(waiting.rule, waiting.dot + 1, waiting.origin, NO_LEX)?;
                }
            }
            return Ok(());
        }
        for &waiting in chart.set(item.origin as usize) {
            if self.next_is(waiting, lhs) {
                self.add(waiting.rule, waiting.dot + 1, waiting.origin, NO_LEX)?;
            }
        }
        Ok(())
    }

    fn next_is(&self, item: Item, nonterminal: NonterminalId) -> bool {
        self.grammar.rules[item.rule as usize].rhs.get(item.dot as usize)
            == Some(&Symbol::Nonterminal(nonterminal))
    }
}

/// The first set: the augmented start rule, closed.
pub(crate) fn initial_set(
    grammar: &Grammar,
    lexemes: &LexemeDfas,
    limits: ParserLimits,
) -> Result<Vec<Item>, GrammarError> {
    struct Empty;
    impl Chart for Empty {
        fn num_sets(&self) -> usize {
            0
        }
        fn set(&self, _: usize) -> &[Item] {
            &[]
        }
    }
    let mut scratch = ScanScratch::default();
    let mut builder = SetBuilder::new(grammar, lexemes, limits, 0, &mut scratch);
    builder.add(0, 0, 0, NO_LEX)?;
    builder.close(&Empty)?;
    Ok(builder.items)
}

/// The set after `byte`, given every set so far (the last one is the current); empty when the
/// byte leaves the language.
/// `scratch` is reused between calls (a mask walk scans once per trie node).
pub(crate) fn scan(
    grammar: &Grammar,
    lexemes: &LexemeDfas,
    limits: ParserLimits,
    chart: &dyn Chart,
    byte: u8,
    scratch: &mut ScanScratch,
) -> Result<Vec<Item>, GrammarError> {
    let current = chart.num_sets() - 1;
    let mut step = ByteStep::default();
    step_byte(grammar, lexemes, chart.set(current), byte, &mut step)?;
    if step.seeds.is_empty() {
        // Nothing ends here: nothing is predicted or completed, the stepped items are the set
        // (the common case inside strings and numbers).
        return Ok(step.inside);
    }
    let mut builder = SetBuilder::new(grammar, lexemes, limits, current as u32 + 1, scratch);
    for item in &step.inside {
        builder.add(item.rule, item.dot, item.origin, item.lex)?;
    }
    for &(rule, dot, origin) in &step.seeds {
        builder.add(rule, dot, origin, NO_LEX)?;
    }
    builder.close(chart)?;
    Ok(builder.items)
}

/// One byte's step of a set's in-lexeme items, before any closure: the items that stay inside
/// their lexeme (`inside`, sorted, no duplicates) and the items advanced past a lexeme the
/// byte ends (`seeds`: `(rule, dot, origin)`, sorted, no duplicates). The set after the byte is
/// `inside` plus the closure of `seeds`, and it is empty exactly when both are.
#[derive(Debug, Default)]
pub(crate) struct ByteStep {
    pub inside: Vec<Item>,
    pub seeds: Vec<(u32, u32, u32)>,
}

impl ByteStep {
    pub fn is_empty(&self) -> bool {
        self.inside.is_empty() && self.seeds.is_empty()
    }

    /// Adds `other`'s items and seeds, reading origin `relative` as `origin` (a step kept for
    /// several sets, whose own number it did not know), keeping both lists sorted and unique.
    pub fn add_relative(&mut self, other: &ByteStep, relative: u32, origin: u32) {
        let number = |o: u32| if o == relative { origin } else { o };
        if !other.inside.is_empty() {
            self.inside.extend(other.inside.iter().map(|&item| Item { origin: number(item.origin), ..item }));
            self.inside.sort_unstable_by_key(|i| (i.rule, i.dot, i.origin, i.lex));
            self.inside.dedup();
        }
        if !other.seeds.is_empty() {
            self.seeds.extend(other.seeds.iter().map(|&(rule, dot, o)| (rule, dot, number(o))));
            self.seeds.sort_unstable();
            self.seeds.dedup();
        }
    }
}

/// [`ByteStep`] of `set` on `byte` (DFA steps only: nothing is predicted or completed), into
/// `step`'s buffers (cleared first, so a walk reuses them).
pub(crate) fn step_byte(
    grammar: &Grammar,
    lexemes: &LexemeDfas,
    set: &[Item],
    byte: u8,
    step: &mut ByteStep,
) -> Result<(), GrammarError> {
    step.inside.clear();
    step.seeds.clear();
    for &item in set {
        if item.lex == NO_LEX {
            continue;
        }
        let Symbol::Lexeme(lexeme) = grammar.rules[item.rule as usize].rhs[item.dot as usize] else {
            continue;
        };
        let dfa = lexemes.get(grammar, lexeme)?;
        let next = dfa.next(item.lex, byte);
        if next == DEAD {
            continue;
        }
        // NOTE: only live DFA states exist, so a non-accepting step can still finish the lexeme
        // (and has a way on, found without scanning its row); an accepting state with no way on
        // only ends the lexeme.
        let accepting = dfa.is_accepting(next);
        if !accepting || dfa.successors(next).next().is_some() {
            step.inside.push(Item { lex: next, ..item });
        }
        if accepting {
            step.seeds.push((item.rule, item.dot + 1, item.origin));
        }
    }
    if step.inside.len() > 1 {
        step.inside.sort_unstable_by_key(|i| (i.rule, i.dot, i.origin, i.lex));
        step.inside.dedup();
    }
    if step.seeds.len() > 1 {
        step.seeds.sort_unstable();
        step.seeds.dedup();
    }
    Ok(())
}

/// The closed set numbered `index` grown from `seeds` alone (items advanced past a lexeme),
/// completing against `chart`'s sets.
pub(crate) fn close_seeds(
    grammar: &Grammar,
    lexemes: &LexemeDfas,
    limits: ParserLimits,
    chart: &dyn Chart,
    index: u32,
    seeds: &[(u32, u32, u32)],
    scratch: &mut ScanScratch,
) -> Result<Vec<Item>, GrammarError> {
    let mut builder = SetBuilder::new(grammar, lexemes, limits, index, scratch);
    for &(rule, dot, origin) in seeds {
        builder.add(rule, dot, origin, NO_LEX)?;
    }
    builder.close(chart)?;
    Ok(builder.items)
}

/// Whether a set holds the completed augmented start rule.
pub(crate) fn is_accepting_set(set: &[Item]) -> bool {
    set.iter().any(|item| item.rule == 0 && item.dot == 1 && item.origin == 0)
}
