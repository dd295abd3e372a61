//! `not`, type by type: for each type the rest of the schema admits, what the negated schema
//! takes away from it. None of that type (the rest is kept), all of it (the type is dropped),
//! for a scalar a regular language (a difference lexeme: the rest's regex minus the negated
//! one's), for an object `required` names and `properties` (objects lacking one of the names,
//! or holding a member that fails its schema). Anything else refuses `not` by name.
use serde_json::{Map, Value};
use sglr_schema::{is_annotation, json_value_to_regex, keyword_type, NEVER_REGEX};

use super::{all_of, unsupported, Piece, SchemaGrammar};
use crate::error::GrammarError;
use crate::grammar::Lexeme;

/// What a negated schema admits of one type.
enum Negated {
    Nothing,
    Everything,
    /// Scalars matching this regex (JSON text).
    Regex(String),
    /// Objects holding every one of the `required` names whose `properties` members (where
    /// present) meet their schemas.
    Object {
        required: Vec<String>,
        properties: Vec<(String, Value)>,
    },
}

/// Most required names and member schemas one negated object spells out (an alternative each).
const MAX_NEGATED_MEMBERS: usize = 16;

impl SchemaGrammar<'_> {
    /// `map` (holding `not`) as the alternatives of its types, each less what `not` admits.
    pub(super) fn negation(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
    ) -> Result<Vec<Piece>, GrammarError> {
        let mut rest = map.clone();
        let negated = rest.remove("not").expect("called with `not`");
        let negated = match negated {
            Value::Bool(true) => return Ok(vec![Piece::Rule(self.never())]),
            Value::Bool(false) => return self.schema(&Value::Object(rest), path),
            Value::Object(negated) => negated,
            _ => return Err(super::invalid(path, "'not' must be a schema")),
        };
        // Not not A: A.
        if negated.contains_key("not") && negated.keys().all(|k| k == "not" || is_annotation(k)) {
            return self.schema(&all_of(vec![Value::Object(rest), negated["not"].clone()]), path);
        }
        let negated = match self.reader.merge_all_of(&negated, path)? {
            Some(merged) => merged,
            None => return self.schema(&Value::Object(rest), path),
        };
        // Not (A or B): not A and not B, each negated on its own.
        let entries: Vec<Value> = match negated.get("anyOf") {
            Some(Value::Array(entries)) if negated.keys().all(|k| k == "anyOf" || is_annotation(k)) => {
                entries.clone()
            }
            _ => vec![Value::Object(negated)],
        };
        let mut negations: Vec<(Map<String, Value>, Vec<&'static str>)> = Vec::new();
        for entry in entries {
            let entry = match entry {
                Value::Bool(true) => return Ok(vec![Piece::Rule(self.never())]),
                Value::Bool(false) => continue,
                Value::Object(entry) => match self.reader.merge_all_of(&entry, path)? {
                    Some(merged) => merged,
                    None => continue,
                },
                _ => return Err(super::invalid(path, "'anyOf' entries must be schemas")),
            };
            if ["anyOf", "oneOf", "not", "if", "$ref"].iter().any(|k| entry.contains_key(*k)) {
                return Err(unsupported(
                    "not",
                    path,
                    "only a schema of keywords (no combinators) can be negated",
                ));
            }
            let types = self.reader.types(&entry, path)?;
            negations.push((entry, types));
        }
        let mut alternatives = Vec::new();
        for ty in self.reader.types(&rest, path)? {
            let mut typed = rest.clone();
            typed.insert("type".into(), Value::String(ty.into()));
            // What each negated schema takes from this type: the regexes a scalar must avoid,
            // or for an object the ways to fail each one (one of them is picked per negation).
            let mut taken: Vec<String> = Vec::new();
            let mut ways_to_fail: Vec<Vec<Value>> = Vec::new();
            let mut dropped = false;
            for (entry, types) in &negations {
                match self.negated_of_type(entry, types, ty, path)? {
                    Negated::Nothing => {}
                    Negated::Everything => dropped = true,
                    Negated::Regex(regex) => taken.push(regex),
                    Negated::Object { required, properties } => {
                        ways_to_fail.push(ways_to_fail_object(required, properties))
                    }
                }
            }
            if dropped {
                continue;
            }
            if !taken.is_empty() {
                let kept = json_value_to_regex(&Value::Object(typed), &self.exact_options())?;
                let lexeme = Lexeme::Intersection { all: vec![kept], none: taken };
                if let Some(lexeme) = self.checked_lexeme(lexeme)? {
                    alternatives.push(vec![Piece::Lexeme(lexeme)]);
                }
                continue;
            }
            let mut combinations: Vec<Vec<Value>> = vec![vec![Value::Object(typed)]];
            for ways in ways_to_fail {
                if combinations.len() * ways.len() > MAX_NEGATED_MEMBERS * 4 {
                    return Err(unsupported("not", path, "too many ways to fail the negated schemas"));
                }
                combinations = combinations
                    .iter()
                    .flat_map(|parts| {
                        ways.iter().map(move |way| {
                            parts.iter().cloned().chain(std::iter::once(way.clone())).collect()
                        })
                    })
                    .collect();
            }
            for parts in combinations {
                alternatives.push(self.schema(&all_of(parts), path)?);
            }
        }
        Ok(match alternatives.len() {
            0 => vec![Piece::Rule(self.never())],
            1 => alternatives.remove(0),
            _ => vec![Piece::Rule(self.choice("not", alternatives))],
        })
    }

    /// What `negated` (merged, with its types) admits of type `ty`.
    fn negated_of_type(
        &self,
        negated: &Map<String, Value>,
        negated_types: &[&str],
        ty: &str,
        path: &str,
    ) -> Result<Negated, GrammarError> {
        // A number type and an integer one share the integers.
        let shares_numbers = matches!(
            (ty, negated_types.contains(&"number"), negated_types.contains(&"integer")),
            ("integer", true, _) | ("number", _, true)
        );
        if !(negated_types.contains(&ty) || shares_numbers) {
            return Ok(Negated::Nothing);
        }
        let keywords: Vec<&str> =
            negated.keys().map(String::as_str).filter(|k| !is_annotation(k) && *k != "type").collect();
        match ty {
            "object" | "array" => {
                if negated.contains_key("enum") || negated.contains_key("const") {
                    return Err(unsupported("not", path, "a negated list of objects or arrays"));
                }
                // The negated schema's keywords about this type (`required` among them).
                let own: Vec<&str> =
                    keywords.iter().copied().filter(|k| keyword_type(k) == Some(ty)).collect();
                if own.is_empty() {
                    return Ok(Negated::Everything);
                }
                if ty == "object" && own.iter().all(|k| matches!(*k, "required" | "properties")) {
                    let required: Vec<String> = match negated.get("required") {
                        None => Vec::new(),
                        Some(Value::Array(names)) => {
                            names.iter().filter_map(Value::as_str).map(String::from).collect()
                        }
                        Some(_) => return Err(super::invalid(path, "'required' must be an array")),
                    };
                    let properties: Vec<(String, Value)> = match negated.get("properties") {
                        None => Vec::new(),
                        Some(Value::Object(members)) => members
                            .iter()
                            .filter(|(_, schema)| !super::is_trivial(schema))
                            .map(|(name, schema)| (name.clone(), schema.clone()))
                            .collect(),
                        Some(_) => return Err(super::invalid(path, "'properties' must be an object")),
                    };
                    if required.len() + properties.len() > MAX_NEGATED_MEMBERS {
                        return Err(unsupported("not", path, "too many negated members"));
                    }
                    return Ok(if required.is_empty() && properties.is_empty() {
                        Negated::Everything
                    } else {
                        Negated::Object { required, properties }
                    });
                }
                Err(unsupported("not", path, &format!("negated '{}' of an {ty}", own[0])))
            }
            scalar => {
                // NOTE: intersected with the type, not overwritten: a negated integer taken
                // from a number keeps its fractions.
                let of_type =
                    Value::Object(Map::from_iter([("type".to_string(), Value::String(scalar.into()))]));
                let typed = all_of(vec![Value::Object(negated.clone()), of_type]);
                let regex = json_value_to_regex(&typed, &self.exact_options())?;
                Ok(if regex == NEVER_REGEX { Negated::Nothing } else { Negated::Regex(regex) })
            }
        }
    }
}

/// The ways an object fails a negated object schema: lacking one of its required names (that
/// member absent), or holding one of its members with a value that fails the member's schema.
fn ways_to_fail_object(required: Vec<String>, properties: Vec<(String, Value)>) -> Vec<Value> {
    let mut ways = Vec::new();
    for name in required {
        ways.push(Value::Object(Map::from_iter([(
            "properties".to_string(),
            Value::Object(Map::from_iter([(name, Value::Bool(false))])),
        )])));
    }
    for (name, schema) in properties {
        let failing = Value::Object(Map::from_iter([("not".to_string(), schema)]));
        ways.push(Value::Object(Map::from_iter([
            ("required".to_string(), Value::Array(vec![Value::String(name.clone())])),
            ("properties".to_string(), Value::Object(Map::from_iter([(name, failing)]))),
        ])));
    }
    ways
}
