//! [`SchemaReader`]: one schema document as both back ends read it (references, the declared
//! draft, the types a schema object admits, keyword values). What it decides about whole
//! sub-schemas lives beside it: `merge.rs` (`allOf`), `disjoint.rs` (`oneOf`), `admits.rs`
//! (`enum` / `const` values against the other keywords).

use serde_json::{Map, Value};
use sglr_fsm::FsmError;

use crate::draft::{conditions_ignored, ref_overrides_siblings};
use crate::error::{invalid, unsupported};
use crate::keywords::{implied_types, non_negative_integer, ALL_TYPES};
use crate::options::JsonSchemaOptions;
use crate::refs::pointer;

/// A schema document and the options it is read with. The regex back end (`to_regex`) and the
/// grammar path (`sglr_grammar::json_schema_to_grammar`) read schemas through it, so both
/// merge, check and refuse alike.
pub struct SchemaReader<'a> {
    pub(crate) root: &'a Value,
    pub(crate) options: &'a JsonSchemaOptions,
    /// The document's draft makes `$ref` ignore its siblings ([`ref_overrides_siblings`]).
    pub(crate) ref_overrides_siblings: bool,
    /// The document's draft has no `if` ([`conditions_ignored`]).
    pub(crate) conditions_ignored: bool,
}

impl<'a> SchemaReader<'a> {
    pub fn new(root: &'a Value, options: &'a JsonSchemaOptions) -> Self {
        Self {
            root,
            options,
            ref_overrides_siblings: ref_overrides_siblings(root),
            conditions_ignored: conditions_ignored(root),
        }
    }

    /// Whether `$ref` ignores its sibling keywords in this document (drafts 3 to 7).
    pub fn ref_overrides_siblings(&self) -> bool {
        self.ref_overrides_siblings
    }

    pub fn options(&self) -> &JsonSchemaOptions {
        self.options
    }

    /// Resolves a reference within this document (`#` or a JSON pointer `#/...`).
    pub(crate) fn resolve(&self, reference: &str, path: &str) -> Result<&'a Value, FsmError> {
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(unsupported(
                "$ref",
                path,
                &format!("only references within the document are supported, not {reference:?}"),
            ));
        };
        if !fragment.is_empty() && !fragment.starts_with('/') {
            return Err(unsupported(
                "$ref",
                path,
                &format!("anchor references such as {reference:?} are not supported"),
            ));
        }
        pointer(self.root, reference)
            .ok_or_else(|| invalid(path, format!("'$ref' {reference:?} points nowhere in the document")))
    }

    /// The types a schema object admits: its `type` keyword, else those its keywords imply
    /// (`JsonSchemaOptions::implied_types`), else every type (`number` subsumes `integer`).
    pub fn types(&self, map: &Map<String, Value>, path: &str) -> Result<Vec<&'static str>, FsmError> {
        let mut types: Vec<&'static str> = match map.get("type") {
            None => implied_types(map, self.options.implied_types),
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

    /// A non-negative integer keyword such as `minLength`.
    pub(crate) fn usize_keyword(
        &self,
        map: &Map<String, Value>,
        keyword: &str,
        path: &str,
    ) -> Result<Option<usize>, FsmError> {
        match map.get(keyword) {
            None => Ok(None),
            Some(value) => non_negative_integer(value)
                .map(|n| Some(n.min(usize::MAX as u64) as usize))
                .ok_or_else(|| invalid(path, format!("'{keyword}' must be a non-negative integer"))),
        }
    }
}

fn type_name(name: &str, path: &str) -> Result<&'static str, FsmError> {
    ALL_TYPES
        .iter()
        .copied()
        .find(|t| *t == name)
        .ok_or_else(|| invalid(path, format!("unknown type '{name}'")))
}
