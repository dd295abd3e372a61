//! Scalars beyond one regex: strings with length bounds next to a pattern or format (an
//! intersection lexeme) and integers with `multipleOf` (a remainder automaton intersected with
//! the bounds).
use serde_json::{Map, Value};
use sglr_fsm::{CompileLimits, FsmError};
use sglr_schema::{json_value_to_regex, non_negative_integer, split_decimal, JsonSchemaOptions, NEVER_REGEX};

use super::{counts_length, unsupported, Piece, SchemaGrammar, MAX_MULTIPLE_OF, SCALAR_KEYWORDS};
use crate::error::GrammarError;
use crate::grammar::Lexeme;

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
        if ty == "string" && counts_length(&single) {
            // NOTE: counted, not unrolled as the regex path would (`{0,20}` of a character):
            // between characters its masks come from the vocabulary's table (see
            // `sglr_fsm::json::CountedBody`), where each unrolled count walked the vocabulary.
            return self.counted_pieces(single);
        }
        let error = match json_value_to_regex(&Value::Object(single.clone()), self.options) {
            Ok(regex) => return Ok(self.regex_piece(regex)),
            Err(error) => error,
        };
        let FsmError::UnsupportedSchema { keyword, .. } = &error else { return Err(error.into()) };
        match (ty, keyword.as_str()) {
            ("string", "minLength" | "maxLength" | "pattern") => {
                // A pattern is refused only next to an enforced format (two shapes at once).
                if keyword == "pattern" && !single.contains_key("format") {
                    return Err(error.into());
                }
                self.counted_pieces(single)
            }
            ("integer" | "number", "multipleOf") => self.multiple_of(&single, path),
            _ => Err(error.into()),
        }
    }

    /// [`SchemaGrammar::counted_string`] as pieces: its lexeme, or a rule that derives nothing.
    fn counted_pieces(&mut self, single: Map<String, Value>) -> Result<Vec<Piece>, GrammarError> {
        let Some(lexeme) = self.counted_string(single)? else {
            return Ok(vec![Piece::Rule(self.never())]);
        };
        Ok(self
            .checked_lexeme(lexeme)?
            .map_or_else(|| vec![Piece::Rule(self.never())], |l| vec![Piece::Lexeme(l)]))
    }

    /// A string schema whose length bounds no regex spells out (next to a pattern or format,
    /// or past `max_unrolled_length`): a counted lexeme, restricted to the shape's regex when
    /// there is one. `None`: no string matches.
    fn counted_string(&self, mut single: Map<String, Value>) -> Result<Option<Lexeme>, GrammarError> {
        let mut bound = |keyword: &str| single.remove(keyword).as_ref().and_then(non_negative_integer);
        let min_len = bound("minLength").map_or(0, |n| n as usize);
        let max_len = bound("maxLength").map(|n| n as usize);
        if max_len.is_some_and(|max| max < min_len) {
            return Ok(None);
        }
        let Some(shapes) = self.string_shapes(single)? else { return Ok(None) };
        let mut any_string = Map::new();
        any_string.insert("type".into(), Value::String("string".into()));
        let any = json_value_to_regex(&Value::Object(any_string), self.options)?;
        let all: Vec<String> = shapes.into_iter().filter(|shape| *shape != any).collect();
        if min_len == 0 && max_len.is_none() {
            // No length to count: the shapes alone.
            return Ok(Some(match all.len() {
                0 => Lexeme::Regex(any),
                1 => Lexeme::Regex(all.into_iter().next().expect("one shape")),
                _ => Lexeme::Intersection { all, none: Vec::new() },
            }));
        }
        Ok(Some(Lexeme::CountedString { min_len, max_len, all, space_before: false }))
    }

    /// Regexes a string (without length bounds) must all match: the regex path's one, or for a
    /// pattern next to an enforced format, which no one regex spells, the pattern's and the
    /// format's. `None`: no string matches.
    fn string_shapes(&self, mut single: Map<String, Value>) -> Result<Option<Vec<String>>, GrammarError> {
        single.insert("type".into(), Value::String("string".into()));
        let has_pattern = single.contains_key("pattern");
        let parts = match (has_pattern, single.remove("format")) {
            (true, Some(format)) => {
                let mut by_format = Map::new();
                by_format.insert("type".into(), Value::String("string".into()));
                by_format.insert("format".into(), format);
                vec![single, by_format]
            }
            (_, format) => {
                if let Some(format) = format {
                    single.insert("format".into(), format);
                }
                vec![single]
            }
        };
        let mut shapes = Vec::new();
        for part in parts {
            let shape = json_value_to_regex(&Value::Object(part), self.options)?;
            if shape == NEVER_REGEX {
                return Ok(None);
            }
            shapes.push(shape);
        }
        Ok(Some(shapes))
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
        // Keys are short: their length bounds are spelled out whatever the bound.
        let unrolled = JsonSchemaOptions { max_unrolled_length: None, ..self.options.clone() };
        let length = json_value_to_regex(&Value::Object(lengths), &unrolled)?;
        if shape == NEVER_REGEX || length == NEVER_REGEX {
            return Ok(None);
        }
        Ok(Some(vec![shape, length]))
    }

    /// The lexeme, or `None` when its language is empty (checked now: a lexeme must match
    /// something when the parser builds it).
    pub(super) fn checked_lexeme(&self, lexeme: Lexeme) -> Result<Option<Lexeme>, GrammarError> {
        Ok((!crate::lexemes::is_empty(&lexeme, &CompileLimits::default())?).then_some(lexeme))
    }

    /// Integers divisible by `multipleOf` (a positive integer), within any bounds: one lexeme,
    /// the remainder automaton intersected with the bounds' regex. For `number` only its
    /// integers are admitted (`2.0` is a multiple too but never produced): a subset, never a
    /// wrong value.
    pub(super) fn multiple_of(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
    ) -> Result<Vec<Piece>, GrammarError> {
        let number = map.get("type").and_then(Value::as_str) == Some("number");
        let refuse = || {
            unsupported(
                "multipleOf",
                path,
                &format!(
                    "only divisors d / 10^k (d from 1 to {MAX_MULTIPLE_OF}, k up to {MAX_MULTIPLE_OF_SCALE}) \
                     are supported"
                ),
            )
        };
        let (mut divisor, mut scale) = map.get("multipleOf").and_then(decimal_divisor).ok_or_else(refuse)?;
        if !number && scale > 0 {
            // An integer x is a multiple of d / 10^k when x * 10^k is one of d: of d / gcd(d, 10^k).
            divisor /= gcd(divisor, 10u64.pow(scale));
            scale = 0;
        }
        if !(1..=MAX_MULTIPLE_OF).contains(&divisor) {
            return Err(refuse());
        }
        // NOTE: a number's multiples are spelled with fractions (`10.0`, `2.25`) where the
        // automaton stays small; past it, with an integral divisor, as integers only (a subset
        // of the multiples, never a false accept).
        let fractions = number && divisor * u64::from(scale.max(1) + 2) <= MAX_MULTIPLE_OF;
        if scale > 0 && !fractions {
            return Err(refuse());
        }
        let mut bounds = Map::new();
        let range_type = if fractions { "number" } else { "integer" };
        bounds.insert("type".into(), Value::String(range_type.into()));
        for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            if let Some(value) = map.get(key) {
                bounds.insert(key.into(), value.clone());
            }
        }
        let range = json_value_to_regex(&Value::Object(bounds), self.options)?;
        if range == NEVER_REGEX {
            return Ok(vec![Piece::Rule(self.never())]);
        }
        let lexeme = Lexeme::MultipleOf {
            divisor: divisor as u32,
            scale: fractions.then_some(scale),
            all: vec![range],
        };
        Ok(self
            .checked_lexeme(lexeme)?
            .map_or_else(|| vec![Piece::Rule(self.never())], |l| vec![Piece::Lexeme(l)]))
    }
}

/// Most fraction digits of a `multipleOf` divisor.
const MAX_MULTIPLE_OF_SCALE: u32 = 6;

/// A positive `multipleOf` value as (d, k) with value = d / 10^k and d not divisible by 10 unless
/// k is 0, read from the shortest decimal that gives back the same `f64` (`0.01` -> (1, 2),
/// `2.5` -> (25, 1), `12` -> (12, 0)).
fn decimal_divisor(value: &Value) -> Option<(u64, u32)> {
    if let Some(integer) = value.as_u64() {
        return Some((integer, 0));
    }
    let float = value.as_f64().filter(|f| f.is_finite() && *f > 0.0 && *f < 1e15)?;
    let text = float.to_string();
    let (_, int, frac) = split_decimal(&text)?;
    let scale = u32::try_from(frac.len()).ok().filter(|k| *k <= MAX_MULTIPLE_OF_SCALE)?;
    let digits: u64 = format!("{int}{frac}").parse().ok()?;
    (digits > 0).then_some((digits, scale))
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
