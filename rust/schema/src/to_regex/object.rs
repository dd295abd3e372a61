//! Objects (properties in schema order, or any order: `any_order.rs`) and arrays.

use serde_json::{Map, Value};

use sglr_fsm::json::{key_not_in, repeat, string_literal};
use sglr_fsm::FsmError;

use super::any_order::{any_order_body, Member};
use super::literal::{alternation, NEVER};
use super::Ctx;
use crate::error::{invalid, unsupported};
use crate::options::MAX_REGEX_ANY_ORDER_PROPERTIES;
use crate::reader::SchemaReader;

/// One declared property: `"key": value`, and whether it must be present.
struct Property {
    regex: String,
    required: bool,
}

impl Ctx<'_> {
    pub(super) fn object_schema(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, FsmError> {
        for keyword in ["patternProperties", "dependencies", "dependentRequired"] {
            if map.get(keyword).is_some_and(|v| !is_empty_object(v)) {
                return Err(unsupported(
                    keyword,
                    path,
                    "constraints between property names and values are not expressible here",
                ));
            }
        }
        if map.get("propertyNames").is_some_and(|v| v != &Value::Bool(true) && !is_empty_object(v)) {
            return Err(unsupported(
                "propertyNames",
                path,
                "constraints on property names are not supported",
            ));
        }
        let empty = Map::new();
        let properties = match map.get("properties") {
            None => &empty,
            Some(Value::Object(props)) => props,
            Some(_) => return Err(invalid(path, "'properties' must be an object")),
        };
        let required: Vec<&str> = match map.get("required") {
            None => Vec::new(),
            Some(Value::Array(names)) => names
                .iter()
                .map(|n| n.as_str().ok_or_else(|| invalid(path, "'required' entries must be strings")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid(path, "'required' must be an array")),
        };
        let additional = match map.get("additionalProperties").or_else(|| map.get("unevaluatedProperties")) {
            None => Value::Bool(self.reader.options().additional_properties_default),
            Some(value) => value.clone(),
        };
        let allows_extra = additional != Value::Bool(false);
        // Spelled out (not the option's default): a required name the schema does not declare can
        // then never appear, so the object is unsatisfiable. Under the default, such a name is one
        // the schema lets through as an extra, with any value.
        let extras_forbidden = map.get("additionalProperties").or_else(|| map.get("unevaluatedProperties"))
            == Some(&Value::Bool(false));

        // The extra members' value first: when it is refused (a free value under
        // `max_any_depth: None`, the usual case for objects that admit undeclared members), the
        // declared members' regexes would be built only to be thrown away, and the grammar path,
        // which offers every sub-schema here before taking it apart, would pay that once per level.
        let extra_value = if allows_extra {
            Some(self.schema(&additional, &format!("{path}/additionalProperties"))?)
        } else {
            None
        };
        let ws = self.ws.clone();
        let mut declared: Vec<Property> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        let declared_schemas = properties
            .iter()
            .map(|(name, schema)| (name.as_str(), schema.clone()))
            .chain(
                // Required names without a declared schema take any value (or the extra schema).
                required.iter().filter(|name| !properties.contains_key(**name)).map(|name| {
                    let value =
                        if allows_extra { additional.clone() } else { Value::Bool(!extras_forbidden) };
                    (*name, value)
                }),
            )
            .collect::<Vec<_>>();
        for (name, schema) in &declared_schemas {
            let is_required = required.contains(name);
            let value = self.schema(schema, &format!("{path}/properties/{}", escape_pointer(name)))?;
            names.push(name);
            if value == NEVER {
                if is_required {
                    return Ok(NEVER.into());
                }
                continue;
            }
            declared.push(Property {
                regex: format!("{}{ws}:{ws}{value}", string_literal(name)),
                required: is_required,
            });
        }
        check_property_counts(&self.reader, map, path, declared.len(), required.len(), allows_extra)?;

        let sep = format!("{ws},{ws}");
        // One declared member is in any order too when undeclared ones may come before it.
        if self.reader.options().properties_any_order
            && declared.len() + usize::from(extra_value.is_some()) > 1
        {
            if declared.len() > MAX_REGEX_ANY_ORDER_PROPERTIES {
                return Err(unsupported(
                    "properties",
                    path,
                    &format!(
                        "more than {MAX_REGEX_ANY_ORDER_PROPERTIES} properties in any order (their orders \
                         are spelled out)"
                    ),
                ));
            }
            let members: Vec<Member> =
                declared.iter().map(|p| Member { regex: &p.regex, required: p.required }).collect();
            let extra = extra_value.map(|value| format!("{}{ws}:{ws}{value}", key_not_in(&names)));
            let body = any_order_body(&members, extra.as_deref(), &sep);
            return Ok(format!(r"\{{{ws}{body}{ws}\}}"));
        }
        let declared_body = declared_sequence(&declared, &sep);
        let body = if let Some(value) = extra_value {
            let extra = format!("{}{ws}:{ws}{value}", key_not_in(&names));
            let extras = format!("(?:{sep}{extra})*");
            match declared_body {
                Declared::NonEmpty(body) => format!("{body}{extras}"),
                // The first member is the declared block or an extra; extras follow.
                Declared::Optional(body) => format!("(?:(?:{body}|{extra}){extras})?"),
                Declared::Nothing => format!("(?:{extra}{extras})?"),
            }
        } else {
            match declared_body {
                Declared::NonEmpty(body) => body,
                Declared::Optional(body) => format!("(?:{body})?"),
                Declared::Nothing => String::new(),
            }
        };
        Ok(format!(r"\{{{ws}{body}{ws}\}}"))
    }
}

fn is_empty_object(value: &Value) -> bool {
    matches!(value, Value::Object(map) if map.is_empty())
}

/// Refuses `minProperties` / `maxProperties` unless every admitted object satisfies them.
fn check_property_counts(
    reader: &SchemaReader,
    map: &Map<String, Value>,
    path: &str,
    num_declared: usize,
    num_required: usize,
    allows_extra: bool,
) -> Result<(), FsmError> {
    if let Some(min) = reader.usize_keyword(map, "minProperties", path)? {
        if min > num_required {
            return Err(unsupported(
                "minProperties",
                path,
                "a minimum count of optional properties is not expressible here",
            ));
        }
    }
    if let Some(max) = reader.usize_keyword(map, "maxProperties", path)? {
        if allows_extra || max < num_declared {
            return Err(unsupported(
                "maxProperties",
                path,
                "a maximum count of optional properties is not expressible here",
            ));
        }
    }
    Ok(())
}

enum Declared {
    /// At least one property is required.
    NonEmpty(String),
    /// All optional: the regex is for a non-empty selection.
    Optional(String),
    Nothing,
}

/// Declared properties in order, optional ones omittable, separators only between present
/// ones.
fn declared_sequence(props: &[Property], sep: &str) -> Declared {
    if props.is_empty() {
        return Declared::Nothing;
    }
    let tail = |from: usize| -> String {
        props[from..]
            .iter()
            .map(|p| if p.required { format!("{sep}{}", p.regex) } else { format!("(?:{sep}{})?", p.regex) })
            .collect()
    };
    if let Some(first_required) = props.iter().position(|p| p.required) {
        let head: String = props[..first_required].iter().map(|p| format!("(?:{}{sep})?", p.regex)).collect();
        return Declared::NonEmpty(format!(
            "{head}{}{}",
            props[first_required].regex,
            tail(first_required + 1)
        ));
    }
    if props.len() <= SMALL_OPTIONAL_SET {
        // No property is required: branch on which one comes first.
        let branches =
            (0..props.len()).map(|first| format!("{}{}", props[first].regex, tail(first + 1))).collect();
        return Declared::Optional(alternation(branches));
    }
    // Linear form for many optional properties, built from the last one backwards:
    // G(k) = (P(k) SEP)? G(k + 1) | P(k), i.e. each present property is followed by a
    // separator unless it is the last one. Every property appears twice instead of once per
    // possible first property.
    let mut rest = props[props.len() - 1].regex.clone();
    for prop in props[..props.len() - 1].iter().rev() {
        rest = format!("(?:(?:{}{sep})?{rest}|{})", prop.regex, prop.regex);
    }
    Declared::Optional(rest)
}

/// Up to this many all-optional properties, the quadratic "which comes first" form is used
/// (it nests less); beyond, the linear nested form.
const SMALL_OPTIONAL_SET: usize = 4;

fn escape_pointer(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

impl Ctx<'_> {
    pub(super) fn array_schema(&mut self, map: &Map<String, Value>, path: &str) -> Result<String, FsmError> {
        if map.get("uniqueItems") == Some(&Value::Bool(true))
            && self.reader.usize_keyword(map, "maxItems", path)?.is_none_or(|m| m > 1)
        {
            return Err(unsupported(
                "uniqueItems",
                path,
                "uniqueness of items is not expressible as a regex",
            ));
        }
        for keyword in ["contains", "minContains", "maxContains", "unevaluatedItems"] {
            if map.contains_key(keyword) {
                return Err(unsupported(keyword, path, "not expressible as a regex here"));
            }
        }
        let min_items = self.reader.usize_keyword(map, "minItems", path)?.unwrap_or(0);
        let max_items = self.reader.usize_keyword(map, "maxItems", path)?;
        // Tuple positions (`prefixItems`, or draft-4 `items: [...]`) and the schema of the rest.
        let (tuple, rest): (Vec<Value>, Value) = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(prefix)), items) => {
                (prefix.clone(), items.cloned().unwrap_or(Value::Bool(true)))
            }
            (None, Some(Value::Array(prefix))) => {
                (prefix.clone(), map.get("additionalItems").cloned().unwrap_or(Value::Bool(true)))
            }
            (None, Some(items)) => (Vec::new(), items.clone()),
            (None, None) => (Vec::new(), Value::Bool(true)),
            (Some(_), _) => return Err(invalid(path, "'prefixItems' must be an array")),
        };
        let ws = self.ws.clone();
        let sep = format!("{ws},{ws}");
        let rest_regex = self.schema(&rest, &format!("{path}/items"))?;
        let rest_allowed = rest_regex != NEVER;
        let mut positions = Vec::new();
        for (index, item) in tuple.iter().enumerate() {
            positions.push(self.schema(item, &format!("{path}/prefixItems/{index}"))?);
        }
        let max_items = match (max_items, rest_allowed) {
            (Some(max), true) => Some(max),
            (Some(max), false) => Some(max.min(positions.len())),
            (None, true) => None,
            (None, false) => Some(positions.len()),
        };
        if max_items.is_some_and(|max| max < min_items) {
            return Ok(NEVER.into());
        }
        positions.truncate(max_items.unwrap_or(usize::MAX).min(positions.len()));
        let mut rest_allowed = rest_allowed;
        if let Some(never) = positions.iter().position(|p| p == NEVER) {
            if never < min_items {
                return Ok(NEVER.into());
            }
            positions.truncate(never);
            // No item can stand at that position, so none after it either.
            rest_allowed = false;
        }
        // Items after the tuple: how many, at least and at most.
        let num_tuple = positions.len();
        let rest_min = min_items.saturating_sub(num_tuple);
        let rest_max = max_items.map(|max| max.saturating_sub(num_tuple));
        let rest_counts = |leading_sep: bool| -> Option<String> {
            if !rest_allowed || rest_max == Some(0) {
                return (rest_min == 0).then(String::new);
            }
            let item = if leading_sep { format!("{sep}{rest_regex}") } else { rest_regex.clone() };
            Some(match (leading_sep, rest_max) {
                (true, Some(max)) => repeat(&item, rest_min, Some(max)),
                (true, None) => repeat(&item, rest_min, None),
                (false, max) => {
                    // First item without separator, then the others with one.
                    let others_min = rest_min.saturating_sub(1);
                    let others = match max {
                        Some(max) => repeat(&format!("{sep}{rest_regex}"), others_min, Some(max - 1)),
                        None => repeat(&format!("{sep}{rest_regex}"), others_min, None),
                    };
                    if rest_min == 0 {
                        format!("(?:{item}{others})?")
                    } else {
                        format!("{item}{others}")
                    }
                }
            })
        };
        let body = if num_tuple == 0 {
            rest_counts(false).unwrap_or_else(|| NEVER.into())
        } else {
            // Nested from the last tuple position: each position may end the array unless
            // minItems needs more.
            let mut body = rest_counts(true).unwrap_or_else(|| NEVER.into());
            for index in (0..num_tuple).rev() {
                let here =
                    if index == 0 { positions[0].clone() } else { format!("{sep}{}", positions[index]) };
                let required = index < min_items;
                body = if required { format!("{here}{body}") } else { format!("(?:{here}{body})?") };
            }
            body
        };
        Ok(format!(r"\[{ws}{body}{ws}\]"))
    }
}

#[cfg(test)]
mod tests {
    use sglr_fsm::{ByteDfa, CompileLimits};

    fn matches(pattern: &str, text: &str) -> bool {
        ByteDfa::build(pattern, &CompileLimits::default()).unwrap().matches(text.as_bytes())
    }

    /// A `false` tuple position admits no item there, so none after it either (the rest's
    /// schema included).
    #[test]
    fn a_false_tuple_position_ends_the_array() {
        let schema = r#"{"type": "array", "items": [{"type": "integer"}, false], "additionalItems": {"type": "integer"}}"#;
        let regex = crate::json_schema_to_regex(schema, &crate::JsonSchemaOptions::default()).unwrap();
        for (text, valid) in [("[]", true), ("[1]", true), ("[1, 2]", false), ("[1, 2, 3]", false)] {
            assert_eq!(matches(&regex, text), valid, "{text}");
        }
    }
}
