//! What the schema's declared draft (`$schema`) changes in how keywords read.

use serde_json::Value;

/// Whether `$ref` replaces its sibling keywords: drafts 3 to 7 say a `$ref` object's other
/// keywords "MUST be ignored"; from 2019-09 on (and with no `$schema`, read as the latest
/// draft) siblings apply alongside the reference, as an `allOf` would.
pub fn ref_overrides_siblings(root: &Value) -> bool {
    let Some(Value::String(uri)) = root.get("$schema") else { return false };
    ["draft-03", "draft-04", "draft-05", "draft-06", "draft-07"]
        .iter()
        .any(|draft| uri.contains(&format!("json-schema.org/{draft}/")))
}

/// Whether `if` / `then` / `else` are unknown keywords (annotations): they came with draft 7,
/// so a document declaring draft 3 to 6 means nothing by them.
pub fn conditions_ignored(root: &Value) -> bool {
    let Some(Value::String(uri)) = root.get("$schema") else { return false };
    ["draft-03", "draft-04", "draft-05", "draft-06"]
        .iter()
        .any(|draft| uri.contains(&format!("json-schema.org/{draft}/")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn legacy_drafts_ignore_ref_siblings() {
        for uri in [
            "http://json-schema.org/draft-04/schema#",
            "https://json-schema.org/draft-07/schema",
            "http://json-schema.org/draft-06/schema#",
        ] {
            assert!(ref_overrides_siblings(&json!({ "$schema": uri })), "{uri}");
            assert_eq!(conditions_ignored(&json!({ "$schema": uri })), !uri.contains("draft-07"), "{uri}");
        }
        for root in [
            json!({ "$schema": "https://json-schema.org/draft/2020-12/schema" }),
            json!({ "$schema": "https://json-schema.org/draft/2019-09/schema" }),
            json!({}),
            json!(true),
        ] {
            assert!(!ref_overrides_siblings(&root), "{root}");
            assert!(!conditions_ignored(&root), "{root}");
        }
    }
}
