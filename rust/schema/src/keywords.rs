//! Keyword bookkeeping: which keywords constrain values, the types a schema implies and its
//! numeric bounds.

use serde_json::{Map, Value};

use sglr_fsm::FsmError;

use crate::error::invalid;
use crate::numeric::NumBound;

/// The JSON types, in the order alternatives are emitted.
pub(crate) const ALL_TYPES: [&str; 7] = ["object", "array", "string", "integer", "number", "boolean", "null"];

/// Keywords that never constrain a value.
pub fn is_annotation(keyword: &str) -> bool {
    matches!(
        keyword,
        "$schema"
            | "$id"
            | "id"
            | "$comment"
            | "$anchor"
            | "$vocabulary"
            | "title"
            | "description"
            | "default"
            | "examples"
            | "example"
            | "deprecated"
            | "readOnly"
            | "writeOnly"
            | "definitions"
            | "$defs"
            | "contentEncoding"
            | "contentMediaType"
            | "contentSchema"
            | "then"
            | "else"
    ) || !is_known_keyword(keyword)
}

/// Keywords whose meaning we know (validation or applicator); anything else is an extension
/// that validators ignore, and so do we.
fn is_known_keyword(keyword: &str) -> bool {
    matches!(
        keyword,
        "type"
            | "enum"
            | "const"
            | "nullable"
            | "$ref"
            | "allOf"
            | "anyOf"
            | "oneOf"
            | "not"
            | "if"
            | "properties"
            | "required"
            | "additionalProperties"
            | "patternProperties"
            | "propertyNames"
            | "minProperties"
            | "maxProperties"
            | "dependencies"
            | "dependentRequired"
            | "dependentSchemas"
            | "unevaluatedProperties"
            | "items"
            | "prefixItems"
            | "additionalItems"
            | "minItems"
            | "maxItems"
            | "uniqueItems"
            | "contains"
            | "minContains"
            | "maxContains"
            | "unevaluatedItems"
            | "minLength"
            | "maxLength"
            | "pattern"
            | "format"
            | "minimum"
            | "maximum"
            | "exclusiveMinimum"
            | "exclusiveMaximum"
            | "multipleOf"
            | "$dynamicRef"
            | "$recursiveRef"
    )
}

/// A keyword value that must be a non-negative integer (`minLength`, `maxItems` ...): as JSON
/// Schema reads it, so `2.0` counts; `None` for anything else.
pub fn non_negative_integer(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
}

/// The type a keyword constrains when it constrains one type only.
pub fn keyword_type(keyword: &str) -> Option<&'static str> {
    Some(match keyword {
        "properties"
        | "required"
        | "additionalProperties"
        | "patternProperties"
        | "minProperties"
        | "maxProperties"
        | "propertyNames"
        | "dependencies"
        | "dependentRequired"
        | "dependentSchemas"
        | "unevaluatedProperties" => "object",
        "items" | "prefixItems" | "additionalItems" | "minItems" | "maxItems" | "uniqueItems"
        | "contains" | "minContains" | "maxContains" | "unevaluatedItems" => "array",
        "minLength" | "maxLength" | "pattern" | "format" | "contentEncoding" | "contentMediaType" => "string",
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => "number",
        _ => return None,
    })
}

/// The types a schema without `type` admits: those its literal values (`enum`, `const`)
/// have; else, with `from_keywords`, those its type-specific keywords imply; else every type.
pub(crate) fn implied_types(map: &Map<String, Value>, from_keywords: bool) -> Vec<&'static str> {
    let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
    let mut types = Vec::new();
    if !from_keywords {
        return literal_types(map).unwrap_or_else(|| ALL_TYPES.to_vec());
    }
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependencies",
        "dependentRequired",
    ]) {
        types.push("object");
    }
    if has(&["items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"]) {
        types.push("array");
    }
    // NOTE: `format` alone implies nothing: it is often written without `type`.
    if has(&["minLength", "maxLength", "pattern"]) {
        types.push("string");
    }
    if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
        types.push("number");
    }
    if types.is_empty() {
        return literal_types(map).unwrap_or_else(|| ALL_TYPES.to_vec());
    }
    types
}

/// The types of a schema's `enum` / `const` values, if it lists any.
fn literal_types(map: &Map<String, Value>) -> Option<Vec<&'static str>> {
    let values = literal_values(map)?;
    Some(ALL_TYPES.into_iter().filter(|ty| values.iter().any(|v| value_has_type(v, ty))).collect())
}

pub(crate) fn value_has_type(value: &Value, ty: &str) -> bool {
    match (value, ty) {
        (Value::Null, "null") | (Value::Bool(_), "boolean") | (Value::String(_), "string") => true,
        (Value::Array(_), "array") | (Value::Object(_), "object") | (Value::Number(_), "number") => true,
        (Value::Number(n), "integer") => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// The values an `enum` / `const` restricts to, if any.
pub(crate) fn literal_values(map: &Map<String, Value>) -> Option<Vec<Value>> {
    let mut values = match map.get("enum") {
        Some(Value::Array(values)) => Some(values.clone()),
        _ => None,
    };
    if let Some(constant) = map.get("const") {
        values = Some(match values {
            Some(values) => values.into_iter().filter(|v| v == constant).collect(),
            None => vec![constant.clone()],
        });
    }
    values
}

/// A numeric bound: `value`, strict when `exclusive`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bound {
    pub value: f64,
    pub exclusive: bool,
}

const MAX_BOUND: f64 = 1e30;

impl Bound {
    fn checked(self) -> Result<f64, String> {
        if self.value.is_finite() && self.value.abs() < MAX_BOUND {
            Ok(self.value)
        } else {
            Err(format!("bound {} is outside the supported range", self.value))
        }
    }

    /// Smallest integer above (or at, if inclusive) the bound.
    pub fn int_lower(self) -> Result<i128, String> {
        let v = self.checked()?;
        Ok(if self.exclusive { v.floor() as i128 + 1 } else { v.ceil() as i128 })
    }

    /// Largest integer below (or at, if inclusive) the bound.
    pub fn int_upper(self) -> Result<i128, String> {
        let v = self.checked()?;
        Ok(if self.exclusive { v.ceil() as i128 - 1 } else { v.floor() as i128 })
    }

    /// The bound as a decimal with its strictness: the shortest decimal that reads back as the
    /// same `f64`, which is the schema's literal wherever the literal is one (`0.1`, `-2.75`).
    pub fn decimal(self) -> Result<NumBound, String> {
        let v = self.checked()?;
        // NOTE: `Display` of an `f64` never writes an exponent.
        NumBound::parse(&v.to_string(), self.exclusive)
            .ok_or_else(|| format!("bound {v} is not a finite decimal"))
    }
}

/// `(lower, upper)` bounds from `minimum` / `maximum` / `exclusive*` (draft 4 booleans too).
pub(crate) fn numeric_bounds(
    map: &Map<String, Value>,
    path: &str,
) -> Result<(Option<Bound>, Option<Bound>), FsmError> {
    let number = |key: &str| -> Result<Option<f64>, FsmError> {
        match map.get(key) {
            None | Some(Value::Bool(_)) => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| invalid(path, format!("'{key}' must be a number"))),
        }
    };
    let flag = |key: &str| map.get(key) == Some(&Value::Bool(true));
    let tighter_lo = |a: Option<Bound>, b: Option<Bound>| match (a, b) {
        (Some(a), Some(b)) => {
            Some(if b.value > a.value || (b.value == a.value && b.exclusive) { b } else { a })
        }
        (a, b) => a.or(b),
    };
    let tighter_hi = |a: Option<Bound>, b: Option<Bound>| match (a, b) {
        (Some(a), Some(b)) => {
            Some(if b.value < a.value || (b.value == a.value && b.exclusive) { b } else { a })
        }
        (a, b) => a.or(b),
    };
    let lo = number("minimum")?.map(|value| Bound { value, exclusive: flag("exclusiveMinimum") });
    let lo = tighter_lo(lo, number("exclusiveMinimum")?.map(|value| Bound { value, exclusive: true }));
    let hi = number("maximum")?.map(|value| Bound { value, exclusive: flag("exclusiveMaximum") });
    let hi = tighter_hi(hi, number("exclusiveMaximum")?.map(|value| Bound { value, exclusive: true }));
    Ok((lo, hi))
}
