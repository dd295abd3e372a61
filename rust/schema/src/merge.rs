//! `allOf` (and `$ref` with sibling keywords) merged into one equivalent schema object.

use serde_json::{Map, Value};

use sglr_fsm::FsmError;

use crate::error::{invalid, unsupported};
use crate::keywords::{is_annotation, ALL_TYPES};
use crate::reader::SchemaReader;

/// Most branches the product of two `anyOf` (or `oneOf`) lists in one conjunction may have.
const MAX_PRODUCT_BRANCHES: usize = 64;

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
    reader: &SchemaReader,
    map: &Map<String, Value>,
    path: &str,
) -> Result<Merged, FsmError> {
    let mut references = Vec::new();
    let schema = merge_parts(reader, map, path, &mut references)?;
    Ok(Merged { schema, references })
}

impl SchemaReader<'_> {
    /// `allOf` (and `$ref` with siblings) merged into one schema object; `None` when nothing
    /// satisfies it. Merges that cannot be done exactly are refused.
    pub fn merge_all_of(
        &self,
        map: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<Map<String, Value>>, FsmError> {
        Ok(merge_all_of(self, map, path)?.schema)
    }
}

/// The branches of `map`'s `anyOf` / `oneOf` (`keyword`), each with the sibling keywords of
/// `map` distributed into it (`{"allOf": [siblings, branch]}` where a sibling constrains), with
/// its path.
pub fn branches_with_siblings(
    map: &Map<String, Value>,
    keyword: &str,
    path: &str,
) -> Result<Vec<(Value, String)>, FsmError> {
    let Some(Value::Array(branches)) = map.get(keyword) else {
        return Err(invalid(path, format!("'{keyword}' must be an array")));
    };
    let mut siblings = map.clone();
    siblings.remove(keyword);
    let has_siblings = siblings.keys().any(|k| !is_annotation(k));
    let mut merged_branches = Vec::new();
    for (index, branch) in branches.iter().enumerate() {
        let branch_path = format!("{path}/{keyword}/{index}");
        let merged = if has_siblings {
            let mut combined = Map::new();
            combined
                .insert("allOf".into(), Value::Array(vec![Value::Object(siblings.clone()), branch.clone()]));
            Value::Object(combined)
        } else {
            branch.clone()
        };
        merged_branches.push((merged, branch_path));
    }
    Ok(merged_branches)
}

fn merge_parts(
    reader: &SchemaReader,
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
                return Err(unsupported("$ref", path, "recursive reference inside 'allOf'"));
            }
            children.push(reader.resolve(&reference, path)?.clone());
            references.push(reference);
            if reader.ref_overrides_siblings {
                // The reference stands alone: its siblings (an `allOf` included) are ignored.
                pending.extend(children);
                continue;
            }
        }
        // NOTE: `then` / `else` mean nothing without their `if` (annotations alone), so the
        // three travel together, as the alternatives they stand for.
        if let Some(condition) = part.remove("if") {
            let then = part.remove("then").unwrap_or(Value::Bool(true));
            let otherwise = part.remove("else").unwrap_or(Value::Bool(true));
            if !reader.conditions_ignored {
                children.push(condition_as_alternatives(condition, then, otherwise));
            }
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
                return Err(unsupported(
                    "allOf",
                    path,
                    "'additionalProperties' of one branch would apply to properties declared by another",
                ));
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

/// `if` / `then` / `else` as `{"anyOf": [if and then, not if and else]}`.
fn condition_as_alternatives(condition: Value, then: Value, otherwise: Value) -> Value {
    let both =
        |a: Value, b: Value| Value::Object(Map::from_iter([("allOf".to_string(), Value::Array(vec![a, b]))]));
    let negated = Value::Object(Map::from_iter([("not".to_string(), condition.clone())]));
    Value::Object(Map::from_iter([(
        "anyOf".to_string(),
        Value::Array(vec![both(condition, then), both(negated, otherwise)]),
    )]))
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
            // In place: a property keeps the position where a part first declared it (the
            // order members are emitted in; `remove` would move the last property into its slot).
            for (name, schema) in more {
                match props.get_mut(&name) {
                    Some(previous) if *previous != schema => {
                        let mut all_of = Map::new();
                        all_of.insert("allOf".into(), Value::Array(vec![previous.take(), schema]));
                        *previous = Value::Object(all_of);
                    }
                    Some(_) => {}
                    None => {
                        props.insert(name, schema);
                    }
                }
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
        "minimum" | "minLength" | "minItems" | "minProperties" | "minContains" if both_f64.is_some() => {
            let (a, b) = both_f64.expect("checked");
            if a >= b {
                existing
            } else {
                value.clone()
            }
        }
        "maximum" | "maxLength" | "maxItems" | "maxProperties" | "maxContains" if both_f64.is_some() => {
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
            // (a1 | a2) & (b1 | b2) = a1&b1 | a1&b2 | a2&b1 | a2&b2. For `oneOf` the products
            // go through the same disjointness check: two provably disjoint products leave
            // no value matching two of the a's (or of the b's), so exactly one of each.
            let (Value::Array(first), Value::Array(second)) = (&existing, value) else {
                return Err(invalid(path, format!("'{key}' must be an array")));
            };
            if first.len() * second.len() > MAX_PRODUCT_BRANCHES {
                return Err(unsupported("allOf", path, &format!("two '{key}' lists in one conjunction")));
            }
            let products = first
                .iter()
                .flat_map(|a| {
                    second.iter().map(move |b| {
                        let mut both = Map::new();
                        both.insert("allOf".into(), Value::Array(vec![a.clone(), b.clone()]));
                        Value::Object(both)
                    })
                })
                .collect();
            Value::Array(products)
        }
        // Neither a nor b: not (a or b).
        "not" => {
            let mut either = Map::new();
            either.insert("anyOf".into(), Value::Array(vec![existing, value.clone()]));
            Value::Object(either)
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
    let mut set: Vec<&'static str> = ALL_TYPES.iter().copied().filter(|t| names.contains(t)).collect();
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
