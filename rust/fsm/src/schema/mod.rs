//! JSON Schema -> regex over JSON text, for [`crate::TokenFsm::from_regex`].
//!
//! Supported: `type` (one or several), objects (`properties` in schema order, `required`,
//! `additionalProperties` false / true / schema), strings (`enum`, `const`, `pattern`,
//! `minLength` / `maxLength`, formats date, time, date-time, email, uuid, ipv4, hostname, uri,
//! uri-reference), integers and numbers (`minimum` / `maximum`, exclusive forms, fractional
//! bounds exactly; bounded numbers are written without exponent), booleans, null, arrays (`items`, `prefixItems` / tuple `items`,
//! `minItems` / `maxItems`), `anyOf`, `oneOf` (when its branches are provably disjoint),
//! `allOf` (merged), `$ref` within the document (recursion unrolled to a fixed depth).
//!
//! Anything that would need more than a regex (`not`, `if`, `uniqueItems`, `patternProperties`,
//! ...) is refused with [`FsmError::UnsupportedSchema`] naming the keyword, never ignored:
//! a compiled schema only admits valid documents. Next to `enum` / `const` every keyword is
//! decided instead, value by value (`admits.rs`): the literals written are those that meet it. Unknown formats are not enforced (formats
//! are annotations unless a validator opts in).

mod admits;
mod disjoint;
mod draft;
pub use draft::{conditions_ignored, ref_overrides_siblings};
mod keywords;
pub use keywords::{is_annotation, keyword_type};
pub use literal::NEVER as NEVER_REGEX;
pub use numeric::split_decimal;
mod literal;
mod merge;
mod numeric;
mod object;
mod pattern;
mod string;

use serde_json::{Map, Value};

use crate::error::FsmError;
use literal::{any_value, value_literal, NEVER};

/// How JSON text may be laid out and how far generic values and recursion unfold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSchemaOptions {
    /// Regex for the whitespace allowed between JSON tokens. The default `[ ]?` admits both
    /// compact output and Python's `json.dumps` layout while keeping a model from looping on
    /// whitespace; `[ \t\n\r]*` is the fully flexible choice.
    pub whitespace_pattern: String,
    /// What an object allows when its schema says nothing about `additionalProperties`:
    /// `false` (the default) admits only declared properties, as generation wants; `true`
    /// follows the JSON Schema specification and admits any other property too.
    pub additional_properties_default: bool,
    /// The types of a schema without `type` whose keywords belong to one type (`properties`,
    /// `minLength`, `minimum` ...): `true` (the default) admits only the types those keywords
    /// imply (`{"properties": ...}` is an object), as generation wants; `false` follows the
    /// specification, where such keywords constrain only values of their own type and every
    /// other type stays free (`{"properties": ...}` also admits `"text"` and `3`). `enum` and
    /// `const` restrict the types either way.
    pub implied_types: bool,
    /// Nesting depth of arrays/objects inside an unconstrained value (`{}` or `true`, and the
    /// members an object or array leaves free). `None`: any depth, as the schema says, which
    /// no regex can hold: such a schema is refused ([`FsmError::UnsupportedSchema`] naming
    /// the keyword that leaves the value free) and the grammar path takes it.
    pub max_any_depth: Option<usize>,
    /// How many times one `$ref` may be unfolded inside itself; deeper recursion is cut.
    pub max_recursion_depth: usize,
    /// Largest regex (bytes) the schema may expand to; past it `AutomatonTooLarge`, which
    /// routes the schema to the grammar path (lexemes built on first use). Determinizing a
    /// schema regex costs 1 to 5 ms per KiB of it here (with the first mask), so the default
    /// keeps an eager DFA to a few ms.
    pub max_regex_len: usize,
    /// Largest string length bound (`maxLength`, or `minLength` without one) spelled out as a
    /// counted repetition: each counted character is a copy of a character's ~13 DFA states,
    /// which determinization pays for (about 85 µs a count here: `maxLength` 10,000 took a
    /// second). Past it the string is refused ([`FsmError::UnsupportedSchema`] naming the
    /// keyword) and the grammar path takes it as a counted lexeme built directly
    /// ([`json_string_of_length`]). `None`: spelled out whatever the bound.
    pub max_unrolled_length: Option<usize>,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        Self {
            whitespace_pattern: "[ ]?".into(),
            additional_properties_default: false,
            implied_types: true,
            max_any_depth: Some(3),
            max_recursion_depth: 3,
            max_regex_len: DEFAULT_MAX_REGEX_LEN,
            max_unrolled_length: Some(DEFAULT_MAX_UNROLLED_LENGTH),
        }
    }
}

/// [`JsonSchemaOptions::max_regex_len`]'s default.
pub const DEFAULT_MAX_REGEX_LEN: usize = 4 << 10;

/// [`JsonSchemaOptions::max_unrolled_length`]'s default: a string bound this large already
/// costs a few ms of determinization (`benches/results/maskbench_grammar_cpu.md`).
pub const DEFAULT_MAX_UNROLLED_LENGTH: usize = 32;

/// Compiles a JSON schema (given as JSON text) into a regex for the JSON documents it admits.
pub fn json_schema_to_regex(schema: &str, options: &JsonSchemaOptions) -> Result<String, FsmError> {
    let value: Value = serde_json::from_str(schema)
        .map_err(|e| FsmError::InvalidSchema { path: "#".into(), message: format!("not valid JSON: {e}") })?;
    json_value_to_regex(&value, options)
}

/// Like [`json_schema_to_regex`] for an already parsed schema.
pub fn json_value_to_regex(schema: &Value, options: &JsonSchemaOptions) -> Result<String, FsmError> {
    regex_syntax::parse(&options.whitespace_pattern).map_err(|e| {
        FsmError::InvalidRegex(format!("whitespace pattern {:?}: {e}", options.whitespace_pattern))
    })?;
    let mut ctx = Ctx {
        root: schema,
        options,
        ws: if options.whitespace_pattern.is_empty() {
            String::new()
        } else {
            format!("(?:{})", options.whitespace_pattern)
        },
        ref_stack: Vec::new(),
        depth: 0,
        ref_overrides_siblings: ref_overrides_siblings(schema),
        conditions_ignored: conditions_ignored(schema),
    };
    ctx.schema(schema, "#")
}

/// The analyses this compiler makes of a schema (merging `allOf`, checking `oneOf`
/// disjointness, the types a schema admits), for compilers that build on this one (the
/// grammar path), so both read schemas the same way.
pub struct SchemaAnalysis<'a> {
    ctx: Ctx<'a>,
}

impl<'a> SchemaAnalysis<'a> {
    pub fn new(root: &'a Value, options: &'a JsonSchemaOptions) -> Self {
        Self {
            ctx: Ctx {
                root,
                options,
                ws: String::new(),
                ref_stack: Vec::new(),
                depth: 0,
                ref_overrides_siblings: ref_overrides_siblings(root),
                conditions_ignored: conditions_ignored(root),
            },
        }
    }

    /// `allOf` (and `$ref` with siblings) merged into one schema object; `None` when nothing
    /// satisfies it. Merges that cannot be done exactly are refused.
    pub fn merge_all_of(
        &self,
        map: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<Map<String, Value>>, FsmError> {
        Ok(merge::merge_all_of(&self.ctx, map, path)?.schema)
    }

    /// `oneOf` branches (schema, path) as an alternation that no value can match twice: the
    /// branches themselves, or each with the types taken out that two of them leave entirely
    /// free (no value of those types is valid); refused unless that is evident.
    pub fn one_of_branches(
        &self,
        branches: Vec<(Value, String)>,
        path: &str,
    ) -> Result<Vec<(Value, String)>, FsmError> {
        let excluded = disjoint::check_disjoint(&self.ctx, &branches, path)?;
        Ok(if excluded.is_empty() { branches } else { without_types(branches, &excluded) })
    }

    /// The `enum` / `const` values of `map` (those of `types`) that also meet its other
    /// keywords: what a literal alternation of them may admit.
    pub fn admitted_literals(
        &self,
        map: &Map<String, Value>,
        types: &[&str],
        path: &str,
    ) -> Result<Vec<Value>, FsmError> {
        self.ctx.admitted_literals(map, types, path)
    }

    /// Whether `$ref` ignores its sibling keywords in this document ([`ref_overrides_siblings`]).
    pub fn ref_overrides_siblings(&self) -> bool {
        self.ctx.ref_overrides_siblings
    }

    /// The types a schema object admits (`number` subsumes `integer`).
    pub fn types(&self, map: &Map<String, Value>, path: &str) -> Result<Vec<&'static str>, FsmError> {
        self.ctx.types(map, path)
    }
}

pub(crate) fn unsupported(keyword: &str, path: &str, reason: &str) -> FsmError {
    FsmError::UnsupportedSchema { keyword: keyword.into(), path: path.into(), reason: reason.into() }
}

pub(crate) fn invalid(path: &str, message: impl Into<String>) -> FsmError {
    FsmError::InvalidSchema { path: path.into(), message: message.into() }
}

/// Keywords that constrain values but cannot be expressed by this compiler, checked on every
/// schema object (type-specific ones are checked where their type is compiled).
const UNSUPPORTED_ANYWHERE: &[&str] = &["not", "if", "$dynamicRef", "$recursiveRef", "dependentSchemas"];

/// The JSON types, in the order alternatives are emitted.
pub(crate) const ALL_TYPES: [&str; 7] = ["object", "array", "string", "integer", "number", "boolean", "null"];

/// `branches` (schema, path), each also limited to the types not in `excluded` (`type` names).
fn without_types(branches: Vec<(Value, String)>, excluded: &[&str]) -> Vec<(Value, String)> {
    let allowed: Vec<Value> =
        ALL_TYPES.iter().filter(|t| !excluded.contains(t)).map(|t| Value::String((*t).into())).collect();
    branches
        .into_iter()
        .map(|(branch, path)| {
            let mut limit = Map::new();
            limit.insert("type".into(), Value::Array(allowed.clone()));
            let mut combined = Map::new();
            combined.insert("allOf".into(), Value::Array(vec![branch, Value::Object(limit)]));
            (Value::Object(combined), path)
        })
        .collect()
}

pub(crate) struct Ctx<'a> {
    root: &'a Value,
    options: &'a JsonSchemaOptions,
    /// The whitespace regex, grouped (empty when no whitespace is allowed).
    pub ws: String,
    ref_stack: Vec<String>,
    /// Current nesting of `schema` calls (bounded so hostile input cannot overflow the stack).
    depth: usize,
    /// The document's draft makes `$ref` ignore its siblings ([`ref_overrides_siblings`]).
    pub ref_overrides_siblings: bool,
    /// The document's draft has no `if` ([`conditions_ignored`]).
    pub conditions_ignored: bool,
}

/// Deepest nesting of sub-schemas compiled.
const MAX_SCHEMA_DEPTH: usize = 96;

impl<'a> Ctx<'a> {
    pub fn schema(&mut self, schema: &Value, path: &str) -> Result<String, FsmError> {
        if self.depth >= MAX_SCHEMA_DEPTH {
            return Err(unsupported(
                "$ref",
                path,
                &format!("schemas nested deeper than {MAX_SCHEMA_DEPTH} levels"),
            ));
        }
        self.depth += 1;
        let regex = match schema {
            Value::Bool(true) => match self.options.max_any_depth {
                Some(depth) => Ok(any_value(self, depth)),
                None => Err(unsupported(
                    free_value_keyword(path),
                    path,
                    "a free value may nest to any depth, which no regex can hold",
                )),
            },
            Value::Bool(false) => Ok(NEVER.into()),
            Value::Object(map) => self.object(map, path),
            _ => Err(invalid(path, "a schema must be an object or a boolean")),
        };
        self.depth -= 1;
        let regex = regex?;
        if regex.len() > self.options.max_regex_len {
            return Err(FsmError::AutomatonTooLarge {
                what: "schema regex",
                limit: self.options.max_regex_len,
            });
        }
        Ok(regex)
    }

    fn object(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, FsmError> {
        // Finite values: each is checked against every other keyword (`admits`), so none of
        // them needs a regex of its own (`not`, `if` and combinators included).
        let overriding_ref = map.contains_key("$ref") && self.ref_overrides_siblings;
        if (map.contains_key("enum") || map.contains_key("const")) && !overriding_ref {
            let types = self.types(map, path)?;
            return self.literals(map, &types, path);
        }
        if self.conditions_ignored && map.contains_key("if") {
            let mut without = map.clone();
            without.remove("if");
            return self.object(&without, path);
        }
        for &keyword in UNSUPPORTED_ANYWHERE {
            if map.contains_key(keyword) {
                return Err(unsupported(keyword, path, "not expressible as a regular language"));
            }
        }
        if let Some(reference) = map.get("$ref") {
            return self.reference(map, reference, path);
        }
        if map.contains_key("allOf") {
            let merged = merge::merge_all_of(self, map, path)?;
            return self.compile_merged(merged, path);
        }
        for keyword in ["anyOf", "oneOf"] {
            if map.contains_key(keyword) {
                return self.alternatives(map, keyword, path);
            }
        }
        let types = self.types(map, path)?;
        let mut parts = Vec::new();
        for ty in &types {
            let part = match *ty {
                "string" => string::string_schema(self, map, path)?,
                "integer" => self.integer(map, path)?,
                "number" => self.number(map, path)?,
                "boolean" => "(?:true|false)".into(),
                "null" => "null".into(),
                "object" => object::object_schema(self, map, path)?,
                "array" => object::array_schema(self, map, path)?,
                other => return Err(invalid(path, format!("unknown type '{other}'"))),
            };
            parts.push(part);
        }
        Ok(alternation(parts))
    }

    /// `$ref` (with any sibling keywords applied as an `allOf`).
    fn reference(
        &mut self,
        map: &Map<String, Value>,
        reference: &Value,
        path: &str,
    ) -> Result<String, FsmError> {
        let Value::String(reference) = reference else {
            return Err(invalid(path, "'$ref' must be a string"));
        };
        let depth = self.ref_stack.iter().filter(|r| *r == reference).count();
        if depth >= self.options.max_recursion_depth {
            // Recursion cut: this branch can no longer be taken.
            return Ok(NEVER.into());
        }
        let has_siblings =
            !self.ref_overrides_siblings && map.keys().any(|k| k != "$ref" && !keywords::is_annotation(k));
        if has_siblings {
            let merged = merge::merge_all_of(self, map, path)?;
            return self.compile_merged(merged, path);
        }
        let target = self.resolve(reference, path)?;
        self.ref_stack.push(reference.clone());
        let result = self.schema(target, reference);
        self.ref_stack.pop();
        result
    }

    /// Compiles a merged `allOf`, counting the references it inlined as recursion.
    fn compile_merged(&mut self, merged: merge::Merged, path: &str) -> Result<String, FsmError> {
        let Some(schema) = merged.schema else {
            return Ok(NEVER.into());
        };
        let too_deep = merged.references.iter().any(|reference| {
            self.ref_stack.iter().filter(|r| *r == reference).count() >= self.options.max_recursion_depth
        });
        if too_deep {
            return Ok(NEVER.into());
        }
        let depth = self.ref_stack.len();
        self.ref_stack.extend(merged.references);
        let result = self.object(&schema, path);
        self.ref_stack.truncate(depth);
        result
    }

    /// Resolves a reference within this document (`#` or a JSON pointer `#/...`).
    pub fn resolve(&self, reference: &str, path: &str) -> Result<&'a Value, FsmError> {
        let Some(pointer) = reference.strip_prefix('#') else {
            return Err(unsupported(
                "$ref",
                path,
                &format!("only references within the document are supported, not {reference:?}"),
            ));
        };
        if pointer.is_empty() {
            return Ok(self.root);
        }
        if !pointer.starts_with('/') {
            return Err(unsupported(
                "$ref",
                path,
                &format!("anchor references such as {reference:?} are not supported"),
            ));
        }
        let decoded = percent_decode(pointer);
        self.root
            .pointer(&decoded)
            .ok_or_else(|| invalid(path, format!("'$ref' {reference:?} points nowhere in the document")))
    }

    /// `anyOf` / `oneOf`: sibling keywords are distributed into every branch.
    fn alternatives(
        &mut self,
        map: &Map<String, Value>,
        keyword: &str,
        path: &str,
    ) -> Result<String, FsmError> {
        let Some(Value::Array(branches)) = map.get(keyword) else {
            return Err(invalid(path, format!("'{keyword}' must be an array")));
        };
        let mut siblings = map.clone();
        siblings.remove(keyword);
        let has_siblings = siblings.keys().any(|k| !keywords::is_annotation(k));
        let mut merged_branches = Vec::new();
        for (index, branch) in branches.iter().enumerate() {
            let branch_path = format!("{path}/{keyword}/{index}");
            let merged = if has_siblings {
                let mut combined = Map::new();
                combined.insert(
                    "allOf".into(),
                    Value::Array(vec![Value::Object(siblings.clone()), branch.clone()]),
                );
                Value::Object(combined)
            } else {
                branch.clone()
            };
            merged_branches.push((merged, branch_path));
        }
        if keyword == "oneOf" {
            let excluded = disjoint::check_disjoint(self, &merged_branches, path)?;
            if !excluded.is_empty() {
                merged_branches = without_types(merged_branches, &excluded);
            }
        }
        let mut parts = Vec::new();
        for (branch, branch_path) in &merged_branches {
            parts.push(self.schema(branch, branch_path)?);
        }
        Ok(alternation(parts))
    }

    /// The types a schema object admits: its `type` keyword, else those its keywords imply
    /// (`JsonSchemaOptions::implied_types`), else every type.
    pub fn types(&self, map: &Map<String, Value>, path: &str) -> Result<Vec<&'static str>, FsmError> {
        let mut types: Vec<&'static str> = match map.get("type") {
            None => keywords::implied_types(map, self.options.implied_types),
            Some(Value::String(name)) => vec![type_name(name, path)?],
            Some(Value::Array(names)) => names
                .iter()
                .map(|n| match n {
                    Value::String(name) => type_name(name, path),
                    _ => Err(invalid(path, "'type' entries must be strings")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid(path, "'type' must be a string or an array")),
        };
        if map.get("nullable") == Some(&Value::Bool(true)) && !types.contains(&"null") {
            types.push("null");
        }
        // `number` already covers integers.
        if types.contains(&"number") {
            types.retain(|t| *t != "integer");
        }
        Ok(types)
    }

    /// `enum` / `const`: the admitted values ([`Ctx::admitted_literals`]) as literals.
    fn literals(&mut self, map: &Map<String, Value>, types: &[&str], path: &str) -> Result<String, FsmError> {
        let values = self.admitted_literals(map, types, path)?;
        let parts = values.iter().map(|v| value_literal(self, v)).collect();
        Ok(alternation(parts))
    }

    /// The `enum` / `const` values of `map` (one of them present) that have one of `types`
    /// and meet `map`'s other keywords.
    pub(crate) fn admitted_literals(
        &self,
        map: &Map<String, Value>,
        types: &[&str],
        path: &str,
    ) -> Result<Vec<Value>, FsmError> {
        let mut values: Vec<Value> = match map.get("enum") {
            Some(Value::Array(values)) => values.clone(),
            Some(_) => return Err(invalid(path, "'enum' must be an array")),
            None => vec![map["const"].clone()],
        };
        if let (Some(constant), true) = (map.get("const"), map.contains_key("enum")) {
            values.retain(|v| v == constant);
        }
        values.retain(|v| types.iter().any(|t| keywords::value_has_type(v, t)));
        self.admitted(map, values, path)
    }

    /// The `values` (of `map`'s `enum` / `const`) that also meet `map`'s other keywords.
    pub(crate) fn admitted(
        &self,
        map: &Map<String, Value>,
        values: Vec<Value>,
        path: &str,
    ) -> Result<Vec<Value>, FsmError> {
        // NOTE: the values come from `enum` / `const`: checking them there again would cost a
        // scan of the list per value.
        let rest: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "enum" | "const"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if rest.keys().all(|k| k == "type" || keywords::is_annotation(k)) {
            return Ok(values);
        }
        let schema = Value::Object(rest);
        let mut admitted = Vec::with_capacity(values.len());
        for value in values {
            if self.admits(&schema, &value, path)? {
                admitted.push(value);
            }
        }
        Ok(admitted)
    }

    fn integer(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, FsmError> {
        check_multiple_of(map, path, true)?;
        let (lo, hi) = keywords::numeric_bounds(map, path)?;
        let bounds = numeric::IntBounds {
            lo: lo.map(|b| b.int_lower()).transpose().map_err(|r| unsupported("minimum", path, &r))?,
            hi: hi.map(|b| b.int_upper()).transpose().map_err(|r| unsupported("maximum", path, &r))?,
        };
        Ok(numeric::integer_in(bounds).unwrap_or_else(|| NEVER.into()))
    }

    fn number(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, FsmError> {
        check_multiple_of(map, path, false)?;
        let (lo, hi) = keywords::numeric_bounds(map, path)?;
        let lo = lo.map(|b| b.decimal()).transpose().map_err(|r| unsupported("minimum", path, &r))?;
        let hi = hi.map(|b| b.decimal()).transpose().map_err(|r| unsupported("maximum", path, &r))?;
        Ok(numeric::number_in(lo, hi).unwrap_or_else(|| NEVER.into()))
    }

    pub fn options(&self) -> &JsonSchemaOptions {
        self.options
    }

    /// A non-negative integer keyword such as `minLength`.
    pub fn usize_keyword(
        &self,
        map: &Map<String, Value>,
        keyword: &str,
        path: &str,
    ) -> Result<Option<usize>, FsmError> {
        match map.get(keyword) {
            None => Ok(None),
            Some(value) => value
                .as_u64()
                .or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
                .map(|n| Some(n.min(usize::MAX as u64) as usize))
                .ok_or_else(|| invalid(path, format!("'{keyword}' must be a non-negative integer"))),
        }
    }
}

fn check_multiple_of(map: &Map<String, Value>, path: &str, is_integer: bool) -> Result<(), FsmError> {
    match map.get("multipleOf") {
        None => Ok(()),
        Some(value) if is_integer && value.as_f64() == Some(1.0) => Ok(()),
        Some(_) => Err(unsupported("multipleOf", path, "divisibility is not expressible as a regex here")),
    }
}

/// The keyword that leaves the value at `path` free (for a refusal's name).
fn free_value_keyword(path: &str) -> &str {
    match path.rsplit('/').next() {
        Some(last @ ("additionalProperties" | "items" | "additionalItems")) => last,
        _ => "true",
    }
}

fn type_name(name: &str, path: &str) -> Result<&'static str, FsmError> {
    ALL_TYPES
        .iter()
        .copied()
        .find(|t| *t == name)
        .ok_or_else(|| invalid(path, format!("unknown type '{name}'")))
}

/// `(?:a|b|...)`, or the never-matching regex for no alternatives.
pub(crate) fn alternation(parts: Vec<String>) -> String {
    match parts.len() {
        0 => NEVER.into(),
        1 => parts.into_iter().next().expect("one part"),
        _ => format!("(?:{})", parts.join("|")),
    }
}

/// Decodes `%XX` escapes in a URI-fragment JSON pointer.
pub fn percent_decode(pointer: &str) -> String {
    let bytes = pointer.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
