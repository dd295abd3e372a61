//! Lexeme DFAs, each built on first use: a grammar's first mask compiles only the lexemes
//! its first positions allow.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rustc_hash::FxHashMap;

use sglr_fsm::json::{
    json_string_counter, json_string_counter_after_space, json_string_of_length,
    undeclared_key_dfa_and_twins, TwinnedKeyDfa,
};
use sglr_fsm::{ByteDfa, CompileLimits, FsmError};

use crate::error::GrammarError;
use crate::grammar::{Grammar, Lexeme, LexemeId};
use crate::lexeme_dfa::{LexemeDfa, MaskView};

#[derive(Debug)]
pub(crate) struct LexemeDfas {
    dfas: Vec<OnceLock<Result<LexemeDfa, GrammarError>>>,
    /// Per lexeme, the bytes its start state takes ([`LexemeDfas::first_bytes`]).
    start_first_bytes: Vec<OnceLock<[u64; 4]>>,
    limits: CompileLimits,
}

impl LexemeDfas {
    pub fn new(num_lexemes: usize, limits: CompileLimits) -> Self {
        Self {
            dfas: (0..num_lexemes).map(|_| OnceLock::new()).collect(),
            start_first_bytes: (0..num_lexemes).map(|_| OnceLock::new()).collect(),
            limits,
        }
    }

    /// The bytes DFA state `state` of `lexeme` takes (a 256-bit set), kept for the start state:
    /// a closure predicts lexemes at their start, and a walk's closures ask for the same ones
    /// again and again (an object's keys after every member).
    pub fn first_bytes(
        &self,
        grammar: &Grammar,
        lexeme: LexemeId,
        state: u32,
    ) -> Result<[u64; 4], GrammarError> {
        let dfa = self.get(grammar, lexeme)?;
        let bytes_of = |state: u32| {
            let mut bytes = [0u64; 4];
            for byte in 0..=255u8 {
                if dfa.next(state, byte) != sglr_fsm::DEAD {
                    bytes[byte as usize >> 6] |= 1 << (byte & 63);
                }
            }
            bytes
        };
        if state == dfa.start() {
            return Ok(*self.start_first_bytes[lexeme as usize].get_or_init(|| bytes_of(state)));
        }
        Ok(bytes_of(state))
    }

    pub fn get(&self, grammar: &Grammar, lexeme: LexemeId) -> Result<&LexemeDfa, GrammarError> {
        self.dfas[lexeme as usize]
            .get_or_init(|| build(grammar.lexeme(lexeme), &self.limits))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Where the token mask of DFA state `state` of `lexeme` is computed, for tokens of at
    /// most `reach` bytes ([`LexemeDfa::mask_view`]).
    pub fn mask_view(
        &self,
        grammar: &Grammar,
        lexeme: LexemeId,
        state: u32,
        reach: usize,
    ) -> Result<MaskView<'_>, GrammarError> {
        self.get(grammar, lexeme)?.mask_view(state, reach).map_err(|source| GrammarError::Lexeme {
            pattern: format!("{:?}", grammar.lexeme(lexeme)),
            source,
        })
    }

    /// Already built lexemes (for invariant checks, which must not build anything).
    pub fn built(&self, lexeme: LexemeId) -> Option<&LexemeDfa> {
        self.dfas[lexeme as usize].get().and_then(|r| r.as_ref().ok())
    }

    pub fn num_built(&self) -> usize {
        self.dfas.iter().filter(|d| d.get().is_some()).count()
    }

    pub fn memory_bytes(&self) -> usize {
        self.dfas.iter().filter_map(|d| d.get()?.as_ref().ok()).map(LexemeDfa::memory_bytes).sum()
    }
}

/// Most emptiness answers [`is_empty`] keeps (past it they are dropped and gathered again).
const MAX_EMPTINESS_ANSWERS: usize = 4096;

/// Characters past a counted string's lower bound searched first for a match (a shape such as
/// an email address matches short strings; a count to `maxLength` 32,767 costs 60 ms).
const NEAR_LOWER_BOUND: usize = 256;

/// Most product states of an intersection lexeme (keys and bounded strings stay far below).
const MAX_INTERSECTION_STATES: usize = 1 << 16;

/// A lexeme's automata: one DFA, or the parts of a product (strings all of `all` accept and
/// none of `none` do).
enum Parts {
    /// A regex's table is the process's own (see [`part`]): shared, not copied.
    One(Arc<ByteDfa>),
    /// A free key's table with each state's twin.
    Twinned(Box<TwinnedKeyDfa>),
    Product {
        all: Vec<Arc<ByteDfa>>,
        none: Vec<Arc<ByteDfa>>,
        what: String,
    },
}

/// Most table bytes of regex DFAs [`part`] keeps (past it they are dropped and built again).
const MAX_PART_BYTES: usize = 32 << 20;

/// The DFA of a regex lexeme, or of a regex inside a product lexeme (a string's `format` or
/// `pattern`, a key pattern, a bound's range), kept for the process: the emptiness check at
/// compile and the build on first use need the same parts, and schemas repeat them (a `format`
/// in many members and schemas), where one `\w`-class pattern costs milliseconds to
/// determinize.
pub(crate) fn part(pattern: &str, limits: &CompileLimits) -> Result<Arc<ByteDfa>, FsmError> {
    type Parts = FxHashMap<(String, CompileLimits), Arc<ByteDfa>>;
    static BUILT: OnceLock<Mutex<(Parts, usize)>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let key = (pattern.to_string(), limits.clone());
    if let Some(dfa) = built.lock().unwrap_or_else(PoisonError::into_inner).0.get(&key) {
        return Ok(dfa.clone());
    }
    let dfa = Arc::new(ByteDfa::build(pattern, limits)?);
    let mut built = built.lock().unwrap_or_else(PoisonError::into_inner);
    let (parts, bytes) = &mut *built;
    if *bytes + dfa.memory_bytes() > MAX_PART_BYTES {
        parts.clear();
        *bytes = 0;
    }
    *bytes += dfa.memory_bytes();
    parts.insert(key, dfa.clone());
    Ok(dfa)
}

/// The DFA of one lexeme (an intersection builds its parts, then their product; a counted
/// string alone keeps its count beside the character's state).
pub(crate) fn build(lexeme: &Lexeme, limits: &CompileLimits) -> Result<LexemeDfa, GrammarError> {
    if let Lexeme::CountedString { min_len, max_len, all, space_before } = lexeme {
        if all.is_empty() {
            let counter = if *space_before { json_string_counter_after_space } else { json_string_counter };
            return counter(*min_len, *max_len, limits).map(|dfa| LexemeDfa::Counted(Box::new(dfa))).map_err(
                |source| GrammarError::Lexeme {
                    pattern: format!("strings of {min_len} to {max_len:?} characters"),
                    source,
                },
            );
        }
    }
    match parts(lexeme, limits)? {
        Parts::One(dfa) => Ok(LexemeDfa::table(dfa)),
        Parts::Twinned(keys) => Ok(LexemeDfa::twinned(*keys)),
        Parts::Product { all, none, what } => {
            let all: Vec<&ByteDfa> = all.iter().map(Arc::as_ref).collect();
            let none: Vec<&ByteDfa> = none.iter().map(Arc::as_ref).collect();
            ByteDfa::intersect(&all, &none, MAX_INTERSECTION_STATES)
                .map(|dfa| LexemeDfa::table(Arc::new(dfa)))
                .map_err(|source| GrammarError::Lexeme { pattern: what, source })
        }
    }
}

/// Whether a lexeme matches no string, decided without building a product's table (a search
/// that stops at its first accepting state): a grammar drops rules over empty lexemes at
/// compile, and builds the rest on first use.
pub(crate) fn is_empty(lexeme: &Lexeme, limits: &CompileLimits) -> Result<bool, GrammarError> {
    // Schemas repeat their string shapes (a `format` with one `maxLength` in many members), and
    // deciding one builds its parts' DFAs: answers are kept for the process, a bounded number.
    static ANSWERS: OnceLock<Mutex<FxHashMap<(Lexeme, CompileLimits), bool>>> = OnceLock::new();
    let answers = ANSWERS.get_or_init(Default::default);
    let key = (lexeme.clone(), limits.clone());
    if let Some(&empty) = answers.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
        return Ok(empty);
    }
    let empty = decide_empty(lexeme, limits)?;
    let mut answers = answers.lock().unwrap_or_else(PoisonError::into_inner);
    if answers.len() >= MAX_EMPTINESS_ANSWERS {
        answers.clear();
    }
    answers.insert(key, empty);
    Ok(empty)
}

/// [`is_empty`], decided.
fn decide_empty(lexeme: &Lexeme, limits: &CompileLimits) -> Result<bool, GrammarError> {
    if let Lexeme::CountedString { min_len, max_len, all, space_before } = lexeme {
        if max_len.is_some_and(|max| max < *min_len) {
            return Ok(true);
        }
        if all.is_empty() {
            return Ok(false);
        }
        // A match at most a few characters past the lower bound settles it without counting to
        // a large upper one; only when there is none is the whole range searched.
        let near = min_len.saturating_add(NEAR_LOWER_BOUND);
        if max_len.is_none_or(|max| max > near) {
            let short = Lexeme::CountedString {
                min_len: *min_len,
                max_len: Some(near),
                all: all.clone(),
                space_before: *space_before,
            };
            if !decide_empty(&short, limits)? {
                return Ok(false);
            }
        }
    }
    match parts(lexeme, limits) {
        Err(GrammarError::Lexeme { source: FsmError::EmptyLanguage, .. }) => Ok(true),
        Err(error) => Err(error),
        Ok(Parts::One(_) | Parts::Twinned(..)) => Ok(false),
        Ok(Parts::Product { all, none, what }) => {
            let all: Vec<&ByteDfa> = all.iter().map(Arc::as_ref).collect();
            let none: Vec<&ByteDfa> = none.iter().map(Arc::as_ref).collect();
            ByteDfa::intersection_is_empty(&all, &none, MAX_INTERSECTION_STATES)
                .map_err(|source| GrammarError::Lexeme { pattern: what, source })
        }
    }
}

/// The DFAs of the patterns a lexeme subtracts; an empty one is left out (subtracting nothing
/// changes nothing).
fn subtracted_parts(none: &[String], limits: &CompileLimits) -> Result<Vec<Arc<ByteDfa>>, GrammarError> {
    let mut dfas = Vec::new();
    for pattern in none {
        match part(pattern, limits) {
            Err(FsmError::EmptyLanguage) => {}
            other => {
                dfas.push(other.map_err(|source| GrammarError::Lexeme { pattern: pattern.clone(), source })?)
            }
        }
    }
    Ok(dfas)
}

fn parts(lexeme: &Lexeme, limits: &CompileLimits) -> Result<Parts, GrammarError> {
    let one = |pattern: &String| {
        part(pattern, limits).map_err(|source| GrammarError::Lexeme { pattern: pattern.clone(), source })
    };
    Ok(match lexeme {
        // NOTE: through the process's parts too: schemas repeat whole lexemes (a free value,
        // a `format`, an object of free members), and a Unicode class costs milliseconds to
        // determinize where copying the built table costs microseconds.
        Lexeme::Regex(pattern) => Parts::One(one(pattern)?),
        Lexeme::Literal { text, then } => {
            let dfa = ByteDfa::literal_then(text.as_bytes(), &*one(then)?).map_err(|source| {
                GrammarError::Lexeme { pattern: format!("{text:?} then {then}"), source }
            })?;
            Parts::One(Arc::new(dfa))
        }
        Lexeme::Intersection { all, none } => {
            let all_dfas: Vec<Arc<ByteDfa>> = all.iter().map(one).collect::<Result<_, _>>()?;
            let none_dfas = subtracted_parts(none, limits)?;
            Parts::Product { all: all_dfas, none: none_dfas, what: format!("{all:?} minus {none:?}") }
        }
        Lexeme::UndeclaredKey { declared, all, none } => {
            let what = format!("keys other than {declared:?} in {all:?} minus {none:?}");
            let names: Vec<&str> = declared.iter().map(String::as_str).collect();
            let keys = undeclared_key_dfa_and_twins(&names, MAX_INTERSECTION_STATES)
                .map_err(|source| GrammarError::Lexeme { pattern: what.clone(), source })?;
            if all.is_empty() && none.is_empty() {
                return Ok(Parts::Twinned(Box::new(keys)));
            }
            let mut all_dfas = vec![Arc::new(keys.dfa)];
            all_dfas.extend(all.iter().map(one).collect::<Result<Vec<_>, _>>()?);
            let none_dfas = subtracted_parts(none, limits)?;
            Parts::Product { all: all_dfas, none: none_dfas, what }
        }
        Lexeme::CountedString { min_len, max_len, all, space_before } => {
            let what = format!("strings of {min_len} to {max_len:?} characters in {all:?}");
            if *space_before {
                // NOTE: the schema compiler puts the space in a counted lexeme of its own only.
                let source = FsmError::UnsupportedRegex("a space before a restricted counted string".into());
                return Err(GrammarError::Lexeme { pattern: what, source });
            }
            let counted = json_string_of_length(*min_len, *max_len, limits)
                .map_err(|source| GrammarError::Lexeme { pattern: what.clone(), source })?;
            if all.is_empty() {
                return Ok(Parts::One(Arc::new(counted)));
            }
            let mut all_dfas: Vec<Arc<ByteDfa>> = all.iter().map(one).collect::<Result<_, _>>()?;
            all_dfas.push(Arc::new(counted));
            Parts::Product { all: all_dfas, none: Vec::new(), what }
        }
        Lexeme::MultipleOf { divisor, scale, all } => {
            let what = format!("multiples of {divisor}e-{} in {all:?}", scale.unwrap_or(0));
            let multiples = match scale {
                None => ByteDfa::decimal_multiples(*divisor),
                Some(scale) => ByteDfa::decimal_multiples_scaled(*divisor, *scale),
            }
            .map_err(|source| GrammarError::Lexeme { pattern: what.clone(), source })?;
            let mut all_dfas = vec![Arc::new(multiples)];
            all_dfas.extend(all.iter().map(one).collect::<Result<Vec<_>, _>>()?);
            Parts::Product { all: all_dfas, none: Vec::new(), what }
        }
    })
}
