//! Objects: declared members in order, other members split by the `patternProperties` they
//! match (intersection lexemes for their keys), `propertyNames`, and member counts.
use std::sync::Arc;

use serde_json::{Map, Value};
use sglr_fsm::json::string_literal;
use sglr_fsm::{ByteDfa, CompileLimits, FsmError};
use sglr_schema::NEVER_REGEX;

use super::{
    all_of, contains_reference, invalid, is_trivial, unsupported, Piece, SchemaGrammar, MAX_COUNT_STATES,
    MAX_PATTERNS,
};
use crate::error::GrammarError;
use crate::grammar::{Lexeme, NonterminalId, Symbol};

impl SchemaGrammar<'_> {
    /// Regexes a JSON string (with quotes) must all match to meet `schema` (a string schema
    /// without references); empty language: a regex matching nothing.
    pub(super) fn key_regexes(
        &self,
        schema: &Value,
        keyword: &str,
        path: &str,
    ) -> Result<Vec<String>, GrammarError> {
        let map = match schema {
            Value::Object(map) if !contains_reference(schema) && !map.contains_key("allOf") => map.clone(),
            Value::Bool(false) => return Ok(vec![NEVER_REGEX.to_string()]),
            _ => return Err(unsupported(keyword, path, "only plain string schemas are supported for keys")),
        };
        Ok(self.string_regexes(map)?.unwrap_or_else(|| vec![NEVER_REGEX.to_string()]))
    }

    /// Declared members in schema order (any order under `properties_any_order`:
    /// `any_order.rs`; each optional unless required), then other members
    /// (keys split by the `patternProperties` they match), with the member count tracked
    /// when `minProperties` / `maxProperties` ask for it.
    pub(super) fn object(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
    ) -> Result<Vec<Piece>, GrammarError> {
        if ["dependencies", "dependentRequired"]
            .iter()
            .any(|k| map.get(*k).is_some_and(|v| !matches!(v, Value::Object(m) if m.is_empty())))
        {
            let alternatives = dependencies_as_alternatives(map, path)?;
            return self.schema(&alternatives, path);
        }
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
        let additional = match map.get("additionalProperties").or_else(|| map.get("unevaluatedProperties")) {
            None => Value::Bool(self.options.additional_properties_default),
            Some(value) => value.clone(),
        };
        let patterns: Vec<(String, Value)> = match map.get("patternProperties") {
            None => Vec::new(),
            Some(Value::Object(patterns)) => patterns.iter().map(|(p, s)| (p.clone(), s.clone())).collect(),
            Some(_) => return Err(invalid(path, "'patternProperties' must be an object")),
        };
        if patterns.len() > MAX_PATTERNS {
            return Err(unsupported(
                "patternProperties",
                path,
                &format!("more than {MAX_PATTERNS} patterns in one object"),
            ));
        }
        let count = |keyword: &str| -> Result<Option<usize>, GrammarError> {
            match map.get(keyword) {
                None => Ok(None),
                Some(value) => value
                    .as_u64()
                    .map(|n| Some(n as usize))
                    .ok_or_else(|| invalid(path, &format!("'{keyword}' must be a non-negative integer"))),
            }
        };
        let min_count = count("minProperties")?.unwrap_or(0);
        let max_count = count("maxProperties")?;

        // Key languages: each pattern's, and propertyNames'.
        let pattern_regexes: Vec<String> = patterns
            .iter()
            .map(|(pattern, _)| {
                let mut schema = Map::new();
                schema.insert("pattern".into(), Value::String(pattern.clone()));
                Ok(self.key_regexes(&Value::Object(schema), "patternProperties", path)?.remove(0))
            })
            .collect::<Result<_, GrammarError>>()?;
        let names_regexes: Vec<String> = match map.get("propertyNames") {
            Some(schema) if !is_trivial(schema) => self.key_regexes(schema, "propertyNames", path)?,
            _ => Vec::new(),
        };
        let limits = CompileLimits::default();
        let key_dfa = |regex: &String| -> Result<Option<Arc<ByteDfa>>, GrammarError> {
            match crate::lexemes::part(regex, &limits) {
                Ok(dfa) => Ok(Some(dfa)),
                Err(FsmError::EmptyLanguage) => Ok(None),
                Err(source) => Err(GrammarError::Lexeme { pattern: regex.clone(), source }),
            }
        };
        let pattern_dfas: Vec<Option<Arc<ByteDfa>>> =
            pattern_regexes.iter().map(key_dfa).collect::<Result<_, _>>()?;
        let names_dfas: Vec<Option<Arc<ByteDfa>>> =
            names_regexes.iter().map(key_dfa).collect::<Result<_, _>>()?;
        // A key has two spellings when it is not ASCII (raw UTF-8, or `\u` escapes as
        // `json.dumps` writes it): a pattern's schema applies when either spelling matches
        // (more constraints), a name is allowed only when both do (fewer names).
        let spellings = |name: &str| -> Vec<String> {
            let raw = serde_json::to_string(name).expect("a string serializes");
            let escaped = ascii_spelling(&raw);
            if escaped == raw {
                vec![raw]
            } else {
                vec![raw, escaped]
            }
        };
        let matches_any = |dfa: &Option<Arc<ByteDfa>>, name: &str| {
            spellings(name).iter().any(|s| dfa.as_ref().is_some_and(|dfa| dfa.matches(s.as_bytes())))
        };
        let matches_all = |dfa: &Option<Arc<ByteDfa>>, name: &str| {
            spellings(name).iter().all(|s| dfa.as_ref().is_some_and(|dfa| dfa.matches(s.as_bytes())))
        };

        // Declared members (declared properties, then required names without a schema).
        let ws = self.ws.clone();
        let mut declared: Vec<(&str, Option<&Value>)> =
            properties.iter().map(|(n, s)| (n.as_str(), Some(s))).collect();
        for name in &required {
            if !properties.contains_key(*name) {
                declared.push((name, None));
            }
        }
        let names: Vec<&str> = declared.iter().map(|(n, _)| *n).collect();
        let mut members: Vec<(Vec<Piece>, bool)> = Vec::new();
        for (name, schema) in declared {
            let is_required = required.contains(&name);
            let allowed_name = names_dfas.iter().all(|dfa| matches_all(dfa, name));
            let mut parts: Vec<Value> = schema.cloned().into_iter().collect();
            parts.extend(
                patterns
                    .iter()
                    .zip(&pattern_dfas)
                    .filter(|(_, dfa)| matches_any(dfa, name))
                    .map(|((_, s), _)| s.clone()),
            );
            if parts.is_empty() {
                parts.push(additional.clone());
            }
            if !allowed_name {
                parts = vec![Value::Bool(false)];
            }
            // The key is its own lexeme (not merged into the value's regex): predicting the
            // members builds only the keys' small DFAs, a value's waits until its key is read.
            // The whitespace after the colon opens the value's first lexeme when that is a
            // regex: the key then ends at its colon, and the masks there (` "`, ` 1`, ` {`) are
            // the value lexemes' start masks, shared by every key with such a value, rather
            // than a walk through the space's tokens for each key.
            let mut value = self.schema(&all_of(parts), &format!("{path}/properties/{name}"))?;
            let colon = if self.space_into(&mut value)? { format!("{ws}:") } else { format!("{ws}:{ws}") };
            let mut pieces = vec![Piece::Lexeme(key_lexeme(name, &colon))];
            pieces.extend(value);
            members.push((pieces, is_required));
        }

        // Other members: keys none of the declared ones, split by the set of patterns they
        // match (their value meets each), or matching none (additionalProperties).
        let mut extras: Vec<Vec<Piece>> = Vec::new();
        // Undeclared keys: any key minus every spelling of a declared name, built directly
        // (`undeclared_key_dfa`: a regex saying "none of these names" grows a negated class per
        // trie level), restricted by the patterns a key matches and does not.
        let declared: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        for subset in 0..1usize << patterns.len() {
            let inside: Vec<usize> = (0..patterns.len()).filter(|i| subset >> i & 1 == 1).collect();
            let value = if inside.is_empty() {
                additional.clone()
            } else {
                all_of(inside.iter().map(|&i| patterns[i].1.clone()).collect())
            };
            let empty_names = names_dfas.iter().any(Option::is_none);
            if value == Value::Bool(false) || empty_names || inside.iter().any(|&i| pattern_dfas[i].is_none())
            {
                continue;
            }
            let mut all: Vec<String> = inside.iter().map(|&i| pattern_regexes[i].clone()).collect();
            all.extend(names_regexes.iter().cloned());
            let none: Vec<String> = (0..patterns.len())
                .filter(|i| !inside.contains(i) && pattern_dfas[*i].is_some())
                .map(|i| pattern_regexes[i].clone())
                .collect();
            let undeclared = Lexeme::UndeclaredKey { declared: declared.clone(), all, none };
            let key = if matches!(&undeclared, Lexeme::UndeclaredKey { all, none, .. } if all.is_empty() && none.is_empty())
            {
                // Infinitely many keys minus finitely many names: never empty, no need to
                // build it now (the parser builds it on first use).
                Some(undeclared)
            } else {
                self.checked_lexeme(undeclared)?
            };
            let Some(key) = key else { continue };
            let mut value = self.schema(&value, &format!("{path}/additionalProperties"))?;
            let colon = if self.space_into(&mut value)? { format!("{ws}:") } else { format!("{ws}:{ws}") };
            let mut pieces = vec![Piece::Lexeme(key), Piece::Regex(colon)];
            pieces.extend(value);
            extras.push(pieces);
        }
        // Extras count at most once towards the minimum (a repeated key counts once in the
        // parsed object): past what that can reach, the object is not empty, just beyond the
        // grammar.
        if !extras.is_empty() && min_count > members.len() + 1 {
            return Err(unsupported(
                "minProperties",
                path,
                "it needs more than one undeclared member, and a grammar cannot keep their keys distinct",
            ));
        }
        // One declared member is in any order too when undeclared ones may come before it.
        let body = if self.options.properties_any_order && members.len() + usize::from(!extras.is_empty()) > 1
        {
            self.members_any_order(members, extras, min_count, max_count, path)?
        } else {
            self.members(members, extras, min_count, max_count, path)?
        };
        Ok(vec![Piece::Regex(format!("\\{{{ws}")), Piece::Rule(body), Piece::Regex(format!("{ws}\\}}"))])
    }

    /// The members of an object: `declared` in order (optional unless required), then any
    /// number of `extras`, between `min_count` and `max_count` members in all.
    /// `declared(i, c)`: the rest from declared member i on, c members written so far (c
    /// saturates at `cap` when there is no maximum; c > 0 means a separator comes first).
    pub(super) fn members(
        &mut self,
        members: Vec<(Vec<Piece>, bool)>,
        extras: Vec<Vec<Piece>>,
        min_count: usize,
        max_count: Option<usize>,
        path: &str,
    ) -> Result<NonterminalId, GrammarError> {
        let n = members.len();
        let cap = 1.max(min_count).max(max_count.unwrap_or(0));
        // Extras are counted twice: every one towards the maximum, but at most one towards the
        // minimum (two extras may repeat a key, and a parsed object keeps one).
        let extra_cap = max_count.unwrap_or(1);
        if (n + 1).saturating_mul(cap + 1).saturating_add((cap + 1).saturating_mul(extra_cap + 1))
            > MAX_COUNT_STATES
        {
            let keyword = if max_count.is_some() { "maxProperties" } else { "minProperties" };
            return Err(unsupported(keyword, path, "too many members to count in a grammar"));
        }
        let next = |c: usize| -> Option<usize> {
            match max_count {
                Some(max) => (c < max).then_some(c + 1),
                None => Some((c + 1).min(cap)),
            }
        };
        let separator = format!("{ws},{ws}", ws = self.ws);
        let sep = |c: usize| if c > 0 { vec![Piece::Regex(separator.clone())] } else { Vec::new() };
        let declared: Vec<Vec<NonterminalId>> =
            (0..=n).map(|_| (0..=cap).map(|_| self.builder.fresh("members")).collect()).collect();
        // extra[d][k]: d declared members written, then k extras.
        let extra: Vec<Vec<NonterminalId>> = (0..=cap)
            .map(|_| (0..=extra_cap).map(|_| self.builder.fresh("extra_members")).collect())
            .collect();
        let never = self.never();
        for (d, row) in extra.iter().enumerate() {
            for (k, &nonterminal) in row.iter().enumerate() {
                let mut alternatives: Vec<Vec<Piece>> = Vec::new();
                if d + k.min(1) >= min_count {
                    alternatives.push(Vec::new());
                }
                let following = match max_count {
                    Some(max) => (d + k < max).then_some(k + 1),
                    None => Some(1),
                };
                if let Some(k1) = following {
                    for pieces in &extras {
                        let mut alternative = sep(d + k);
                        alternative.extend(pieces.iter().cloned());
                        alternative.push(Piece::Rule(row[k1]));
                        alternatives.push(alternative);
                    }
                }
                self.rules(nonterminal, alternatives, never);
            }
        }
        for i in 0..=n {
            for c in 0..=cap {
                let mut alternatives: Vec<Vec<Piece>> = Vec::new();
                for j in i..n {
                    if let Some(c1) = next(c) {
                        let mut alternative = sep(c);
                        alternative.extend(members[j].0.iter().cloned());
                        alternative.push(Piece::Rule(declared[j + 1][c1]));
                        alternatives.push(alternative);
                    }
                    if members[j].1 {
                        break;
                    }
                }
                if members[i..].iter().all(|(_, required)| !required) {
                    alternatives.push(vec![Piece::Rule(extra[c][0])]);
                }
                self.rules(declared[i][c], alternatives, never);
            }
        }
        Ok(declared[0][0])
    }

    pub(super) fn rules(
        &mut self,
        nonterminal: NonterminalId,
        alternatives: Vec<Vec<Piece>>,
        never: NonterminalId,
    ) {
        if alternatives.is_empty() {
            self.builder.rule(nonterminal, vec![Symbol::Nonterminal(never)]);
        }
        for pieces in alternatives {
            let rhs = self.symbols(pieces);
            self.builder.rule(nonterminal, rhs);
        }
    }
}

/// A JSON string literal with every non-ASCII character as `\u` escapes (UTF-16 units).
fn ascii_spelling(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// Most dependencies one object's alternatives spell out (two alternatives each, multiplied).
const MAX_DEPENDENCIES: usize = 6;

/// `dependencies` / `dependentRequired` of an object schema as an equivalent conjunction
/// without them: each dependency of member `name` is "`name` absent, or present with what it
/// brings" (its names required, or its schema met): `{"properties": {name: false}}` or
/// `{"required": [name, ...]}` / `{"allOf": [{"required": [name]}, schema]}`, whose `anyOf`
/// lists the merge multiplies out.
fn dependencies_as_alternatives(map: &Map<String, Value>, path: &str) -> Result<Value, GrammarError> {
    let mut rest = map.clone();
    rest.insert("type".into(), Value::String("object".into()));
    let mut parts = Vec::new();
    let mut num_dependencies = 0;
    for keyword in ["dependencies", "dependentRequired"] {
        let Some(dependencies) = rest.remove(keyword) else { continue };
        let Value::Object(dependencies) = dependencies else {
            return Err(invalid(path, &format!("'{keyword}' must be an object")));
        };
        for (name, brings) in dependencies {
            // NOTE: a name a closed object never admits makes its dependency vacuous (and
            // declaring it `false` would read as another part's property under the merge).
            let declared =
                map.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(&name));
            let closed = map.get("additionalProperties") == Some(&Value::Bool(false))
                && !map.contains_key("patternProperties");
            if closed && !declared {
                continue;
            }
            num_dependencies += 1;
            if num_dependencies > MAX_DEPENDENCIES {
                return Err(unsupported(keyword, path, "more dependencies than one object spells out"));
            }
            let mut absent = Map::new();
            absent.insert(
                "properties".into(),
                Value::Object(Map::from_iter([(name.clone(), Value::Bool(false))])),
            );
            let present = match brings {
                Value::Array(names) => {
                    if names.iter().any(|n| !n.is_string()) {
                        return Err(invalid(path, &format!("'{keyword}' names must be strings")));
                    }
                    let required = std::iter::once(Value::String(name)).chain(names).collect();
                    Value::Object(Map::from_iter([("required".to_string(), Value::Array(required))]))
                }
                schema @ (Value::Object(_) | Value::Bool(_)) if keyword == "dependencies" => {
                    let required = Value::Object(Map::from_iter([(
                        "required".to_string(),
                        Value::Array(vec![Value::String(name)]),
                    )]));
                    all_of(vec![required, schema])
                }
                _ => return Err(invalid(path, &format!("'{keyword}' values must be arrays of names"))),
            };
            parts.push(Value::Object(Map::from_iter([(
                "anyOf".to_string(),
                Value::Array(vec![Value::Object(absent), present]),
            )])));
        }
    }
    parts.insert(0, Value::Object(rest));
    Ok(all_of(parts))
}

/// The lexeme of a declared key `name` (with quotes) followed by the regex `then`: its one JSON
/// spelling as literal bytes where it has one spelling (ASCII from space up, but `/`, which
/// may be escaped), else `string_literal`'s regex of its spellings.
fn key_lexeme(name: &str, then: &str) -> Lexeme {
    if name.chars().all(|c| c.is_ascii() && c >= ' ' && c != '/' && c != '\u{7f}') {
        // NOTE: serde's JSON text of such a name is its one spelling (`"` and `\` escaped).
        let text = serde_json::to_string(name).expect("a string serializes");
        Lexeme::Literal { text, then: then.to_string() }
    } else {
        Lexeme::Regex(format!("{}{then}", string_literal(name)))
    }
}
