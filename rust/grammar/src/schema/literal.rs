//! `const` / `enum` values as the schemas they are, for objects whose keys may come in any
//! order (`JsonSchemaOptions::properties_any_order`) and that are too wide to spell as one
//! regex in every order.
use serde_json::{Map, Value};

/// The schema admitting exactly the JSON value `value`, its objects' keys in any order: an
/// object is its keys required, each value's schema, nothing else; other values are `const`.
/// None for an array holding an object with several keys (its items would need `prefixItems`,
/// which drafts read differently).
pub(super) fn literal_schema(value: &Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            let properties: Map<String, Value> =
                map.iter().map(|(k, v)| Some((k.clone(), literal_schema(v)?))).collect::<Option<_>>()?;
            let required = map.keys().map(|k| Value::String(k.clone())).collect();
            Some(Value::Object(Map::from_iter([
                ("type".to_string(), Value::String("object".into())),
                ("properties".to_string(), Value::Object(properties)),
                ("required".to_string(), Value::Array(required)),
                ("additionalProperties".to_string(), Value::Bool(false)),
            ])))
        }
        Value::Array(items) if items.iter().any(holds_wide_object) => None,
        other => Some(Value::Object(Map::from_iter([("const".to_string(), other.clone())]))),
    }
}

/// Whether `value` holds an object with two or more keys (whose order may vary).
fn holds_wide_object(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.len() > 1 || map.values().any(holds_wide_object),
        Value::Array(items) => items.iter().any(holds_wide_object),
        _ => false,
    }
}
