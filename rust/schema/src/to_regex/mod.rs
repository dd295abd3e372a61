//! JSON Schema -> regex over JSON text, for `sglr_fsm::TokenFsm::from_regex`: the regex back end.
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
//! ...) is refused with `FsmError::UnsupportedSchema` naming the keyword, never ignored:
//! a compiled schema only admits valid documents. Next to `enum` / `const` every keyword is
//! decided instead, value by value (`SchemaReader::admitted_literals`): the literals written are those that meet it. Unknown formats are not enforced (formats
//! are annotations unless a validator opts in).

mod any_order;
mod literal;
mod object;
mod string;

use serde_json::{Map, Value};
use sglr_fsm::FsmError;

use crate::error::{invalid, unsupported};
use crate::keywords::{is_annotation, numeric_bounds};
use crate::merge::{branches_with_siblings, merge_all_of, Merged};
use crate::numeric;
use crate::options::{JsonSchemaOptions, MAX_REGEX_ANY_ORDER_PROPERTIES};
use crate::reader::SchemaReader;
pub use literal::NEVER;
use literal::{alternation, any_value, value_literal};
use string::string_schema;

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
        reader: SchemaReader::new(schema, options),
        ws: if options.whitespace_pattern.is_empty() {
            String::new()
        } else {
            format!("(?:{})", options.whitespace_pattern)
        },
        ref_stack: Vec::new(),
        depth: 0,
    };
    ctx.schema(schema, "#")
}

/// Keywords that constrain values but cannot be expressed by this compiler, checked on every
/// schema object (type-specific ones are checked where their type is compiled).
const UNSUPPORTED_ANYWHERE: &[&str] = &["not", "if", "$dynamicRef", "$recursiveRef", "dependentSchemas"];

/// The regex back end's walk over one document: what it reads through, and where it is.
struct Ctx<'a> {
    reader: SchemaReader<'a>,
    /// The whitespace regex, grouped (empty when no whitespace is allowed).
    ws: String,
    /// The references being unfolded, innermost last (each counts towards the recursion cut).
    ref_stack: Vec<String>,
    /// Current nesting of `schema` calls (bounded so hostile input cannot overflow the stack).
    depth: usize,
}

/// Deepest nesting of sub-schemas compiled.
const MAX_SCHEMA_DEPTH: usize = 96;

impl Ctx<'_> {
    fn schema(&mut self, schema: &Value, path: &str) -> Result<String, FsmError> {
        if self.depth >= MAX_SCHEMA_DEPTH {
            return Err(unsupported(
                "$ref",
                path,
                &format!("schemas nested deeper than {MAX_SCHEMA_DEPTH} levels"),
            ));
        }
        self.depth += 1;
        let regex = match schema {
            Value::Bool(true) => match self.reader.options.max_any_depth {
                Some(depth) => Ok(any_value(&self.ws, depth)),
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
        if regex.len() > self.reader.options.max_regex_len {
            return Err(FsmError::AutomatonTooLarge {
                what: "schema regex",
                limit: self.reader.options.max_regex_len,
            });
        }
        Ok(regex)
    }

    fn object(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, FsmError> {
        // Finite values: each is checked against every other keyword (`admits`), so none of
        // them needs a regex of its own (`not`, `if` and combinators included).
        let overriding_ref = map.contains_key("$ref") && self.reader.ref_overrides_siblings;
        if (map.contains_key("enum") || map.contains_key("const")) && !overriding_ref {
            let types = self.reader.types(map, path)?;
            return self.literals(map, &types, path);
        }
        if self.reader.conditions_ignored && map.contains_key("if") {
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
            let merged = merge_all_of(&self.reader, map, path)?;
            return self.compile_merged(merged, path);
        }
        for keyword in ["anyOf", "oneOf"] {
            if map.contains_key(keyword) {
                return self.alternatives(map, keyword, path);
            }
        }
        let types = self.reader.types(map, path)?;
        let mut parts = Vec::new();
        for ty in &types {
            let part = match *ty {
                "string" => string_schema(&self.reader, map, path)?,
                "integer" => self.integer(map, path)?,
                "number" => self.number(map, path)?,
                "boolean" => "(?:true|false)".into(),
                "null" => "null".into(),
                "object" => self.object_schema(map, path)?,
                "array" => self.array_schema(map, path)?,
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
        if depth >= self.reader.options.max_recursion_depth {
            // Recursion cut: this branch can no longer be taken.
            return Ok(NEVER.into());
        }
        let has_siblings =
            !self.reader.ref_overrides_siblings && map.keys().any(|k| k != "$ref" && !is_annotation(k));
        if has_siblings {
            let merged = merge_all_of(&self.reader, map, path)?;
            return self.compile_merged(merged, path);
        }
        let target = self.reader.resolve(reference, path)?;
        self.ref_stack.push(reference.clone());
        let result = self.schema(target, reference);
        self.ref_stack.pop();
        result
    }

    /// Compiles a merged `allOf`, counting the references it inlined as recursion.
    fn compile_merged(&mut self, merged: Merged, path: &str) -> Result<String, FsmError> {
        let Some(schema) = merged.schema else {
            return Ok(NEVER.into());
        };
        let too_deep = merged.references.iter().any(|reference| {
            self.ref_stack.iter().filter(|r| *r == reference).count()
                >= self.reader.options.max_recursion_depth
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

    /// `anyOf` / `oneOf`: sibling keywords are distributed into every branch.
    fn alternatives(
        &mut self,
        map: &Map<String, Value>,
        keyword: &str,
        path: &str,
    ) -> Result<String, FsmError> {
        let mut merged_branches = branches_with_siblings(map, keyword, path)?;
        if keyword == "oneOf" {
            merged_branches = self.reader.one_of_branches(merged_branches, path)?;
        }
        let mut parts = Vec::new();
        for (branch, branch_path) in &merged_branches {
            parts.push(self.schema(branch, branch_path)?);
        }
        Ok(alternation(parts))
    }

    /// `enum` / `const`: the admitted values (`SchemaReader::admitted_literals`) as literals.
    fn literals(&mut self, map: &Map<String, Value>, types: &[&str], path: &str) -> Result<String, FsmError> {
        let values = self.reader.admitted_literals(map, types, path)?;
        let any_order = self.reader.options.properties_any_order;
        let keyword = if map.contains_key("const") { "const" } else { "enum" };
        let parts = values
            .iter()
            .map(|v| {
                value_literal(&self.ws, v, any_order).ok_or_else(|| {
                    let reason = format!(
                        "an object value with more than {MAX_REGEX_ANY_ORDER_PROPERTIES} properties in any order"
                    );
                    unsupported(keyword, path, &reason)
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(alternation(parts))
    }

    fn integer(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, FsmError> {
        check_multiple_of(map, path, true)?;
        let (lo, hi) = numeric_bounds(map, path)?;
        let bounds = numeric::IntBounds {
            lo: lo.map(|b| b.int_lower()).transpose().map_err(|r| unsupported("minimum", path, &r))?,
            hi: hi.map(|b| b.int_upper()).transpose().map_err(|r| unsupported("maximum", path, &r))?,
        };
        Ok(numeric::integer_in(bounds).unwrap_or_else(|| NEVER.into()))
    }

    fn number(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, FsmError> {
        check_multiple_of(map, path, false)?;
        let (lo, hi) = numeric_bounds(map, path)?;
        let lo = lo.map(|b| b.decimal()).transpose().map_err(|r| unsupported("minimum", path, &r))?;
        let hi = hi.map(|b| b.decimal()).transpose().map_err(|r| unsupported("maximum", path, &r))?;
        Ok(numeric::number_in(lo, hi).unwrap_or_else(|| NEVER.into()))
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
