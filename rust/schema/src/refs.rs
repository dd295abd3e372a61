//! References within a document: where they point, and whether they form a cycle.

use serde_json::Value;

/// Whether a schema (JSON text) has a `$ref` cycle (the regex path can only unroll those to a
/// depth); false for text that is not JSON.
pub fn schema_is_recursive(schema: &str) -> bool {
    serde_json::from_str::<Value>(schema).is_ok_and(|root| value_is_recursive(&root))
}

/// [`schema_is_recursive`] for an already parsed schema.
pub fn value_is_recursive(root: &Value) -> bool {
    has_cycle(root, root, &mut Vec::new())
}

fn has_cycle<'a>(root: &'a Value, value: &'a Value, visiting: &mut Vec<&'a str>) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(key, child)| match (key.as_str(), child) {
            ("$ref", Value::String(reference)) => {
                if visiting.contains(&reference.as_str()) {
                    return true;
                }
                let Some(target) = pointer(root, reference) else { return false };
                visiting.push(reference);
                let found = has_cycle(root, target, visiting);
                visiting.pop();
                found
            }
            _ => has_cycle(root, child, visiting),
        }),
        Value::Array(items) => items.iter().any(|item| has_cycle(root, item, visiting)),
        _ => false,
    }
}

/// The value a reference within the document (`#`, or `#` and a JSON pointer, `%XX` escapes
/// decoded) points at; `None` for any other reference or a pointer to nothing.
pub fn pointer<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let path = reference.strip_prefix('#')?;
    if path.is_empty() {
        Some(root)
    } else {
        root.pointer(&percent_decode(path))
    }
}

/// Decodes `%XX` escapes in a URI-fragment JSON pointer.
pub(crate) fn percent_decode(pointer: &str) -> String {
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
