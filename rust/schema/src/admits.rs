//! Whether one JSON value meets a schema, for the finite values `enum` and `const` list: they
//! are written as literals, so each must first be checked against the keywords beside them
//! (`{"enum": ["abc", "a"], "maxLength": 2}` admits only "a"; an `enum` in one `allOf` part
//! and bounds in another). A keyword this check cannot decide refuses the schema by name,
//! never passes a value unchecked. `format` is an annotation here, as validators read it by
//! default.

use serde_json::{Map, Value};

use sglr_fsm::FsmError;

use crate::error::{invalid, unsupported};
use crate::keywords::{is_annotation, numeric_bounds, value_has_type};
use crate::pattern::search_regex;
use crate::reader::SchemaReader;

/// Deepest nesting of schemas one check follows (`$ref` chains included): a finite value
/// bounds the descent through its members, not a `$ref` to itself.
const MAX_CHECK_DEPTH: usize = 64;

impl SchemaReader<'_> {
    /// The `enum` / `const` values of `map` (one of them present) that have one of `types`
    /// and meet `map`'s other keywords.
    pub fn admitted_literals(
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
        values.retain(|v| types.iter().any(|t| value_has_type(v, t)));
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
        if rest.keys().all(|k| k == "type" || is_annotation(k)) {
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

    /// Whether `value` meets `schema` (a sub-schema of this document at `path`).
    pub(crate) fn admits(&self, schema: &Value, value: &Value, path: &str) -> Result<bool, FsmError> {
        self.admits_at(schema, value, path, 0)
    }

    fn admits_at(&self, schema: &Value, value: &Value, path: &str, depth: usize) -> Result<bool, FsmError> {
        if depth > MAX_CHECK_DEPTH {
            return Err(unsupported("$ref", path, "too deep to check an enum value against"));
        }
        let map = match schema {
            Value::Bool(admitted) => return Ok(*admitted),
            Value::Object(map) => map,
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        let depth = depth + 1;
        if let Some(reference) = map.get("$ref") {
            let Value::String(reference) = reference else {
                return Err(invalid(path, "'$ref' must be a string"));
            };
            let target = self.resolve(reference, path)?;
            if !self.admits_at(target, value, path, depth)? {
                return Ok(false);
            }
            if self.ref_overrides_siblings {
                return Ok(true);
            }
        }
        for (keyword, argument) in map {
            if is_annotation(keyword) || keyword == "$ref" {
                continue;
            }
            let at = format!("{path}/{keyword}");
            if !self.keyword_admits(map, keyword, argument, value, &at, depth)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether `value` meets one keyword of `map` (keywords read together, such as `items`
    /// with `additionalItems`, are decided by the first of them).
    fn keyword_admits(
        &self,
        map: &Map<String, Value>,
        keyword: &str,
        argument: &Value,
        value: &Value,
        path: &str,
        depth: usize,
    ) -> Result<bool, FsmError> {
        let admits = |schema: &Value, value: &Value| self.admits_at(schema, value, path, depth);
        let schemas = |argument| array_of(argument, keyword, path);
        let count = |argument: &Value| {
            argument
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| invalid(path, format!("'{keyword}' must be a count")))
        };
        Ok(match (keyword, value) {
            ("type", _) => {
                let names: Vec<&str> = match argument {
                    Value::String(name) => vec![name.as_str()],
                    Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
                    _ => return Err(invalid(path, "'type' must be a string or an array")),
                };
                let nullable = map.get("nullable") == Some(&Value::Bool(true)) && value.is_null();
                nullable || names.iter().any(|name| value_has_type(value, name))
            }
            ("nullable", _) | ("format", _) => true,
            ("enum", _) => schemas(argument)?.iter().any(|v| json_equal(v, value)),
            ("const", _) => json_equal(argument, value),
            ("allOf", _) => {
                for part in schemas(argument)? {
                    if !admits(part, value)? {
                        return Ok(false);
                    }
                }
                true
            }
            ("anyOf", _) => {
                for part in schemas(argument)? {
                    if admits(part, value)? {
                        return Ok(true);
                    }
                }
                false
            }
            ("oneOf", _) => {
                let mut matched = 0;
                for part in schemas(argument)? {
                    matched += usize::from(admits(part, value)?);
                }
                matched == 1
            }
            ("not", _) => !admits(argument, value)?,
            ("if", _) if self.conditions_ignored => true,
            ("if", _) => {
                let branch = if admits(argument, value)? { map.get("then") } else { map.get("else") };
                branch.map_or(Ok(true), |branch| admits(branch, value))?
            }
            ("minLength", Value::String(text)) => text.chars().count() >= count(argument)?,
            ("maxLength", Value::String(text)) => text.chars().count() <= count(argument)?,
            ("pattern", Value::String(text)) => {
                let Value::String(pattern) = argument else {
                    return Err(invalid(path, "'pattern' must be a string"));
                };
                search_regex(pattern)
                    .map_err(|reason| unsupported("pattern", path, &reason))?
                    .is_match(text.as_str())
            }
            ("minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum", Value::Number(number)) => {
                let Some(x) = number.as_f64() else { return Ok(false) };
                let (lo, hi) = numeric_bounds(map, path)?;
                lo.is_none_or(|b| x > b.value || !b.exclusive && x == b.value)
                    && hi.is_none_or(|b| x < b.value || !b.exclusive && x == b.value)
            }
            ("multipleOf", Value::Number(number)) => {
                let divisor = argument
                    .as_f64()
                    .filter(|d| *d > 0.0)
                    .ok_or_else(|| invalid(path, "'multipleOf' must be a positive number"))?;
                let Some(x) = number.as_f64() else { return Ok(false) };
                let quotient = x / divisor;
                // NOTE: a decimal divisor is inexact in binary (0.1): a quotient within a few
                // ulps of an integer is that integer.
                (quotient - quotient.round()).abs() <= 1e-9 * quotient.abs().max(1.0)
            }
            ("minItems", Value::Array(items)) => items.len() >= count(argument)?,
            ("maxItems", Value::Array(items)) => items.len() <= count(argument)?,
            ("uniqueItems", Value::Array(items)) => {
                argument != &Value::Bool(true)
                    || items.iter().enumerate().all(|(i, a)| items[..i].iter().all(|b| !json_equal(a, b)))
            }
            ("prefixItems", Value::Array(items)) => {
                let prefix = schemas(argument)?;
                for (schema, item) in prefix.iter().zip(items) {
                    if !admits(schema, item)? {
                        return Ok(false);
                    }
                }
                true
            }
            ("items", Value::Array(items)) => {
                // Tuple `items` (before 2020-12) with `additionalItems`, or the schema of every
                // item past `prefixItems`.
                let (positions, rest) = match argument {
                    Value::Array(positions) => (positions.as_slice(), map.get("additionalItems")),
                    schema => (&[][..], Some(schema)),
                };
                let skip = match (argument, map.get("prefixItems")) {
                    (Value::Array(_), _) => 0,
                    (_, Some(prefix)) => schemas(prefix)?.len(),
                    (_, None) => 0,
                };
                for (index, item) in items.iter().enumerate().skip(skip) {
                    let schema = positions.get(index).or(if index >= positions.len() { rest } else { None });
                    if let Some(schema) = schema {
                        if !admits(schema, item)? {
                            return Ok(false);
                        }
                    }
                }
                true
            }
            ("additionalItems", Value::Array(items)) => {
                // Read with a tuple `items`; alone (no tuple) it constrains nothing.
                match (map.get("items"), map.get("prefixItems")) {
                    (Some(Value::Array(_)), _) => true,
                    (None, Some(prefix)) => {
                        let skip = schemas(prefix)?.len();
                        for item in items.iter().skip(skip) {
                            if !admits(argument, item)? {
                                return Ok(false);
                            }
                        }
                        true
                    }
                    _ => true,
                }
            }
            ("contains", Value::Array(items)) => {
                let mut found = 0;
                for item in items {
                    found += usize::from(admits(argument, item)?);
                }
                let least = map.get("minContains").map(count).transpose()?.unwrap_or(1);
                let most = map.get("maxContains").map(count).transpose()?;
                found >= least && most.is_none_or(|most| found <= most)
            }
            ("minContains" | "maxContains", _) => true,
            ("required", Value::Object(members)) => {
                schemas(argument)?.iter().all(|name| name.as_str().is_some_and(|n| members.contains_key(n)))
            }
            ("minProperties", Value::Object(members)) => members.len() >= count(argument)?,
            ("maxProperties", Value::Object(members)) => members.len() <= count(argument)?,
            ("properties", Value::Object(members)) => {
                let Value::Object(declared) = argument else {
                    return Err(invalid(path, "'properties' must be an object"));
                };
                for (name, member) in members {
                    if let Some(schema) = declared.get(name) {
                        if !admits(schema, member)? {
                            return Ok(false);
                        }
                    }
                }
                true
            }
            ("patternProperties", Value::Object(members)) => {
                let Value::Object(patterns) = argument else {
                    return Err(invalid(path, "'patternProperties' must be an object"));
                };
                for (pattern, schema) in patterns {
                    let regex =
                        search_regex(pattern).map_err(|reason| unsupported(keyword, path, &reason))?;
                    for (name, member) in members {
                        if regex.is_match(name.as_str()) && !admits(schema, member)? {
                            return Ok(false);
                        }
                    }
                }
                true
            }
            ("additionalProperties", Value::Object(members)) => {
                for (name, member) in members {
                    if !self.declared_or_matched(map, name, path)? && !admits(argument, member)? {
                        return Ok(false);
                    }
                }
                true
            }
            ("propertyNames", Value::Object(members)) => {
                for name in members.keys() {
                    if !admits(argument, &Value::String(name.clone()))? {
                        return Ok(false);
                    }
                }
                true
            }
            ("dependencies" | "dependentRequired" | "dependentSchemas", Value::Object(members)) => {
                let Value::Object(dependencies) = argument else {
                    return Err(invalid(path, format!("'{keyword}' must be an object")));
                };
                for (name, dependency) in dependencies {
                    if !members.contains_key(name) {
                        continue;
                    }
                    let met = match dependency {
                        Value::Array(names) => {
                            names.iter().all(|n| n.as_str().is_some_and(|n| members.contains_key(n)))
                        }
                        schema => admits(schema, value)?,
                    };
                    if !met {
                        return Ok(false);
                    }
                }
                true
            }
            ("unevaluatedProperties" | "unevaluatedItems" | "$dynamicRef" | "$recursiveRef", _) => {
                return Err(unsupported(keyword, path, "cannot be checked against an enum value"));
            }
            // A keyword of another type than the value's says nothing about it.
            _ => true,
        })
    }

    /// Whether member `name` is declared in `properties` or matches a `patternProperties`
    /// pattern of `map` (else `additionalProperties` applies to it).
    fn declared_or_matched(
        &self,
        map: &Map<String, Value>,
        name: &str,
        path: &str,
    ) -> Result<bool, FsmError> {
        if map.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(name)) {
            return Ok(true);
        }
        if let Some(Value::Object(patterns)) = map.get("patternProperties") {
            for pattern in patterns.keys() {
                let regex = search_regex(pattern)
                    .map_err(|reason| unsupported("patternProperties", path, &reason))?;
                if regex.is_match(name) {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// `argument`'s entries (the argument of `keyword` must be an array).
fn array_of<'v>(argument: &'v Value, keyword: &str, path: &str) -> Result<&'v [Value], FsmError> {
    match argument {
        Value::Array(entries) => Ok(entries),
        _ => Err(invalid(path, format!("'{keyword}' must be an array"))),
    }
}

/// JSON equality, numbers compared by value (`1` equals `1.0`).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}
