//! `oneOf` as an alternation is exact only when no value matches two branches: a cheap,
//! conservative disjointness check. A type that two branches leave entirely free (read as the
//! specification does, `{"properties": ...}` admits every string) holds no valid value at all,
//! since each of its values matches both: it is taken out of every branch instead.

use serde_json::{Map, Value};

use sglr_fsm::FsmError;

use crate::error::{invalid, unsupported};
use crate::keywords::{is_annotation, keyword_type, literal_values, value_has_type, ALL_TYPES};
use crate::merge::merge_all_of;
use crate::pattern::search_regex;
use crate::reader::SchemaReader;

/// What a branch can produce, for the `oneOf` disjointness check.
struct Shape {
    /// Admitted types with `number` split into integer and non-integer.
    types: Vec<&'static str>,
    values: Option<Vec<Value>>,
    /// Required properties whose values are pinned by `const` / `enum`.
    discriminators: Vec<(String, Vec<Value>)>,
    /// Types (as in `types`) whose every value the branch admits.
    free: Vec<&'static str>,
    /// The branch's keywords (merged with its `allOf` parts and references).
    map: Map<String, Value>,
}

/// The types of `types` whose every value `map` admits: none when a keyword may constrain any
/// type (`enum`, `not`, a combinator, one it does not know), else those no keyword constrains.
fn free_types(map: &Map<String, Value>, types: &[&'static str]) -> Vec<&'static str> {
    let constrains_any = map.keys().any(|k| {
        !is_annotation(k) && !matches!(k.as_str(), "type" | "nullable") && keyword_type(k).is_none()
    });
    if constrains_any {
        return Vec::new();
    }
    let base = |t: &'static str| if matches!(t, "integer" | "fraction") { "number" } else { t };
    types.iter().copied().filter(|&t| !map.keys().any(|k| keyword_type(k) == Some(base(t)))).collect()
}

impl Shape {
    /// A branch no value meets.
    fn nothing() -> Self {
        Shape { types: vec![], values: None, discriminators: vec![], free: vec![], map: Map::new() }
    }
}

fn disjoint_values(a: &[Value], b: &[Value]) -> bool {
    !a.iter().any(|v| b.contains(v))
}

/// Deepest nesting of properties the disjointness check compares.
const MAX_PROPERTY_DEPTH: usize = 3;

/// The schema a branch's `properties` give member `name`, if any.
fn declared<'s>(shape: &'s Shape, name: &str) -> Option<&'s Value> {
    match shape.map.get("properties") {
        Some(Value::Object(properties)) => properties.get(name),
        _ => None,
    }
}

/// Whether `name` matches one of `map`'s `patternProperties` (any, when one cannot be read).
fn matches_a_pattern(map: &Map<String, Value>, name: &str, path: &str) -> Result<bool, FsmError> {
    let Some(Value::Object(patterns)) = map.get("patternProperties") else { return Ok(false) };
    for pattern in patterns.keys() {
        match search_regex(pattern) {
            Ok(regex) if !regex.is_match(name) => {}
            Ok(_) => return Ok(true),
            Err(reason) => return Err(unsupported("patternProperties", path, &reason)),
        }
    }
    Ok(false)
}

impl SchemaReader<'_> {
    /// `oneOf` branches (schema, path) as an alternation that no value can match twice: the
    /// branches themselves, or each with the types taken out that two of them leave entirely
    /// free (no value of those types is valid); refused unless that is evident.
    pub fn one_of_branches(
        &self,
        branches: Vec<(Value, String)>,
        path: &str,
    ) -> Result<Vec<(Value, String)>, FsmError> {
        let excluded = self.check_disjoint(&branches, path)?;
        Ok(if excluded.is_empty() { branches } else { without_types(branches, &excluded) })
    }
}

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

impl SchemaReader<'_> {
    /// `oneOf` is compiled as an alternation, which is exact only when no value can match two
    /// branches. Types that two branches leave entirely free hold no valid value: they are returned
    /// (as `type` names) for the caller to take out of every branch. The rest must be evidently
    /// disjoint (different types, different constants, or a required discriminator property with
    /// different constants); otherwise `oneOf` is refused.
    fn check_disjoint(
        &self,
        branches: &[(Value, String)],
        path: &str,
    ) -> Result<Vec<&'static str>, FsmError> {
        let mut shapes: Vec<Shape> = branches
            .iter()
            .map(|(schema, branch_path)| self.shape(schema, branch_path))
            .collect::<Result<_, _>>()?;
        let mut excluded: Vec<&'static str> = Vec::new();
        for shape in &shapes {
            for &ty in &shape.free {
                if !excluded.contains(&ty)
                    && shapes.iter().filter(|other| other.free.contains(&ty)).count() >= 2
                {
                    excluded.push(ty);
                }
            }
        }
        for shape in &mut shapes {
            shape.types.retain(|t| !excluded.contains(t));
        }
        for i in 0..shapes.len() {
            for j in i + 1..shapes.len() {
                if !self.provably_disjoint(&shapes[i], &shapes[j], path, 0)? {
                    return Err(unsupported(
                        "oneOf",
                        path,
                        &format!(
                            "branches {i} and {j} may both match one value, so 'exactly one' cannot be enforced"
                        ),
                    ));
                }
            }
        }
        // NOTE: `type` cannot say "numbers that are not integers": excluded integers alone refuse.
        // Excluded fractions are `number` taken out with `integer` kept: integers only.
        if excluded.contains(&"integer") && !excluded.contains(&"fraction") {
            return Err(unsupported(
                "oneOf",
                path,
                "two branches admit every integer but not every number: 'exactly one' cannot be enforced",
            ));
        }
        let names: Vec<&'static str> =
            excluded.iter().map(|&t| if t == "fraction" { "number" } else { t }).collect();
        Ok(names)
    }

    fn shape(&self, schema: &Value, path: &str) -> Result<Shape, FsmError> {
        let map = match schema {
            Value::Object(map) => map.clone(),
            Value::Bool(true) => Map::new(),
            Value::Bool(false) => return Ok(Shape::nothing()),
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        let map = if map.contains_key("$ref") || map.contains_key("allOf") {
            match merge_all_of(self, &map, path)?.schema {
                Some(merged) => merged,
                None => return Ok(Shape::nothing()),
            }
        } else {
            map
        };
        let mut types: Vec<&'static str> = self.types(&map, path)?;
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
                    Value::Object(p) if p.contains_key("$ref") => match merge_all_of(self, p, path)?.schema {
                        Some(m) => m,
                        None => continue,
                    },
                    Value::Object(p) => p.clone(),
                    _ => continue,
                };
                if let Some(values) = literal_values(&prop) {
                    discriminators.push((name.clone(), values));
                }
            }
        }
        let free = free_types(&map, &types);
        Ok(Shape { types, values, discriminators, free, map })
    }

    fn provably_disjoint(&self, a: &Shape, b: &Shape, path: &str, depth: usize) -> Result<bool, FsmError> {
        let common: Vec<&str> = a.types.iter().copied().filter(|t| b.types.contains(t)).collect();
        if common.is_empty() {
            return Ok(true);
        }
        if let (Some(va), Some(vb)) = (&a.values, &b.values) {
            if disjoint_values(va, vb) {
                return Ok(true);
            }
        }
        if common == ["object"] {
            let discriminated = a.discriminators.iter().any(|(name, va)| {
                b.discriminators.iter().any(|(other, vb)| other == name && disjoint_values(va, vb))
            });
            return Ok(discriminated
                || self.requires_what_the_other_refuses(a, b, path, depth)?
                || self.requires_what_the_other_refuses(b, a, path, depth)?);
        }
        Ok(false)
    }

    /// Whether every object `a` admits has a member `b` refuses: a name `a` requires that `b`
    /// forbids (closed to undeclared names, and matching none of its patterns), or declares with
    /// a schema provably disjoint from `a`'s for it.
    fn requires_what_the_other_refuses(
        &self,
        a: &Shape,
        b: &Shape,
        path: &str,
        depth: usize,
    ) -> Result<bool, FsmError> {
        let Some(Value::Array(required)) = a.map.get("required") else { return Ok(false) };
        let b_closed = match b.map.get("additionalProperties") {
            Some(additional) => additional == &Value::Bool(false),
            None => !self.options().additional_properties_default,
        };
        for name in required.iter().filter_map(Value::as_str) {
            match declared(b, name) {
                None if b_closed && !matches_a_pattern(&b.map, name, path)? => return Ok(true),
                Some(b_member) if depth < MAX_PROPERTY_DEPTH => {
                    let Some(a_member) = declared(a, name) else { continue };
                    let member_path = format!("{path}/properties/{name}");
                    let (a_shape, b_shape) =
                        (self.shape(a_member, &member_path)?, self.shape(b_member, &member_path)?);
                    if self.provably_disjoint(&a_shape, &b_shape, &member_path, depth + 1)? {
                        return Ok(true);
                    }
                }
                _ => {}
            }
        }
        Ok(false)
    }
}
