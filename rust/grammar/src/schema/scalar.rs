//! Scalars beyond one regex: strings with length bounds next to a pattern or format (an
//! intersection lexeme) and integers with `multipleOf` (a remainder automaton over digits).
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use sglr_fsm::schema::{json_value_to_regex, NEVER_REGEX};
use sglr_fsm::{CompileLimits, FsmError};

use super::{unsupported, Piece, SchemaGrammar, MAX_MULTIPLE_OF, SCALAR_KEYWORDS};
use crate::error::GrammarError;
use crate::grammar::{Lexeme, NonterminalId};

impl SchemaGrammar<'_> {
    /// A string, number, integer, boolean or null: the regex path's regex, else (length
    /// bounds with a pattern or format, `multipleOf`) an intersection or a digit grammar.
    pub(super) fn scalar(
        &mut self,
        map: &Map<String, Value>,
        ty: &str,
        path: &str,
    ) -> Result<Vec<Piece>, GrammarError> {
        let mut single: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| SCALAR_KEYWORDS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        single.insert("type".into(), Value::String(ty.into()));
        let error = match json_value_to_regex(&Value::Object(single.clone()), self.options) {
            Ok(regex) => return Ok(self.regex_piece(regex)),
            Err(error) => error,
        };
        let FsmError::UnsupportedSchema { keyword, .. } = &error else { return Err(error.into()) };
        match (ty, keyword.as_str()) {
            ("string", "minLength" | "maxLength") => {
                let Some(regexes) = self.string_regexes(single)? else {
                    return Ok(vec![Piece::Rule(self.never())]);
                };
                let lexeme = Lexeme::Intersection { all: regexes, none: Vec::new() };
                Ok(self
                    .checked_lexeme(lexeme)?
                    .map_or_else(|| vec![Piece::Rule(self.never())], |l| vec![Piece::Lexeme(l)]))
            }
            ("integer", "multipleOf") => self.multiple_of(&single, path),
            _ => Err(error.into()),
        }
    }

    /// A string schema as regexes a string must all match: the regex path's one, or, for
    /// length bounds next to a pattern or format, the shape's and the length's. `None`: no
    /// string matches.
    pub(super) fn string_regexes(
        &self,
        mut single: Map<String, Value>,
    ) -> Result<Option<Vec<String>>, GrammarError> {
        single.insert("type".into(), Value::String("string".into()));
        let error = match json_value_to_regex(&Value::Object(single.clone()), self.options) {
            Ok(regex) if regex == NEVER_REGEX => return Ok(None),
            Ok(regex) => return Ok(Some(vec![regex])),
            Err(error) => error,
        };
        if !matches!(&error, FsmError::UnsupportedSchema { keyword, .. } if keyword == "minLength" || keyword == "maxLength")
        {
            return Err(error.into());
        }
        let mut lengths = Map::new();
        lengths.insert("type".into(), Value::String("string".into()));
        for key in ["minLength", "maxLength"] {
            if let Some(value) = single.remove(key) {
                lengths.insert(key.into(), value);
            }
        }
        let shape = json_value_to_regex(&Value::Object(single), self.options)?;
        let length = json_value_to_regex(&Value::Object(lengths), self.options)?;
        if shape == NEVER_REGEX || length == NEVER_REGEX {
            return Ok(None);
        }
        Ok(Some(vec![shape, length]))
    }

    /// The lexeme, or `None` when its language is empty (checked now: a lexeme must match
    /// something when the parser builds it).
    pub(super) fn checked_lexeme(&self, lexeme: Lexeme) -> Result<Option<Lexeme>, GrammarError> {
        match crate::lexemes::build(&lexeme, &CompileLimits::default()) {
            Ok(_) => Ok(Some(lexeme)),
            Err(GrammarError::Lexeme { source: FsmError::EmptyLanguage, .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Integers divisible by `multipleOf` (a positive integer): `0`, or an optional `-` and
    /// digits read by a remainder automaton (one nonterminal per remainder). Bounds next to it
    /// are refused.
    pub(super) fn multiple_of(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
    ) -> Result<Vec<Piece>, GrammarError> {
        if ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"].iter().any(|k| map.contains_key(*k))
        {
            return Err(unsupported(
                "multipleOf",
                path,
                "divisibility together with bounds is not supported",
            ));
        }
        let divisor = match map.get("multipleOf") {
            Some(value) => value
                .as_u64()
                .or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && *f >= 1.0).map(|f| f as u64)),
            None => None,
        };
        let Some(divisor) = divisor.filter(|d| (1..=MAX_MULTIPLE_OF).contains(d)) else {
            return Err(unsupported(
                "multipleOf",
                path,
                &format!("only integer divisors from 1 to {MAX_MULTIPLE_OF} are supported"),
            ));
        };
        // rest[r]: digits that leave the value read so far (remainder r) divisible.
        let rest: Vec<NonterminalId> = (0..divisor).map(|_| self.builder.fresh("remainder")).collect();
        for r in 0..divisor {
            if r == 0 {
                self.builder.rule(rest[0], Vec::new());
            }
            // Digits grouped by the remainder they lead to, one lexeme per group.
            let mut by_target: FxHashMap<u64, String> = FxHashMap::default();
            for digit in 0..10u64 {
                by_target.entry((r * 10 + digit) % divisor).or_default().push(char::from(b'0' + digit as u8));
            }
            let mut targets: Vec<_> = by_target.into_iter().collect();
            targets.sort();
            for (target, digits) in targets {
                let rhs = self
                    .symbols(vec![Piece::Regex(format!("[{digits}]")), Piece::Rule(rest[target as usize])]);
                self.builder.rule(rest[r as usize], rhs);
            }
        }
        let mut first = Vec::new();
        for digit in 1..10u64 {
            first.push(vec![
                Piece::Regex(format!("-?{digit}")),
                Piece::Rule(rest[(digit % divisor) as usize]),
            ]);
        }
        first.push(vec![Piece::Regex("0".into())]);
        Ok(vec![Piece::Rule(self.choice("multiple_of", first))])
    }
}
