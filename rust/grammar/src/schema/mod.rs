//! JSON schema -> grammar, for what a regex cannot hold: recursive `$ref`s (trees, linked
//! lists) become nonterminals, so any depth is admitted instead of the regex path's fixed
//! unrolling, and keywords no single regex can say become grammar structure or intersection
//! lexemes (product DFAs).
//!
//! Every sub-schema is first offered to rust/fsm's schema compiler as one regex lexeme (so
//! both paths agree wherever the regex path is exact); only where it refuses (a reference, an
//! unsupported keyword, a regex too large) is the schema taken apart here:
//! - `$ref` (a nonterminal per target), `allOf` and `$ref` with siblings (merged by the regex
//!   path's merge, refused where a merge is not exact), `anyOf`, `oneOf` (when its branches are
//!   provably disjoint, else refused), several `type`s, `enum` / `const`;
//! - objects: `properties` (in schema order, or any order as the options say), `required`,
//!   `additionalProperties` (any schema), `patternProperties` (each extra key's value must
//!   satisfy every pattern it matches: one intersection lexeme per set of patterns),
//!   `propertyNames`,
//!   `minProperties` / `maxProperties` (a member count in the nonterminals);
//! - arrays: `items`, `minItems` / `maxItems` (up to `MAX_ITEMS_BOUND`);
//! - strings with length bounds and a `pattern` or `format` (the intersection of both
//!   regexes), integers with `multipleOf` (a remainder automaton, bounds intersected in).
//!
//! Any other keyword is refused by name (never ignored, so no output is wrongly accepted).

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use sglr_fsm::FsmError;
use sglr_schema::{
    branches_with_siblings, is_annotation, json_value_to_regex, non_negative_integer, pointer,
    value_is_recursive, JsonSchemaOptions, SchemaReader, NEVER_REGEX,
};

use crate::error::GrammarError;
use crate::grammar::{Grammar, GrammarBuilder, Lexeme, NonterminalId, Symbol, OPTIONAL_SPACE};

mod any_order;
mod array;
mod literal;
mod negation;
mod object;
mod scalar;

/// Most items an array bound may count to (each bound adds its count of rules).
pub(super) const MAX_ITEMS_BOUND: u64 = 256;
/// Most `patternProperties` patterns in one object (extra keys split by the set of patterns
/// they match: 2^patterns lexemes).
pub(super) const MAX_PATTERNS: usize = 4;
/// Most nonterminals an object's member counting may take ((members + 2) x counts).
pub(super) const MAX_COUNT_STATES: usize = 20_000;
/// Largest integer `multipleOf` (remainder states of the digit automaton).
pub(super) const MAX_MULTIPLE_OF: u64 = 100_000;
/// Deepest nesting of sub-schemas taken apart (hostile input cannot overflow the stack).
const MAX_SCHEMA_DEPTH: usize = 96;
/// Longest exact regex a container the rules refuse falls back to (longer: the bounded one;
/// its DFA is built whole at the first mask that reaches it).
const MAX_FALLBACK_REGEX_LEN: usize = 4 << 10;
/// Longest regex any other sub-schema (a scalar, or the bounded fallback) becomes as one lexeme.
const MAX_REGEX_LEN: usize = 4 << 20;
/// Keywords whose meaning no grammar here expresses.
const UNSUPPORTED_ANYWHERE: &[&str] = &["$dynamicRef", "$recursiveRef", "dependentSchemas"];
/// Keywords about scalars (a scalar type's alternative keeps these, and `format`).
pub(super) const SCALAR_KEYWORDS: &[&str] = &[
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
    // The caller's regex length bound is for one eager DFA (the regex path); here a long regex
    // is one lexeme built on first use, or (a container) taken apart at MAX_LEXEME_REGEX_LEN.
    let options = &JsonSchemaOptions { max_regex_len: MAX_REGEX_LEN, ..options.clone() };
    let root: Value = serde_json::from_str(schema)
        .map_err(|e| FsmError::InvalidSchema { path: "#".into(), message: format!("not valid JSON: {e}") })?;
    let mut compiler = SchemaGrammar {
        root: &root,
        options,
        reader: SchemaReader::new(&root, options),
        ws: format!("(?:{})", options.whitespace_pattern),
        builder: GrammarBuilder::new(),
        references: FxHashMap::default(),
        pending: Vec::new(),
        never: None,
        any: None,
        any_after_space: None,
        depth: 0,
        num_open_one_ofs: 0,
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

pub(super) fn contains_reference(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(key, child)| key == "$ref" || contains_reference(child)),
        Value::Array(items) => items.iter().any(contains_reference),
        _ => false,
    }
}

/// A piece of a right-hand side: a regex (adjacent ones merge into one lexeme), a lexeme of
/// its own (an intersection) or a rule.
#[derive(Debug, Clone)]
pub(super) enum Piece {
    Regex(String),
    Lexeme(Lexeme),
    Rule(NonterminalId),
}

pub(super) struct SchemaGrammar<'a> {
    pub(super) root: &'a Value,
    pub(super) options: &'a JsonSchemaOptions,
    pub(super) reader: SchemaReader<'a>,
    pub(super) ws: String,
    pub(super) builder: GrammarBuilder,
    pub(super) references: FxHashMap<String, NonterminalId>,
    /// References whose rules are still to be written.
    pub(super) pending: Vec<(String, NonterminalId)>,
    /// A nonterminal deriving nothing (built on first use).
    pub(super) never: Option<NonterminalId>,
    /// Any JSON value, at any depth (built on first use).
    pub(super) any: Option<NonterminalId>,
    /// [`SchemaGrammar::any_after_space`], once built.
    pub(super) any_after_space: Option<NonterminalId>,
    pub(super) depth: usize,
    /// `oneOf`s being spelled as "this branch and none of the others" around the current one
    /// (each spells its branches again inside the others' negations).
    pub(super) num_open_one_ofs: usize,
}

pub(super) fn unsupported(keyword: &str, path: &str, reason: &str) -> GrammarError {
    GrammarError::Schema(FsmError::UnsupportedSchema {
        keyword: keyword.into(),
        path: path.into(),
        reason: reason.into(),
    })
}

pub(super) fn invalid(path: &str, message: &str) -> GrammarError {
    GrammarError::Schema(FsmError::InvalidSchema { path: path.into(), message: message.into() })
}

/// `{"allOf": parts}`, or the one part.
pub(super) fn all_of(mut parts: Vec<Value>) -> Value {
    if parts.len() == 1 {
        return parts.remove(0);
    }
    let mut map = Map::new();
    map.insert("allOf".into(), Value::Array(parts));
    Value::Object(map)
}

pub(super) fn is_trivial(schema: &Value) -> bool {
    match schema {
        Value::Bool(true) => true,
        Value::Object(map) => map.keys().all(|k| is_annotation(k)),
        _ => false,
    }
}

/// `oneOf` (an array, in `map`) whose branches only list `required` names (next to object
/// keywords): branch i holds and no other does exactly when i's names are present and, for
/// each other branch, the one name it needs beyond them is absent. `None` (refused) when
/// another branch needs two or more further names, or the siblings hide which properties they
/// declare.
fn exclusive_required(map: &Map<String, Value>, path: &str) -> Option<Vec<(Value, String)>> {
    let Some(Value::Array(branches)) = map.get("oneOf") else { return None };
    let mut siblings = map.clone();
    siblings.remove("oneOf");
    let siblings = &siblings;
    let names = |value: Option<&Value>| -> Option<Vec<String>> {
        match value {
            None => Some(Vec::new()),
            Some(Value::Array(names)) => names.iter().map(|n| n.as_str().map(String::from)).collect(),
            Some(_) => None,
        }
    };
    let mut required_sets = Vec::new();
    for branch in branches {
        let Value::Object(branch) = branch else { return None };
        if branch.keys().any(|k| k != "required" && !is_annotation(k)) {
            return None;
        }
        required_sets.push(names(branch.get("required"))?);
    }
    if ["$ref", "allOf", "anyOf", "oneOf", "patternProperties"].iter().any(|k| siblings.contains_key(*k)) {
        return None;
    }
    // A non-object meets every branch, so (with two or more) never exactly one: objects only.
    if siblings.get("type").is_some_and(|t| t != "object") {
        return None;
    }
    let always = names(siblings.get("required"))?;
    let declared: Vec<&String> = match siblings.get("properties") {
        Some(Value::Object(properties)) => properties.keys().collect(),
        _ => Vec::new(),
    };
    let closed = siblings.get("additionalProperties").filter(|v| **v != Value::Bool(true));
    let mut exclusive = Vec::new();
    for (i, own) in required_sets.iter().enumerate() {
        let branch_path = format!("{path}/oneOf/{i}");
        let present = |name: &String| always.contains(name) || own.contains(name);
        let mut forbidden = Map::new();
        let mut possible = true;
        for (_, other) in required_sets.iter().enumerate().filter(|(j, _)| *j != i) {
            let missing: Vec<&String> = other.iter().filter(|n| !present(n)).collect();
            match missing.as_slice() {
                // Whenever branch i holds, branch j does too.
                [] => possible = false,
                [name] if declared.contains(name) || closed.is_none() => {
                    forbidden.insert((*name).clone(), Value::Bool(false));
                }
                // Closed objects without that property never have it.
                [_] if closed == Some(&Value::Bool(false)) => {}
                _ => return None,
            }
        }
        if !possible {
            exclusive.push((Value::Bool(false), branch_path));
            continue;
        }
        let mut requirement = Map::new();
        requirement.insert("required".into(), Value::Array(own.iter().cloned().map(Value::String).collect()));
        let mut parts = vec![Value::Object(siblings.clone()), Value::Object(requirement)];
        if !forbidden.is_empty() {
            let mut absent = Map::new();
            absent.insert("properties".into(), Value::Object(forbidden));
            parts.push(Value::Object(absent));
        }
        exclusive.push((all_of(parts), branch_path));
    }
    Some(exclusive)
}

/// Whether a schema admits only objects or arrays (or combines sub-schemas): worth taking
/// apart when its regex is long.
fn is_container(schema: &Value) -> bool {
    let Value::Object(map) = schema else { return false };
    let container = |t: &Value| t == "object" || t == "array";
    match map.get("type") {
        Some(Value::String(_)) => map.get("type").is_some_and(container),
        Some(Value::Array(types)) => types.iter().any(container),
        _ => ["properties", "items", "allOf", "anyOf", "oneOf", "$ref"].iter().any(|k| map.contains_key(*k)),
    }
}

/// Whether a schema is a string with length bounds and nothing else that constrains it: a
/// counted lexeme (`scalar.rs`), whose masks between characters come from the vocabulary's
/// table, where the regex path unrolls the count and each count's mask walks the vocabulary.
fn is_plain_bounded_string(schema: &Value) -> bool {
    let Value::Object(map) = schema else { return false };
    map.get("type").is_some_and(|t| t == "string")
        && counts_length(map)
        && map.keys().all(|k| matches!(k.as_str(), "type" | "minLength" | "maxLength") || is_annotation(k))
}

/// Whether a string schema's length is counted on the grammar path (a counted lexeme): it has a
/// length bound, every bound is valid (else the regex path names it in a typed error), and no
/// pattern or format (their shapes come first).
pub(super) fn counts_length(map: &Map<String, Value>) -> bool {
    let bounds = [map.get("minLength"), map.get("maxLength")];
    bounds.iter().any(Option::is_some)
        && bounds.iter().flatten().all(|value| non_negative_integer(value).is_some())
        && !map.contains_key("pattern")
        && !map.contains_key("format")
}

impl<'a> SchemaGrammar<'a> {
    fn resolve(&self, reference: &str) -> Result<&'a Value, GrammarError> {
        if !reference.starts_with('#') {
            return Err(unsupported("$ref", reference, "only references within the document are supported"));
        }
        pointer(self.root, reference)
            .ok_or_else(|| invalid(reference, "'$ref' points nowhere in the document"))
    }

    pub(super) fn symbols(&mut self, pieces: Vec<Piece>) -> Vec<Symbol> {
        let mut symbols = Vec::new();
        let mut run = String::new();
        for piece in pieces {
            match piece {
                Piece::Regex(regex) => run.push_str(&regex),
                other => {
                    if !run.is_empty() {
                        symbols.push(Symbol::Lexeme(self.builder.lexeme(&std::mem::take(&mut run))));
                    }
                    symbols.push(match other {
                        Piece::Lexeme(lexeme) => Symbol::Lexeme(self.builder.lexeme_of(lexeme)),
                        Piece::Rule(rule) => Symbol::Nonterminal(rule),
                        Piece::Regex(_) => unreachable!("handled above"),
                    });
                }
            }
        }
        if !run.is_empty() {
            symbols.push(Symbol::Lexeme(self.builder.lexeme(&run)));
        }
        symbols
    }

    /// A fresh nonterminal with one rule per alternative (none: it derives nothing).
    pub(super) fn choice(&mut self, hint: &str, alternatives: Vec<Vec<Piece>>) -> NonterminalId {
        let nonterminal = self.builder.fresh(hint);
        if alternatives.is_empty() {
            let never = self.never();
            self.builder.rule(nonterminal, vec![Symbol::Nonterminal(never)]);
        }
        for pieces in alternatives {
            let rhs = self.symbols(pieces);
            self.builder.rule(nonterminal, rhs);
        }
        nonterminal
    }

    pub(super) fn never(&mut self) -> NonterminalId {
        if let Some(never) = self.never {
            return never;
        }
        // `never -> never` derives no string; `build` drops it and every rule using it.
        let never = self.builder.fresh("never");
        self.builder.rule(never, vec![Symbol::Nonterminal(never)]);
        self.never = Some(never);
        never
    }

    /// A regex piece; the never-matching regex becomes the `never` rule (a lexeme must match
    /// something).
    pub(super) fn regex_piece(&mut self, regex: String) -> Vec<Piece> {
        if regex == NEVER_REGEX {
            return vec![Piece::Rule(self.never())];
        }
        vec![Piece::Regex(format!("(?:{regex})"))]
    }

    /// Any JSON value, nested to any depth (the regex path can only unroll a few levels).
    pub(super) fn any(&mut self) -> Result<NonterminalId, GrammarError> {
        if let Some(any) = self.any {
            return Ok(any);
        }
        let any = self.builder.fresh("any");
        self.any = Some(any);
        let ws = self.ws.clone();
        let scalar = |ty: &str| -> Result<String, GrammarError> {
            let mut map = Map::new();
            map.insert("type".into(), Value::String(ty.into()));
            Ok(json_value_to_regex(&Value::Object(map), self.options)?)
        };
        let string = scalar("string")?;
        let number = scalar("number")?;
        let items = self.builder.fresh("any_items");
        let members = self.builder.fresh("any_members");
        let any_after_space = self.builder.fresh("any_after_space");
        self.any_after_space = Some(any_after_space);
        let alternatives = |before: &str| {
            vec![
                vec![Piece::Regex(format!("{before}(?:{string}|{number}|true|false|null)"))],
                vec![
                    Piece::Regex(format!(r"{before}\[{ws}")),
                    Piece::Rule(items),
                    Piece::Regex(format!(r"{ws}\]")),
                ],
                vec![Piece::Regex(format!(r"{before}\[{ws}{ws}\]"))],
                vec![
                    Piece::Regex(format!(r"{before}\{{{ws}")),
                    Piece::Rule(members),
                    Piece::Regex(format!(r"{ws}\}}")),
                ],
                vec![Piece::Regex(format!(r"{before}\{{{ws}{ws}\}}"))],
            ]
        };
        for (nonterminal, before) in [(any, ""), (any_after_space, ws.as_str())] {
            for pieces in alternatives(before) {
                let rhs = self.symbols(pieces);
                self.builder.rule(nonterminal, rhs);
            }
        }
        // items -> any | items , any ; members -> member | members , member
        self.builder.rule(items, vec![Symbol::Nonterminal(any)]);
        let rhs =
            self.symbols(vec![Piece::Rule(items), Piece::Regex(format!("{ws},{ws}")), Piece::Rule(any)]);
        self.builder.rule(items, rhs);
        // The space after a colon opens the value's first lexeme (see `any_after_space`).
        let member = vec![Piece::Regex(format!("{string}{ws}:")), Piece::Rule(any_after_space)];
        let rhs = self.symbols(member.clone());
        self.builder.rule(members, rhs);
        let mut more = vec![Piece::Rule(members), Piece::Regex(format!("{ws},{ws}"))];
        more.extend(member);
        let rhs = self.symbols(more);
        self.builder.rule(members, rhs);
        Ok(any)
    }

    /// [`SchemaGrammar::any`] after the whitespace (each alternative's first lexeme takes it):
    /// a key followed by a free value then ends at its colon, and the mask there is the value
    /// lexemes' start masks rather than a walk of the space's tokens with parser steps.
    pub(super) fn any_after_space(&mut self) -> Result<NonterminalId, GrammarError> {
        self.any()?;
        Ok(self.any_after_space.expect("built with any"))
    }

    /// Moves the whitespace before `value` into its first lexeme where it can take it (a
    /// regex, a free value, a plain counted string under the default whitespace); false where
    /// the whitespace must stay before it. The language is the same either way.
    pub(super) fn space_into(&mut self, value: &mut Vec<Piece>) -> Result<bool, GrammarError> {
        let ws = self.ws.clone();
        let alone = value.len() == 1;
        match value.first_mut() {
            Some(Piece::Regex(_)) => {
                value.insert(0, Piece::Regex(ws));
                Ok(true)
            }
            Some(Piece::Rule(rule)) if Some(*rule) == self.any && alone => {
                *value = vec![Piece::Rule(self.any_after_space()?)];
                Ok(true)
            }
            // NOTE: a counted DFA takes an optional lead byte, so only the default whitespace.
            Some(Piece::Lexeme(Lexeme::CountedString { all, space_before, .. }))
                if all.is_empty() && ws == OPTIONAL_SPACE =>
            {
                *space_before = true;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    pub(super) fn schema(&mut self, schema: &Value, path: &str) -> Result<Vec<Piece>, GrammarError> {
        if is_trivial(schema) {
            return Ok(vec![Piece::Rule(self.any()?)]);
        }
        // A scalar is the regex path's one lexeme, exact (values left free refused, since a
        // regex unrolls them to a fixed depth). A container is taken apart into rules, its
        // scalars lexemes: as one lexeme its DFA is built whole at the first mask that reaches
        // it and is rarely shared with another schema (an object's keys and values in one
        // automaton), where its parts are small and shared (measured over the MaskBench
        // files: mask p99 down a fifth, compile unchanged). Where the rules refuse a keyword,
        // the regex path's regex is the fallback: exact where it is short, else bounded (free
        // values unrolled a few levels: a subset, never a false accept).
        let plain = !contains_reference(schema);
        if plain && !is_container(schema) && !is_plain_bounded_string(schema) {
            match json_value_to_regex(schema, &self.exact_options()) {
                Ok(regex) => return Ok(self.regex_piece(regex)),
                // Taken apart below.
                Err(FsmError::UnsupportedSchema { .. } | FsmError::AutomatonTooLarge { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        if self.depth >= MAX_SCHEMA_DEPTH {
            return Err(unsupported(
                "$ref",
                path,
                &format!("schemas nested deeper than {MAX_SCHEMA_DEPTH} levels"),
            ));
        }
        let checkpoint = self.builder.checkpoint();
        let num_pending = self.pending.len();
        self.depth += 1;
        let pieces = self.structure(schema, path);
        self.depth -= 1;
        let refused = matches!(pieces, Err(GrammarError::Schema(FsmError::UnsupportedSchema { .. })));
        if !(plain && refused) {
            return pieces;
        }
        // The fallback regex only now that the rules refused (most schemas never need it).
        // (A scalar's exact regex was refused above.)
        let exact = if is_container(schema) {
            let options = JsonSchemaOptions { max_regex_len: MAX_FALLBACK_REGEX_LEN, ..self.exact_options() };
            json_value_to_regex(schema, &options).ok()
        } else {
            None
        };
        let Some(regex) = exact.or_else(|| json_value_to_regex(schema, &self.bounded_options()).ok()) else {
            return pieces;
        };
        // Rules written by the refused attempt are dropped with it.
        self.builder.rollback(&checkpoint);
        let kept = checkpoint.num_nonterminals() as NonterminalId;
        self.references.retain(|_, nonterminal| *nonterminal < kept);
        self.pending.truncate(num_pending);
        self.never = self.never.filter(|&never| never < kept);
        self.any = self.any.filter(|&any| any < kept);
        Ok(self.regex_piece(regex))
    }

    /// The caller's options with values left free admitted at any depth (refused as a regex).
    fn exact_options(&self) -> JsonSchemaOptions {
        JsonSchemaOptions { max_any_depth: None, ..self.options.clone() }
    }

    /// The caller's options with free values unrolled to a fixed depth (the default's when
    /// the caller asked for any depth), and string lengths spelled out whatever the bound:
    /// the fallback where the rules refuse a keyword, rare, so coverage before build time.
    fn bounded_options(&self) -> JsonSchemaOptions {
        let depth = self.options.max_any_depth.or(JsonSchemaOptions::default().max_any_depth);
        JsonSchemaOptions { max_any_depth: depth, max_unrolled_length: None, ..self.options.clone() }
    }

    /// A schema the regex path cannot hold as one regex, taken apart keyword by keyword.
    fn structure(&mut self, schema: &Value, path: &str) -> Result<Vec<Piece>, GrammarError> {
        let map = match schema {
            Value::Bool(true) => return Ok(vec![Piece::Rule(self.any()?)]),
            Value::Bool(false) => return Ok(vec![Piece::Rule(self.never())]),
            Value::Object(map) => map,
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        let overriding_ref = map.contains_key("$ref") && self.reader.ref_overrides_siblings();
        if (map.contains_key("enum") || map.contains_key("const")) && !overriding_ref {
            return self.literals(map, path);
        }
        for &keyword in UNSUPPORTED_ANYWHERE {
            if map.contains_key(keyword) {
                return Err(unsupported(keyword, path, "not expressible by the grammar path"));
            }
        }
        if let Some(reference) = map.get("$ref") {
            let Value::String(reference) = reference else {
                return Err(invalid(path, "'$ref' must be a string"));
            };
            let has_siblings = map.keys().any(|k| k != "$ref" && !is_annotation(k));
            if has_siblings && !self.reader.ref_overrides_siblings() {
                return self.merged(map, path);
            }
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
        if map.contains_key("allOf") {
            return self.merged(map, path);
        }
        for keyword in ["anyOf", "oneOf"] {
            if map.contains_key(keyword) {
                return self.alternatives(map, keyword, path);
            }
        }
        // The merge writes `if` / `then` / `else` as alternatives (drops them in drafts 3 to 6).
        if map.contains_key("if") {
            return self.merged(map, path);
        }
        if map.contains_key("not") {
            return self.negation(map, path);
        }
        let types = self.reader.types(map, path)?;
        let mut alternatives = Vec::new();
        for ty in types {
            alternatives.push(match ty {
                "object" => self.object(map, path)?,
                "array" => self.array(map, path)?,
                scalar => self.scalar(map, scalar, path)?,
            });
        }
        if alternatives.len() == 1 {
            return Ok(alternatives.remove(0));
        }
        Ok(vec![Piece::Rule(self.choice("types", alternatives))])
    }

    /// `enum` / `const`: the values that meet every other keyword of `map` (checked here, where
    /// references resolve), written by the regex path as literals (they hold no references).
    fn literals(&mut self, map: &Map<String, Value>, path: &str) -> Result<Vec<Piece>, GrammarError> {
        let types = self.reader.types(map, path)?;
        let admitted = self.reader.admitted_literals(map, &types, path)?;
        let mut literal = Map::new();
        literal.insert("enum".into(), Value::Array(admitted.clone()));
        literal
            .insert("type".into(), Value::Array(types.iter().map(|t| Value::String((*t).into())).collect()));
        let regex = match json_value_to_regex(&Value::Object(literal), self.options) {
            Ok(regex) => regex,
            // Objects too wide to spell in every order: each value as the object schema it is.
            Err(FsmError::UnsupportedSchema { .. }) if self.options.properties_any_order => {
                let keyword = if map.contains_key("const") { "const" } else { "enum" };
                let branches = admitted
                    .iter()
                    .map(|value| literal::literal_schema(value).ok_or(()))
                    .collect::<Result<Vec<_>, ()>>()
                    .map_err(|()| {
                        unsupported(keyword, path, "an array value holding objects in any order")
                    })?;
                let any_of = Value::Object(Map::from_iter([("anyOf".to_string(), Value::Array(branches))]));
                return self.schema(&any_of, path);
            }
            Err(error) => return Err(error.into()),
        };
        Ok(self.regex_piece(regex))
    }

    /// `allOf` / `$ref` with siblings: one merged schema.
    fn merged(&mut self, map: &Map<String, Value>, path: &str) -> Result<Vec<Piece>, GrammarError> {
        match self.reader.merge_all_of(map, path)? {
            None => Ok(vec![Piece::Rule(self.never())]),
            Some(merged) => self.schema(&Value::Object(merged), path),
        }
    }

    /// `anyOf` / `oneOf`, sibling keywords distributed into every branch.
    fn alternatives(
        &mut self,
        map: &Map<String, Value>,
        keyword: &str,
        path: &str,
    ) -> Result<Vec<Piece>, GrammarError> {
        let merged = branches_with_siblings(map, keyword, path)?;
        let merged = match keyword {
            "oneOf" => match self.reader.one_of_branches(merged.clone(), path) {
                Ok(branches) => branches,
                Err(error) => match exclusive_required(map, path) {
                    Some(branches) => branches,
                    None => return self.one_of_by_negation(merged, error.into()),
                },
            },
            _ => merged,
        };
        let mut alternatives = Vec::new();
        for (branch, branch_path) in &merged {
            alternatives.push(self.schema(branch, branch_path)?);
        }
        Ok(vec![Piece::Rule(self.choice("any_of", alternatives))])
    }

    /// `oneOf` branches that may overlap, spelled exactly: each branch and none of the others
    /// (`not` of their `anyOf`, `negation.rs`), for a few branches; `refused` (why the branches
    /// could not be told apart) when a negation is beyond the grammar.
    fn one_of_by_negation(
        &mut self,
        branches: Vec<(Value, String)>,
        refused: GrammarError,
    ) -> Result<Vec<Piece>, GrammarError> {
        // NOTE: in a recursive document a reference may lead back here, and each level would
        // spell every branch again, twice.
        let recursive = || value_is_recursive(self.root);
        if branches.len() > MAX_NEGATED_BRANCHES
            || self.num_open_one_ofs >= MAX_OPEN_ONE_OFS
            || branches.iter().any(|(branch, _)| contains_reference(branch)) && recursive()
        {
            return Err(refused);
        }
        self.num_open_one_ofs += 1;
        let spelled = self.each_branch_and_none_of_the_others(branches, refused);
        self.num_open_one_ofs -= 1;
        spelled
    }

    /// [`SchemaGrammar::one_of_by_negation`]'s alternatives.
    fn each_branch_and_none_of_the_others(
        &mut self,
        branches: Vec<(Value, String)>,
        refused: GrammarError,
    ) -> Result<Vec<Piece>, GrammarError> {
        let mut alternatives = Vec::new();
        for (index, (branch, branch_path)) in branches.iter().enumerate() {
            let others: Vec<Value> = branches
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != index)
                .map(|(_, (b, _))| b.clone())
                .collect();
            let none_of_the_others = Value::Object(Map::from_iter([(
                "not".to_string(),
                Value::Object(Map::from_iter([("anyOf".to_string(), Value::Array(others))])),
            )]));
            match self.schema(&all_of(vec![branch.clone(), none_of_the_others]), branch_path) {
                Ok(pieces) => alternatives.push(pieces),
                Err(GrammarError::Schema(FsmError::UnsupportedSchema { .. })) => return Err(refused),
                Err(error) => return Err(error),
            }
        }
        Ok(vec![Piece::Rule(self.choice("one_of", alternatives))])
    }
}

/// Most `oneOf` branches spelled as "this one and none of the others" when they may overlap.
const MAX_NEGATED_BRANCHES: usize = 4;

/// Most such `oneOf`s nested in one another.
const MAX_OPEN_ONE_OFS: usize = 2;
