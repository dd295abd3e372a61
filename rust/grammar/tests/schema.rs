//! Recursive JSON schemas through the grammar path: known documents, refusals by keyword, and
//! random documents (random walks over allowed bytes) checked by a hand-written validator.

mod common;

use common::{accepts, keyword_matcher, matcher};
use serde_json::Value;
use sglr_fsm::FsmError;
use sglr_grammar::{json_schema_to_grammar, GrammarError};
use sglr_schema::{schema_is_recursive, JsonSchemaOptions};

const TREE: &str = r##"{
  "$defs": {"node": {"type": "object", "properties": {
      "value": {"type": "integer"},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["value"]}},
  "$ref": "#/$defs/node"}"##;

const LIST: &str = r##"{"type": "object", "properties": {
    "head": {"type": "string", "maxLength": 3},
    "tail": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
  "required": ["head", "tail"]}"##;

fn valid_tree(value: &Value) -> bool {
    let Value::Object(map) = value else { return false };
    map.keys().all(|k| k == "value" || k == "children")
        && map.get("value").is_some_and(|v| v.is_i64() || v.is_u64())
        && map.get("children").is_none_or(|c| c.as_array().is_some_and(|items| items.iter().all(valid_tree)))
}

fn valid_list(value: &Value) -> bool {
    let Value::Object(map) = value else { return false };
    map.len() == 2
        && map.get("head").and_then(Value::as_str).is_some_and(|s| s.chars().count() <= 3)
        && map.get("tail").is_some_and(|t| t.is_null() || valid_list(t))
}

#[test]
fn trees_of_any_depth() {
    assert!(schema_is_recursive(TREE) && schema_is_recursive(LIST));
    assert!(!schema_is_recursive(r#"{"type": "object", "properties": {"a": {"type": "integer"}}}"#));
    let m = matcher(TREE);
    let mut deep = String::from(r#"{"value": 0}"#);
    for depth in 1..12 {
        deep = format!(r#"{{"value": {depth}, "children": [{deep}, {{"value": -1}}]}}"#);
    }
    assert!(accepts(&m, &deep));
    assert!(accepts(&m, r#"{"value":1,"children":[]}"#));
    for bad in [
        r#"{"children":[]}"#,
        r#"{"value":1,"other":2}"#,
        r#"{"value":"1"}"#,
        r#"{"value":1,"children":[{}]}"#,
    ] {
        assert!(!accepts(&m, bad), "{bad}");
    }
}

#[test]
fn array_bounds_next_to_references() {
    let m = matcher(
        r##"{"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#"}, "minItems": 2, "maxItems": 3}]}"##,
    );
    for good in ["null", "[null,null]", "[null, [null,null], null]", "[[null,null,null],null]"] {
        assert!(accepts(&m, good), "{good}");
    }
    for bad in ["[]", "[null]", "[null,null,null,null]", "[[null],null]"] {
        assert!(!accepts(&m, bad), "{bad}");
    }
    let empty = matcher(r##"{"type": "array", "items": {"$ref": "#"}, "maxItems": 0}"##);
    assert!(accepts(&empty, "[]") && !accepts(&empty, "[[]]"));
}

#[test]
fn additional_properties_follow_the_declared_ones() {
    let schema = r##"{"type": "object", "properties": {"a": {"$ref": "#"}, "b": {"type": "integer"}},
                     "additionalProperties": {"type": "boolean"}}"##;
    let m = matcher(schema);
    for good in [r#"{}"#, r#"{"x":true}"#, r#"{"b":1,"x":true,"y":false}"#, r#"{"a":{"zz":false},"b":2}"#] {
        assert!(accepts(&m, good), "{good}");
    }
    // A declared key is never an extra one: its own schema applies.
    for bad in [r#"{"b":true}"#, r#"{"x":1}"#, r#"{"a":1}"#, r#"{"x":true,"b":1}"#] {
        assert!(!accepts(&m, bad), "{bad}");
    }
}

#[test]
fn several_types_next_to_references() {
    let m = matcher(r##"{"type": ["array", "null", "integer"], "items": {"$ref": "#"}, "maximum": 5}"##);
    for good in ["null", "3", "[]", "[null,[4,[]]]"] {
        assert!(accepts(&m, good), "{good}");
    }
    for bad in ["6", "[6]", "{}", "true"] {
        assert!(!accepts(&m, bad), "{bad}");
    }
}

#[test]
fn linked_lists() {
    let m = matcher(LIST);
    assert!(accepts(&m, r#"{"head": "a", "tail": {"head": "bc", "tail": null}}"#));
    assert!(!accepts(&m, r#"{"head": "a"}"#));
    assert!(!accepts(&m, r#"{"head": "abcd", "tail": null}"#));
}

#[test]
fn unsupported_keywords_are_named() {
    let cases = [
        (r##"{"oneOf": [{"$ref": "#"}, {"type": "null"}]}"##, "oneOf"),
        (r##"{"type": "array", "items": {"$ref": "#"}, "uniqueItems": true}"##, "uniqueItems"),
        (r##"{"type": "array", "items": {"$ref": "#"}, "maxItems": 300}"##, "maxItems"),
        (r##"{"type": "object", "properties": {"a": {"$ref": "#"}}, "not": {"minProperties": 2}}"##, "not"),
        (
            r##"{"type": "object", "dependencies": {"a": ["b"], "b": ["c"], "c": ["d"], "d": ["e"],
                "e": ["f"], "f": ["g"], "g": ["a"]}}"##,
            "dependencies",
        ),
        // The kept part of a negation must be one regex: a divisor is not.
        (r##"{"type": "integer", "multipleOf": 0.5, "not": {"const": 1}}"##, "multipleOf"),
        (r##"{"type": "number", "multipleOf": 0.0000001, "minimum": 1}"##, "multipleOf"),
        (r##"{"type": "array", "items": {}, "uniqueItems": true}"##, "uniqueItems"),
        (r##"{"type": "number", "minimum": 1e40}"##, "minimum"),
        (r##"{"oneOf": [{"type": "array", "minItems": 1}, {"type": "array", "maxItems": 3}]}"##, "oneOf"),
    ];
    for (schema, keyword) in cases {
        match json_schema_to_grammar(schema, &JsonSchemaOptions::default()) {
            Err(GrammarError::Schema(FsmError::UnsupportedSchema { keyword: named, .. })) => {
                assert_eq!(named, keyword, "{schema}")
            }
            other => panic!("{schema}: {other:?}"),
        }
    }
    // Disjoint branches are fine as oneOf.
    json_schema_to_grammar(
        r##"{"oneOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "null"}]}"##,
        &JsonSchemaOptions::default(),
    )
    .unwrap();
}

/// Random documents: from each state take a random byte among those that keep it live,
/// finishing as soon as possible past a length budget; every finished document must validate.
#[test]
fn random_documents_validate() {
    for (schema, valid) in [(TREE, valid_tree as fn(&Value) -> bool), (LIST, valid_list)] {
        let m = matcher(schema);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut finished = 0;
        for _ in 0..40 {
            let mut state = m.start().unwrap();
            let mut text = Vec::new();
            for step in 0..400 {
                if m.is_accepting(&state) && (step > 60 || next(&mut seed) % 4 == 0) {
                    break;
                }
                let live: Vec<u8> =
                    (0..=255u8).filter(|&b| m.advance_bytes(&mut state.clone(), &[b]).unwrap()).collect();
                if live.is_empty() {
                    assert!(m.is_accepting(&state), "dead end after {:?}", String::from_utf8_lossy(&text));
                    break;
                }
                // Past the budget prefer closing bytes so documents end.
                let closing: Vec<u8> = live.iter().copied().filter(|b| b"}]\"0n".contains(b)).collect();
                let pool = if step > 60 && !closing.is_empty() { &closing } else { &live };
                let byte = pool[(next(&mut seed) % pool.len() as u64) as usize];
                assert!(m.advance_bytes(&mut state, &[byte]).unwrap());
                text.push(byte);
            }
            if m.is_accepting(&state) {
                finished += 1;
                let value: Value = serde_json::from_slice(&text).expect("accepted text is JSON");
                assert!(valid(&value), "{}", String::from_utf8_lossy(&text));
            }
        }
        assert!(finished > 10, "only {finished} documents finished");
    }
}

fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Masks (memoised per lexeme state, Earley below lexeme ends) agree with advancing each token,
/// at every byte of valid documents, for tokens that cross lexeme boundaries.
#[test]
fn schema_masks_agree_with_advancing() {
    let tokens = [
        "{", "}", "[", "]", "\"", ",", ":", " ", "\":", "\",", "\"}", "}]", "1", "12", "0", "-", "x", "x_",
        "_a", "a", "ab", "\"x_", "\"a\":", ": ", ", \"", "null", "true", "s\"", "3}", "7,", "e", ".", "5",
    ];
    let mut list: Vec<Option<Vec<u8>>> = tokens.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
    list.push(None);
    let vocabulary = sglr_vocab::Vocabulary::new(list, vec![tokens.len() as u32]).unwrap();
    let cases = [
        (
            r#"{"type": "object", "patternProperties": {"^x_": {"type": "integer"}}, "properties": {"a": {"type": "string"}}}"#,
            r#"{"a": "s", "x_a": 12, "x_": -7}"#,
        ),
        (TREE, r#"{"value": 1, "children": [{"value": 12}, {"value": 0, "children": []}]}"#),
        (r#"{"type": "array", "items": {"type": "integer", "multipleOf": 3}}"#, "[0, 12, -3]"),
        // Shares its string and key lexemes' masks with the first schema (kept in the
        // vocabulary): they must hold here too.
        (
            r#"{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}"#,
            r#"{"a": "x_", "b": 7, "x_": null}"#,
        ),
    ];
    for (schema, document) in cases {
        let m = keyword_matcher(schema, true);
        let mut state = m.start().unwrap();
        for (index, &byte) in document.as_bytes().iter().enumerate() {
            let allowed = m.allowed_tokens(&state, &vocabulary).unwrap();
            for token in 0..vocabulary.vocab_size() as u32 {
                let mut probe = state.clone();
                let ok = m.advance_token(&mut probe, &vocabulary, token).unwrap();
                assert_eq!(
                    ok,
                    allowed.contains(&token),
                    "{schema}: token {token} after {:?}",
                    &document[..index]
                );
            }
            assert!(m.advance_bytes(&mut state, &[byte]).unwrap());
        }
        assert!(vocabulary.num_shared_results() > 0, "lexeme masks are kept in the vocabulary");
        assert!(m.num_lexeme_masks() > 0);
    }
}

/// A container whose regex would be very long is taken apart into rules, so no lexeme DFA
/// has to hold it (one would be built mid-document, and could be too large there).
#[test]
fn long_regexes_become_rules() {
    let properties: Vec<String> = (0..400)
        .map(|i| format!(r#""property_{i}": {{"type": "string", "enum": ["a{i}", "b{i}"]}}"#))
        .collect();
    let schema = format!(r#"{{"type": "object", "properties": {{{}}}}}"#, properties.join(", "));
    let m = keyword_matcher(&schema, false);
    let grammar = m.grammar();
    let longest =
        (0..grammar.num_lexemes() as u32).filter_map(|l| grammar.lexeme_pattern(l)).map(|p| p.len()).max();
    assert!(longest.is_some_and(|n| n < 16 << 10), "{longest:?}");
    assert!(accepts(&m, r#"{"property_3": "a3", "property_399": "b399"}"#));
    assert!(!accepts(&m, r#"{"property_3": "a4"}"#));
}

/// A free-form container next to a keyword the rules refuse (`maxItems` past the grammar's
/// unrolling bound) keeps the regex path's lexeme instead of failing.
#[test]
fn refused_rules_fall_back_to_the_regex() {
    let schema = r#"{"type": "object", "properties": {"free": {"type": "object"},
        "many": {"type": "array", "items": {"type": "integer"}, "maxItems": 300}}}"#;
    let m = keyword_matcher(schema, true);
    let items = |n: usize| vec!["1"; n].join(", ");
    assert!(accepts(&m, &format!(r#"{{"free": {{"a": [1]}}, "many": [{}]}}"#, items(300))));
    assert!(!accepts(&m, &format!(r#"{{"many": [{}]}}"#, items(301))));
    assert!(!accepts(&m, r#"{"many": ["x"]}"#));
}
