//! Hostile input never panics or hangs: random patterns and schemas compile or fail with a
//! typed error, under small size limits.

mod common;

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use sglr_fsm::{CompileLimits, FsmError, TokenFsm};
use sglr_schema::{json_schema_to_regex, json_value_to_regex, JsonSchemaOptions};

fn small_limits() -> CompileLimits {
    CompileLimits {
        nfa_size_limit: 256 << 10,
        dfa_size_limit: 512 << 10,
        determinize_size_limit: 512 << 10,
        nest_limit: 100,
    }
}

fn exercise(pattern: &str) -> Result<(), TestCaseError> {
    let (vocab, _) =
        common::vocab_with_eos(&[b"a".to_vec(), b"{".to_vec(), b"\"".to_vec(), vec![0xF0], b"1".to_vec()]);
    match TokenFsm::from_regex(pattern, vocab, &small_limits()) {
        Ok(fsm) => {
            let mut words = vec![0i32; 1];
            fsm.fill_bitmask(fsm.start_state(), &mut words).unwrap();
            let _ = fsm.jump_forward(fsm.start_state()).unwrap();
            fsm.check_invariants().map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        Err(
            FsmError::InvalidRegex(_)
            | FsmError::UnsupportedRegex(_)
            | FsmError::AutomatonTooLarge { .. }
            | FsmError::EmptyLanguage,
        ) => {}
        Err(other) => prop_assert!(false, "unexpected error kind {other:?} for {pattern:?}"),
    }
    Ok(())
}

fn regex_piece() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "*",
        "+",
        "?",
        "|",
        "\\",
        "^",
        "$",
        ".",
        "a",
        "b",
        "0",
        "9",
        "-",
        ",",
        "\\d",
        "\\w",
        "\\p{L}",
        "\\b",
        "(?=",
        "(?i)",
        "\\1",
        "{1000000}",
        "{3,2}",
        "[^\\s\\S]",
        "\u{1F608}",
        "\\x{110000}",
        "(?-u:\\xFF)",
        "[z-a]",
        "{0,300}",
        "\\u{0}",
        "\"",
    ])
    .prop_map(String::from)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_text_patterns(pattern in any::<String>()) {
        exercise(&pattern)?;
    }

    #[test]
    fn random_metachar_patterns(pieces in prop::collection::vec(regex_piece(), 0..16)) {
        exercise(&pieces.concat())?;
    }

    #[test]
    fn random_schema_text(text in any::<String>()) {
        let result = json_schema_to_regex(&text, &JsonSchemaOptions::default());
        prop_assert!(result.is_ok() || is_schema_error(&result));
    }

    #[test]
    fn random_schemas(schema in schema_value()) {
        let result = json_value_to_regex(&schema, &JsonSchemaOptions::default());
        match result {
            Ok(regex) => exercise(&regex)?,
            Err(_) => prop_assert!(is_schema_error(&result), "{result:?}"),
        }
    }
}

fn is_schema_error(result: &Result<String, FsmError>) -> bool {
    matches!(
        result,
        Err(FsmError::InvalidSchema { .. }
            | FsmError::UnsupportedSchema { .. }
            | FsmError::AutomatonTooLarge { .. }
            | FsmError::InvalidRegex(_))
    )
}

/// Schema-shaped JSON: real keywords with random (often wrong) values.
fn schema_value() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(json!("string")),
        Just(json!("object")),
        Just(json!("integer")),
        Just(json!(["number", "null"])),
        Just(json!(-3)),
        Just(json!(2.5)),
        Just(json!(true)),
        Just(json!(false)),
        Just(json!(null)),
        Just(json!("#/definitions/a")),
        Just(json!("#")),
        Just(json!("^[a-z]+$")),
        Just(json!("date-time")),
        Just(json!(["a", "b"])),
    ];
    let keys = prop::sample::select(vec![
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "format",
        "additionalProperties",
        "not",
        "minItems",
        "maxItems",
        "prefixItems",
        "definitions",
        "a",
        "uniqueItems",
        "nullable",
        "multipleOf",
        "patternProperties",
    ]);
    scalar.prop_recursive(4, 48, 5, move |inner| {
        prop_oneof![
            prop::collection::vec((keys.clone(), inner.clone()), 0..5).prop_map(|entries| {
                Value::Object(entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Map<_, _>>())
            }),
            prop::collection::vec(inner, 0..4).prop_map(Value::Array),
        ]
    })
}
