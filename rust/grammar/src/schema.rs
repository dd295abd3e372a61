//! JSON schema -> grammar, for what a regex cannot hold: recursive `$ref`s (trees, linked
//! lists) become nonterminals, so any depth is admitted instead of the regex path's fixed
//! unrolling. Sub-schemas without any `$ref` are compiled by rust/fsm's schema compiler into
//! one regex lexeme each, so both paths agree on every leaf. Around references only
//! `$ref`, `anyOf`, `oneOf` (provably disjoint by `type`), objects with `properties` /
//! `required` and arrays with `items` / `minItems` <= 1 are handled; any other keyword there
//! is refused by name (never ignored, so no output is wrongly accepted).

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use sglr_fsm::schema::{is_annotation, json_value_to_regex, key_not_in, string_literal, JsonSchemaOptions};
use sglr_fsm::FsmError;

use crate::error::GrammarError;
use crate::grammar::{Grammar, GrammarBuilder, NonterminalId, Symbol};

/// Most items an array next to a recursive reference may be bounded to (each bound copies
/// the item's symbols into the grammar).
const MAX_ITEMS_BOUND: u64 = 64;

/// Keywords that only apply to objects, to arrays, to either, or to scalars: a type's
/// alternative drops the other types' keywords (they say nothing about it).
const OBJECT_KEYWORDS: &[&str] = &[
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "patternProperties",
];
const ARRAY_KEYWORDS: &[&str] = &["items", "minItems", "maxItems", "uniqueItems", "prefixItems"];
const CONTAINER_KEYWORDS: &[&str] = &[
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "prefixItems",
];
const SCALAR_KEYWORDS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
];

/// Parses `schema` (JSON text) into a grammar of the JSON documents it admits.
pub fn json_schema_to_grammar(schema: &str, options: &JsonSchemaOptions) -> Result<Grammar, GrammarError> {
    let root: Value = serde_json::from_str(schema)
        .map_err(|e| FsmError::InvalidSchema { path: "#".into(), message: format!("not valid JSON: {e}") })?;
    let mut compiler = SchemaGrammar {
        root: &root,
        options,
        ws: format!("(?:{})", options.whitespace_pattern),
        builder: GrammarBuilder::new(),
        references: FxHashMap::default(),
        pending: Vec::new(),
    };
    let start = compiler.builder.nonterminal("#");
    compiler.references.insert("#".into(), start);
    compiler.pending.push(("#".into(), start));
    while let Some((reference, nonterminal)) = compiler.pending.pop() {
        let target = compiler.resolve(&reference)?;
        let pieces = compiler.schema(target, &reference)?;
        let rhs = compiler.symbols(pieces);
        compiler.builder.rule(nonterminal, rhs);
    }
    compiler.builder.build(start)
}

/// Whether a schema has a `$ref` cycle (the regex path can only unroll those to a depth).
pub fn schema_is_recursive(schema: &str) -> bool {
    let Ok(root) = serde_json::from_str::<Value>(schema) else { return false };
    let mut visiting = Vec::new();
    has_cycle(&root, &root, &mut visiting)
}

fn has_cycle<'a>(root: &'a Value, value: &'a Value, visiting: &mut Vec<&'a str>) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(key, child)| match (key.as_str(), child) {
            ("$ref", Value::String(reference)) => {
                if visiting.contains(&reference.as_str()) {
                    return true;
                }
                let Some(target) = pointer(root, reference) else { return false };
                visiting.push(reference);
                let found = has_cycle(root, target, visiting);
                visiting.pop();
                found
            }
            _ => has_cycle(root, child, visiting),
        }),
        Value::Array(items) => items.iter().any(|item| has_cycle(root, item, visiting)),
        _ => false,
    }
}

fn pointer<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let path = reference.strip_prefix('#')?;
    if path.is_empty() {
        Some(root)
    } else {
        root.pointer(path)
    }
}

fn contains_reference(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(key, child)| key == "$ref" || contains_reference(child)),
        Value::Array(items) => items.iter().any(contains_reference),
        _ => false,
    }
}

/// A piece of a right-hand side: a regex (adjacent ones merge into one lexeme) or a rule.
enum Piece {
    Regex(String),
    Rule(NonterminalId),
}

struct SchemaGrammar<'a> {
    root: &'a Value,
    options: &'a JsonSchemaOptions,
    ws: String,
    builder: GrammarBuilder,
    references: FxHashMap<String, NonterminalId>,
    /// References whose rules are still to be written.
    pending: Vec<(String, NonterminalId)>,
}

fn unsupported(keyword: &str, path: &str, reason: &str) -> GrammarError {
    GrammarError::Schema(FsmError::UnsupportedSchema {
        keyword: keyword.into(),
        path: path.into(),
        reason: reason.into(),
    })
}

fn invalid(path: &str, message: &str) -> GrammarError {
    GrammarError::Schema(FsmError::InvalidSchema { path: path.into(), message: message.into() })
}

impl<'a> SchemaGrammar<'a> {
    fn resolve(&self, reference: &str) -> Result<&'a Value, GrammarError> {
        if !reference.starts_with('#') {
            return Err(unsupported("$ref", reference, "only references within the document are supported"));
        }
        pointer(self.root, reference)
            .ok_or_else(|| invalid(reference, "'$ref' points nowhere in the document"))
    }

    fn symbols(&mut self, pieces: Vec<Piece>) -> Vec<Symbol> {
        let mut symbols = Vec::new();
        let mut run = String::new();
        for piece in pieces {
            match piece {
                Piece::Regex(regex) => run.push_str(&regex),
                Piece::Rule(rule) => {
                    if !run.is_empty() {
                        symbols.push(Symbol::Lexeme(self.builder.lexeme(&std::mem::take(&mut run))));
                    }
                    symbols.push(Symbol::Nonterminal(rule));
                }
            }
        }
        if !run.is_empty() {
            symbols.push(Symbol::Lexeme(self.builder.lexeme(&run)));
        }
        symbols
    }

    /// A fresh nonterminal with one rule per alternative.
    fn choice(&mut self, hint: &str, alternatives: Vec<Vec<Piece>>) -> NonterminalId {
        let nonterminal = self.builder.fresh(hint);
        for pieces in alternatives {
            let rhs = self.symbols(pieces);
            self.builder.rule(nonterminal, rhs);
        }
        nonterminal
    }

    fn schema(&mut self, schema: &Value, path: &str) -> Result<Vec<Piece>, GrammarError> {
        if !contains_reference(schema) {
            return Ok(vec![Piece::Regex(format!("(?:{})", json_value_to_regex(schema, self.options)?))]);
        }
        let Value::Object(map) = schema else {
            return Err(invalid(path, "a schema must be an object or a boolean"));
        };
        if let Some(reference) = map.get("$ref") {
            self.only_keywords(map, path, &["$ref"])?;
            let Value::String(reference) = reference else {
                return Err(invalid(path, "'$ref' must be a string"));
            };
            let nonterminal = match self.references.get(reference) {
                Some(&known) => known,
                None => {
                    self.resolve(reference)?;
                    let created = self.builder.nonterminal(reference);
                    self.references.insert(reference.clone(), created);
                    self.pending.push((reference.clone(), created));
                    created
                }
            };
            return Ok(vec![Piece::Rule(nonterminal)]);
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(branches) = map.get(keyword) {
                self.only_keywords(map, path, &[keyword])?;
                let Value::Array(branches) = branches else {
                    return Err(invalid(path, &format!("'{keyword}' must be an array")));
                };
                if keyword == "oneOf" {
                    check_disjoint_types(branches, path)?;
                }
                let mut alternatives = Vec::new();
                for (index, branch) in branches.iter().enumerate() {
                    alternatives.push(self.schema(branch, &format!("{path}/{keyword}/{index}"))?);
                }
                return Ok(vec![Piece::Rule(self.choice("any_of", alternatives))]);
            }
        }
        // Several types: one alternative each, a container keeping its keywords, any other
        // type only the keywords that apply to it.
        if let Some(Value::Array(types)) = map.get("type") {
            let mut alternatives = Vec::new();
            for ty in types {
                let Some(name) = ty.as_str() else {
                    return Err(invalid(path, "'type' entries must be strings"));
                };
                let mut single = map.clone();
                single.insert("type".into(), Value::String(name.into()));
                let (kept, dropped): (&[&str], &[&str]) = match name {
                    "object" => (OBJECT_KEYWORDS, ARRAY_KEYWORDS),
                    "array" => (ARRAY_KEYWORDS, OBJECT_KEYWORDS),
                    _ => (&[], CONTAINER_KEYWORDS),
                };
                single.retain(|key, _| kept.contains(&key.as_str()) || !dropped.contains(&key.as_str()));
                if name == "object" || name == "array" {
                    // Keywords only about scalars say nothing about containers.
                    single.retain(|key, _| !SCALAR_KEYWORDS.contains(&key.as_str()));
                }
                alternatives.push(self.schema(&Value::Object(single), path)?);
            }
            return Ok(vec![Piece::Rule(self.choice("types", alternatives))]);
        }
        // Without `type`, the structural keywords say which container is meant.
        let implied = if map.contains_key("properties") {
            Some("object")
        } else if map.contains_key("items") {
            Some("array")
        } else {
            None
        };
        match map.get("type").map_or(implied, Value::as_str) {
            Some("object") => self.object(map, path),
            Some("array") => self.array(map, path),
            _ => Err(unsupported(
                "$ref",
                path,
                "references are only supported under $ref, anyOf, oneOf, object properties and array items",
            )),
        }
    }

    fn only_keywords(
        &self,
        map: &Map<String, Value>,
        path: &str,
        allowed: &[&str],
    ) -> Result<(), GrammarError> {
        match map.keys().find(|k| !allowed.contains(&k.as_str()) && !is_annotation(k)) {
            Some(keyword) => Err(unsupported(keyword, path, "not supported next to a recursive reference")),
            None => Ok(()),
        }
    }

    /// Properties in schema order, each optional unless required, then (when
    /// `additionalProperties` allows them) other keys, as the regex path lays objects out.
    fn object(&mut self, map: &Map<String, Value>, path: &str) -> Result<Vec<Piece>, GrammarError> {
        self.only_keywords(map, path, &["type", "properties", "required", "additionalProperties"])?;
        let additional = match map.get("additionalProperties") {
            None => Value::Bool(self.options.additional_properties_default),
            Some(value) => value.clone(),
        };
        let empty = Map::new();
        let properties = match map.get("properties") {
            Some(Value::Object(properties)) => properties,
            None => &empty,
            Some(_) => return Err(invalid(path, "'properties' must be an object")),
        };
        let required: Vec<&str> = match map.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            None => Vec::new(),
            Some(_) => return Err(invalid(path, "'required' must be an array")),
        };
        if let Some(missing) = required.iter().find(|name| !properties.contains_key(**name)) {
            return Err(unsupported(
                "required",
                path,
                &format!("required property '{missing}' has no schema"),
            ));
        }
        let ws = self.ws.clone();
        let separator = format!("{ws},{ws}");
        let mut members = Vec::new();
        for (name, schema) in properties {
            let mut pieces = vec![Piece::Regex(format!("{}{ws}:{ws}", string_literal(name)))];
            pieces.extend(self.schema(schema, &format!("{path}/properties/{name}"))?);
            members.push((pieces, required.contains(&name.as_str())));
        }
        let all_optional = members.iter().all(|(_, required)| !required);
        // after[i]: what may follow once some member before i was written (", member" runs).
        let n = members.len();
        let after: Vec<NonterminalId> = (0..=n).map(|_| self.builder.fresh("members")).collect();
        for i in (0..=n).rev() {
            let mut alternatives = Vec::new();
            if members[i..].iter().all(|(_, required)| !required) {
                alternatives.push(Vec::new());
            }
            for j in i..n {
                let mut alternative = vec![Piece::Regex(separator.clone())];
                alternative.extend(self.clone_pieces(&members[j].0));
                alternative.push(Piece::Rule(after[j + 1]));
                alternatives.push(alternative);
                if members[j].1 {
                    break;
                }
            }
            for pieces in alternatives {
                let rhs = self.symbols(pieces);
                self.builder.rule(after[i], rhs);
            }
        }
        // Declared members, at least one.
        let mut first_alternatives: Vec<Vec<Piece>> = Vec::new();
        for j in 0..n {
            let mut alternative = self.clone_pieces(&members[j].0);
            alternative.push(Piece::Rule(after[j + 1]));
            first_alternatives.push(alternative);
            if members[j].1 {
                break;
            }
        }
        let declared = (!first_alternatives.is_empty()).then(|| self.choice("object", first_alternatives));
        let mut bodies: Vec<Vec<Piece>> = Vec::new();
        if additional == Value::Bool(false) {
            bodies.extend(declared.map(|d| vec![Piece::Rule(d)]));
            if all_optional {
                bodies.push(Vec::new());
            }
        } else {
            let names: Vec<&str> = properties.keys().map(String::as_str).collect();
            let mut extra = vec![Piece::Regex(format!("{}{ws}:{ws}", key_not_in(&names)))];
            extra.extend(self.schema(&additional, &format!("{path}/additionalProperties"))?);
            // extras -> ε | extras , extra
            let extras = self.builder.fresh("extra_members");
            self.builder.rule(extras, Vec::new());
            let mut repeat = vec![Piece::Regex(separator.clone())];
            repeat.extend(self.clone_pieces(&extra));
            let mut rhs = vec![Symbol::Nonterminal(extras)];
            rhs.extend(self.symbols(repeat));
            self.builder.rule(extras, rhs);
            bodies.extend(declared.map(|d| vec![Piece::Rule(d), Piece::Rule(extras)]));
            if all_optional {
                extra.push(Piece::Rule(extras));
                bodies.push(extra);
                bodies.push(Vec::new());
            }
        }
        let body = self.choice("object_body", bodies);
        Ok(vec![Piece::Regex(format!("\\{{{ws}")), Piece::Rule(body), Piece::Regex(format!("{ws}\\}}"))])
    }

    fn clone_pieces(&self, pieces: &[Piece]) -> Vec<Piece> {
        pieces
            .iter()
            .map(|p| match p {
                Piece::Regex(r) => Piece::Regex(r.clone()),
                Piece::Rule(n) => Piece::Rule(*n),
            })
            .collect()
    }

    /// `[ item (, item)* ]` with `minItems` / `maxItems` (both at most `MAX_ITEMS_BOUND`).
    fn array(&mut self, map: &Map<String, Value>, path: &str) -> Result<Vec<Piece>, GrammarError> {
        self.only_keywords(map, path, &["type", "items", "minItems", "maxItems"])?;
        let bound = |keyword: &str| -> Result<Option<u64>, GrammarError> {
            match map.get(keyword) {
                None => Ok(None),
                Some(value) => match value.as_u64() {
                    Some(n) if n <= MAX_ITEMS_BOUND => Ok(Some(n)),
                    _ => Err(unsupported(
                        keyword,
                        path,
                        &format!("at most {MAX_ITEMS_BOUND} next to a recursive reference"),
                    )),
                },
            }
        };
        let min_items = bound("minItems")?.unwrap_or(0);
        let max_items = bound("maxItems")?;
        let item = match map.get("items") {
            Some(schema) => self.schema(schema, &format!("{path}/items"))?,
            None => return Err(unsupported("items", path, "an array next to a reference needs 'items'")),
        };
        let ws = self.ws.clone();
        let open = Piece::Regex(format!("\\[{ws}"));
        let close = Piece::Regex(format!("{ws}\\]"));
        if max_items == Some(0) || max_items.is_some_and(|max| max < min_items) {
            // Only the empty array (or none at all when the bounds contradict).
            if max_items.is_some_and(|max| max < min_items) {
                let never = self.builder.fresh("never");
                self.builder.rule(never, vec![Symbol::Nonterminal(never)]);
                return Ok(vec![Piece::Rule(never)]);
            }
            return Ok(vec![open, close]);
        }
        let mut separated = vec![Piece::Regex(format!("{ws},{ws}"))];
        separated.extend(self.clone_pieces(&item));
        // item, then (", " item) between max(min, 1) - 1 and max - 1 times.
        let mut list = item;
        for _ in 1..min_items.max(1) {
            list.extend(self.clone_pieces(&separated));
        }
        match max_items {
            None => {
                // more -> ε | more , item
                let more = self.builder.fresh("items");
                self.builder.rule(more, Vec::new());
                let mut rhs = vec![Symbol::Nonterminal(more)];
                rhs.extend(self.symbols(self.clone_pieces(&separated)));
                self.builder.rule(more, rhs);
                list.push(Piece::Rule(more));
            }
            Some(max) => {
                // optional_k -> ε | , item optional_{k-1}
                let mut tail: Option<NonterminalId> = None;
                for _ in min_items.max(1)..max {
                    let optional = self.builder.fresh("more_items");
                    self.builder.rule(optional, Vec::new());
                    let mut pieces = self.clone_pieces(&separated);
                    pieces.extend(tail.map(Piece::Rule));
                    let rhs = self.symbols(pieces);
                    self.builder.rule(optional, rhs);
                    tail = Some(optional);
                }
                list.extend(tail.map(Piece::Rule));
            }
        }
        let mut alternatives = vec![list];
        if min_items == 0 {
            alternatives.push(Vec::new());
        }
        let body = self.choice("array", alternatives);
        Ok(vec![open, Piece::Rule(body), close])
    }
}

/// `oneOf` is `anyOf` only when no value can match two branches: here, when every branch
/// names its `type`s and no two branches share one (integer counts as a number).
fn check_disjoint_types(branches: &[Value], path: &str) -> Result<(), GrammarError> {
    let mut seen: Vec<&str> = Vec::new();
    for branch in branches {
        let types: Vec<&str> = match branch.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => return Err(unsupported("oneOf", path, "branches must name disjoint 'type's to be checked")),
        };
        for ty in types {
            let ty = if ty == "integer" { "number" } else { ty };
            if seen.contains(&ty) {
                return Err(unsupported("oneOf", path, &format!("two branches admit type '{ty}'")));
            }
            seen.push(ty);
        }
    }
    Ok(())
}
