//! Keyword bookkeeping shared by the compiler: `allOf` merging, `oneOf` disjointness, type
//! inference and numeric bounds.

use serde_json::{Map, Value};

use super::{invalid, unsupported, Ctx, ALL_TYPES};
use crate::error::FsmError;

/// Keywords that never constrain a value.
pub(crate) fn is_annotation(keyword: &str) -> bool {
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

/// Types implied by the keywords present (every type if none is specific).
pub(crate) fn implied_types(map: &Map<String, Value>) -> Vec<&'static str> {
    let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
    let mut types = Vec::new();
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
    if has(&[
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
    ]) {
        types.push("array");
    }
    // NOTE: `format` alone implies nothing: it is often written without `type`.
    if has(&["minLength", "maxLength", "pattern"]) {
        types.push("string");
    }
    if has(&[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ]) {
        types.push("number");
    }
    if types.is_empty() {
        if let Some(values) = literal_values(map) {
            for ty in ALL_TYPES {
                if values.iter().any(|v| value_has_type(v, ty)) {
                    types.push(ty);
                }
            }
            return types;
        }
        return ALL_TYPES.to_vec();
    }
    types
}

pub(crate) fn value_has_type(value: &Value, ty: &str) -> bool {
    match (value, ty) {
        (Value::Null, "null") | (Value::Bool(_), "boolean") | (Value::String(_), "string") => true,
        (Value::Array(_), "array")
        | (Value::Object(_), "object")
        | (Value::Number(_), "number") => true,
        (Value::Number(n), "integer") => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// The values an `enum` / `const` restricts to, if any.
fn literal_values(map: &Map<String, Value>) -> Option<Vec<Value>> {
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
            Err(format!(
                "bound {} is outside the supported range",
                self.value
            ))
        }
    }

    /// Smallest integer above (or at, if inclusive) the bound.
    pub fn int_lower(self) -> Result<i128, String> {
        let v = self.checked()?;
        Ok(if self.exclusive {
            v.floor() as i128 + 1
        } else {
            v.ceil() as i128
        })
    }

    /// Largest integer below (or at, if inclusive) the bound.
    pub fn int_upper(self) -> Result<i128, String> {
        let v = self.checked()?;
        Ok(if self.exclusive {
            v.ceil() as i128 - 1
        } else {
            v.floor() as i128
        })
    }

    /// The bound as an integer with its strictness (numbers support integral bounds only).
    pub fn integral(self) -> Result<(i128, bool), String> {
        let v = self.checked()?;
        if v.fract() != 0.0 {
            return Err(format!(
                "fractional bound {v} on a non-integer number is not supported"
            ));
        }
        Ok((v as i128, self.exclusive))
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
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| invalid(path, format!("'{key}' must be a number"))),
        }
    };
    let flag = |key: &str| map.get(key) == Some(&Value::Bool(true));
    let tighter_lo = |a: Option<Bound>, b: Option<Bound>| match (a, b) {
        (Some(a), Some(b)) => Some(
            if b.value > a.value || (b.value == a.value && b.exclusive) {
                b
            } else {
                a
            },
        ),
        (a, b) => a.or(b),
    };
    let tighter_hi = |a: Option<Bound>, b: Option<Bound>| match (a, b) {
        (Some(a), Some(b)) => Some(
            if b.value < a.value || (b.value == a.value && b.exclusive) {
                b
            } else {
                a
            },
        ),
        (a, b) => a.or(b),
    };
    let lo = number("minimum")?.map(|value| Bound {
        value,
        exclusive: flag("exclusiveMinimum"),
    });
    let lo = tighter_lo(
        lo,
        number("exclusiveMinimum")?.map(|value| Bound {
            value,
            exclusive: true,
        }),
    );
    let hi = number("maximum")?.map(|value| Bound {
        value,
        exclusive: flag("exclusiveMaximum"),
    });
    let hi = tighter_hi(
        hi,
        number("exclusiveMaximum")?.map(|value| Bound {
            value,
            exclusive: true,
        }),
    );
    Ok((lo, hi))
}

/// How deep `$ref`s may chain while flattening one `allOf`.
const MAX_MERGE_REFS: usize = 64;

/// Result of merging an `allOf`: the merged schema (`None`: nothing satisfies it) and the
/// references that were inlined, which count towards the recursion limit.
pub(crate) struct Merged {
    pub schema: Option<Map<String, Value>>,
    pub references: Vec<String>,
}

/// Merges `allOf` (and a `$ref` with sibling keywords) into one equivalent schema object.
/// Merges that cannot be done exactly are refused.
pub(crate) fn merge_all_of(
    ctx: &Ctx,
    map: &Map<String, Value>,
    path: &str,
) -> Result<Merged, FsmError> {
    let mut references = Vec::new();
    let schema = merge_parts(ctx, map, path, &mut references)?;
    Ok(Merged { schema, references })
}

fn merge_parts(
    ctx: &Ctx,
    map: &Map<String, Value>,
    path: &str,
    references: &mut Vec<String>,
) -> Result<Option<Map<String, Value>>, FsmError> {
    let mut parts = Vec::new();
    let mut pending = vec![Value::Object(map.clone())];
    let mut num_refs = 0;
    while let Some(part) = pending.pop() {
        let mut part = match part {
            Value::Bool(true) => continue,
            Value::Bool(false) => return Ok(None),
            Value::Object(part) => part,
            _ => return Err(invalid(path, "'allOf' entries must be schemas")),
        };
        // Children are pushed in reverse so they pop in document order, right after `part`.
        let mut children = Vec::new();
        if let Some(reference) = part.remove("$ref") {
            let Value::String(reference) = reference else {
                return Err(invalid(path, "'$ref' must be a string"));
            };
            num_refs += 1;
            if num_refs > MAX_MERGE_REFS {
                return Err(unsupported(
                    "$ref",
                    path,
                    "recursive reference inside 'allOf'",
                ));
            }
            children.push(ctx.resolve(&reference, path)?.clone());
            references.push(reference);
        }
        if let Some(all_of) = part.remove("allOf") {
            let Value::Array(items) = all_of else {
                return Err(invalid(path, "'allOf' must be an array"));
            };
            children.extend(items);
        }
        pending.extend(children.into_iter().rev());
        parts.push(part);
    }
    let mut merged = Map::new();
    let mut closed: Vec<(Vec<String>, Value)> = Vec::new();
    for part in &parts {
        if let Some(additional) = part.get("additionalProperties") {
            if additional != &Value::Bool(true) {
                let keys = property_names(part);
                closed.push((keys, additional.clone()));
            }
        }
        for (key, value) in part {
            if is_annotation(key) || key == "additionalProperties" {
                continue;
            }
            if !merge_keyword(&mut merged, key, value, path)? {
                return Ok(None);
            }
        }
    }
    if !closed.is_empty() {
        let all_keys = property_names(&merged);
        for (keys, _) in &closed {
            if all_keys.iter().any(|k| !keys.contains(k)) {
                return Err(unsupported("allOf", path, "'additionalProperties' of one branch would apply to properties declared by another"));
            }
        }
        let mut values: Vec<Value> = closed.into_iter().map(|(_, v)| v).collect();
        values.dedup();
        let additional = if values.contains(&Value::Bool(false)) {
            Value::Bool(false)
        } else if values.len() == 1 {
            values.remove(0)
        } else {
            let mut all_of = Map::new();
            all_of.insert("allOf".into(), Value::Array(values));
            Value::Object(all_of)
        };
        merged.insert("additionalProperties".into(), additional);
    }
    Ok(Some(merged))
}

fn property_names(map: &Map<String, Value>) -> Vec<String> {
    match map.get("properties") {
        Some(Value::Object(props)) => props.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// Folds one keyword into `merged`; false when the conjunction becomes unsatisfiable.
fn merge_keyword(
    merged: &mut Map<String, Value>,
    key: &str,
    value: &Value,
    path: &str,
) -> Result<bool, FsmError> {
    let Some(existing) = merged.get(key).cloned() else {
        merged.insert(key.into(), value.clone());
        return Ok(true);
    };
    if &existing == value {
        return Ok(true);
    }
    let both_f64 = existing.as_f64().zip(value.as_f64());
    let combined = match key {
        "type" => {
            let types = intersect_types(&existing, value);
            if types.is_empty() {
                return Ok(false);
            }
            Value::Array(types.into_iter().map(|t| Value::String(t.into())).collect())
        }
        "properties" => {
            let (Value::Object(mut props), Value::Object(more)) = (existing, value.clone()) else {
                return Err(invalid(path, "'properties' must be an object"));
            };
            for (name, schema) in more {
                let combined = match props.remove(&name) {
                    Some(previous) if previous != schema => {
                        let mut all_of = Map::new();
                        all_of.insert("allOf".into(), Value::Array(vec![previous, schema]));
                        Value::Object(all_of)
                    }
                    _ => schema,
                };
                props.insert(name, combined);
            }
            Value::Object(props)
        }
        "required" => {
            let (Value::Array(mut names), Value::Array(more)) = (existing, value.clone()) else {
                return Err(invalid(path, "'required' must be an array"));
            };
            for name in more {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            Value::Array(names)
        }
        "items" | "propertyNames" | "contains" => {
            let mut all_of = Map::new();
            all_of.insert("allOf".into(), Value::Array(vec![existing, value.clone()]));
            Value::Object(all_of)
        }
        "enum" => {
            let (Value::Array(values), Value::Array(more)) = (existing, value) else {
                return Err(invalid(path, "'enum' must be an array"));
            };
            let kept: Vec<Value> = values.into_iter().filter(|v| more.contains(v)).collect();
            if kept.is_empty() {
                return Ok(false);
            }
            Value::Array(kept)
        }
        "const" => return Ok(false),
        "minimum" | "minLength" | "minItems" | "minProperties" | "minContains"
            if both_f64.is_some() =>
        {
            let (a, b) = both_f64.expect("checked");
            if a >= b {
                existing
            } else {
                value.clone()
            }
        }
        "maximum" | "maxLength" | "maxItems" | "maxProperties" | "maxContains"
            if both_f64.is_some() =>
        {
            let (a, b) = both_f64.expect("checked");
            if a <= b {
                existing
            } else {
                value.clone()
            }
        }
        "exclusiveMinimum" if both_f64.is_some() => {
            let (a, b) = both_f64.expect("checked");
            if a >= b {
                existing
            } else {
                value.clone()
            }
        }
        "exclusiveMaximum" if both_f64.is_some() => {
            let (a, b) = both_f64.expect("checked");
            if a <= b {
                existing
            } else {
                value.clone()
            }
        }
        "uniqueItems" => Value::Bool(true),
        "anyOf" | "oneOf" => {
            // Keep both as a nested conjunction compiled after distribution.
            return Err(unsupported(
                "allOf",
                path,
                &format!("two '{key}' lists in one conjunction"),
            ));
        }
        _ => {
            return Err(unsupported(
                "allOf",
                path,
                &format!("conflicting values of '{key}' in one conjunction"),
            ));
        }
    };
    merged.insert(key.into(), combined);
    Ok(true)
}

fn type_set(value: &Value) -> Vec<&'static str> {
    let names: Vec<&str> = match value {
        Value::String(name) => vec![name.as_str()],
        Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut set: Vec<&'static str> = ALL_TYPES
        .iter()
        .copied()
        .filter(|t| names.contains(t))
        .collect();
    if set.contains(&"number") && !set.contains(&"integer") {
        set.push("integer");
    }
    set
}

fn intersect_types(a: &Value, b: &Value) -> Vec<&'static str> {
    let (a, b) = (type_set(a), type_set(b));
    let mut both: Vec<&'static str> = a.into_iter().filter(|t| b.contains(t)).collect();
    if both.contains(&"number") {
        both.retain(|t| *t != "integer");
    }
    both
}

/// What a branch can produce, for the `oneOf` disjointness check.
struct Shape {
    /// Admitted types with `number` split into integer and non-integer.
    types: Vec<&'static str>,
    values: Option<Vec<Value>>,
    /// Required properties whose values are pinned by `const` / `enum`.
    discriminators: Vec<(String, Vec<Value>)>,
}

fn shape(ctx: &Ctx, schema: &Value, path: &str) -> Result<Shape, FsmError> {
    let map = match schema {
        Value::Object(map) => map.clone(),
        Value::Bool(true) => Map::new(),
        Value::Bool(false) => {
            return Ok(Shape {
                types: vec![],
                values: None,
                discriminators: vec![],
            })
        }
        _ => return Err(invalid(path, "a schema must be an object or a boolean")),
    };
    let map = if map.contains_key("$ref") || map.contains_key("allOf") {
        match merge_all_of(ctx, &map, path)?.schema {
            Some(merged) => merged,
            None => {
                return Ok(Shape {
                    types: vec![],
                    values: None,
                    discriminators: vec![],
                })
            }
        }
    } else {
        map
    };
    let mut types: Vec<&'static str> = ctx.types(&map, path)?;
    if types.contains(&"number") {
        types.push("fraction");
        types.push("integer");
        types.retain(|t| *t != "number");
    }
    let values = literal_values(&map);
    if let Some(values) = &values {
        types.retain(|t| {
            values.iter().any(|v| match *t {
                "fraction" => v.as_f64().is_some_and(|f| f.fract() != 0.0),
                t => value_has_type(v, t),
            })
        });
    }
    let required: Vec<&str> = match map.get("required") {
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut discriminators = Vec::new();
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, prop) in props {
            if !required.contains(&name.as_str()) {
                continue;
            }
            let prop = match prop {
                Value::Object(p) if p.contains_key("$ref") => {
                    match merge_all_of(ctx, p, path)?.schema {
                        Some(m) => m,
                        None => continue,
                    }
                }
                Value::Object(p) => p.clone(),
                _ => continue,
            };
            if let Some(values) = literal_values(&prop) {
                discriminators.push((name.clone(), values));
            }
        }
    }
    Ok(Shape {
        types,
        values,
        discriminators,
    })
}

fn disjoint_values(a: &[Value], b: &[Value]) -> bool {
    !a.iter().any(|v| b.contains(v))
}

fn provably_disjoint(a: &Shape, b: &Shape) -> bool {
    let common: Vec<&str> = a
        .types
        .iter()
        .copied()
        .filter(|t| b.types.contains(t))
        .collect();
    if common.is_empty() {
        return true;
    }
    if let (Some(va), Some(vb)) = (&a.values, &b.values) {
        if disjoint_values(va, vb) {
            return true;
        }
    }
    if common == ["object"] {
        return a.discriminators.iter().any(|(name, va)| {
            b.discriminators
                .iter()
                .any(|(other, vb)| other == name && disjoint_values(va, vb))
        });
    }
    false
}

/// `oneOf` is compiled as an alternation, which is exact only when no value can match two
/// branches; refuse it unless that is evident (different types, different constants, or a
/// required discriminator property with different constants).
pub(crate) fn check_disjoint(
    ctx: &Ctx,
    branches: &[(Value, String)],
    path: &str,
) -> Result<(), FsmError> {
    let shapes: Vec<Shape> = branches
        .iter()
        .map(|(schema, branch_path)| shape(ctx, schema, branch_path))
        .collect::<Result<_, _>>()?;
    for i in 0..shapes.len() {
        for j in i + 1..shapes.len() {
            if !provably_disjoint(&shapes[i], &shapes[j]) {
                return Err(unsupported("oneOf", path, &format!("branches {i} and {j} may both match one value, so 'exactly one' cannot be enforced")));
            }
        }
    }
    Ok(())
}
