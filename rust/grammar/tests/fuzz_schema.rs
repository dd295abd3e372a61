//! Hostile JSON schemas through both back ends (one regex, `sglr_schema::json_value_to_regex`;
//! a grammar, `json_schema_to_grammar`): schema-shaped values (every keyword either path reads,
//! with values of the wrong type, numbers at the edges of u64 / i64 / f64, references to
//! anywhere including themselves, schemas nested deeper than either path follows) and damaged
//! schema text compile or fail with a typed error; never a panic, a stack overflow or an
//! unbounded allocation. What compiles is driven through bytes and a token mask under small
//! automaton limits. Cases per property: `PROPTEST_CASES` (default 64).

mod common;

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use sglr_fsm::{CompileLimits, FsmError, TokenFsm};
use sglr_grammar::{json_schema_to_grammar, GrammarError, GrammarMatcher, ParserLimits};
use sglr_schema::{json_value_to_regex, JsonSchemaOptions};
use sglr_vocab::Vocabulary;

fn small_limits() -> CompileLimits {
    CompileLimits {
        nfa_size_limit: 1 << 20,
        dfa_size_limit: 1 << 20,
        determinize_size_limit: 1 << 20,
        nest_limit: 100,
    }
}

const TOKENS: [&[u8]; 14] =
    [b"{", b"}", b"[", b"]", b"\"", b":", b",", b" ", b"a", b"1", b"-", b".", b"true", b"null"];

fn vocabulary() -> Arc<Vocabulary> {
    let mut list: Vec<Option<Vec<u8>>> = TOKENS.iter().map(|t| Some(t.to_vec())).collect();
    list.push(None); // EOS
    Arc::new(Vocabulary::new(list, vec![TOKENS.len() as u32]).unwrap())
}

/// The id of the one-byte token `byte`, if the vocabulary has one.
fn token_of(byte: u8) -> Option<u32> {
    TOKENS.iter().position(|t| *t == [byte]).map(|i| i as u32)
}

fn options(open: bool) -> JsonSchemaOptions {
    JsonSchemaOptions {
        additional_properties_default: open,
        implied_types: !open,
        ..JsonSchemaOptions::default()
    }
}

fn fsm_error_is_typed(error: &FsmError) -> bool {
    !matches!(error, FsmError::Invariant(_))
}

fn grammar_error_is_typed(error: &GrammarError) -> bool {
    match error {
        GrammarError::Invariant(_) => false,
        GrammarError::Schema(inner) | GrammarError::Lexeme { source: inner, .. } => fsm_error_is_typed(inner),
        _ => true,
    }
}

/// The regex back end, then the FSM of what it wrote.
fn through_regex(schema: &Value, open: bool, input: &[u8]) -> Result<(), TestCaseError> {
    let regex = match json_value_to_regex(schema, &options(open)) {
        Ok(regex) => regex,
        Err(error) => {
            prop_assert!(fsm_error_is_typed(&error), "{error:?} for {schema}");
            return Ok(());
        }
    };
    match TokenFsm::from_regex(&regex, vocabulary(), &small_limits()) {
        Ok(fsm) => {
            let mut words = vec![0i32; 1];
            fsm.fill_bitmask(fsm.start_state(), &mut words)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut state = fsm.start_state();
            for &byte in input {
                let Some(next) = token_of(byte).and_then(|t| fsm.advance(state, t).ok()) else { break };
                state = next;
            }
            fsm.check_invariants().map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        Err(error) => prop_assert!(fsm_error_is_typed(&error), "{error:?} for {schema}"),
    }
    Ok(())
}

/// The grammar back end, then a matcher over it.
fn through_grammar(text: &str, open: bool, input: &[u8]) -> Result<(), TestCaseError> {
    let grammar = match json_schema_to_grammar(text, &options(open)) {
        Ok(grammar) => grammar,
        Err(error) => {
            prop_assert!(grammar_error_is_typed(&error), "{error:?} for {text}");
            return Ok(());
        }
    };
    let matcher = GrammarMatcher::new(grammar, small_limits(), ParserLimits { max_items_per_set: 2_000 });
    let vocabulary = vocabulary();
    let outcome = (|| -> Result<(), GrammarError> {
        let mut state = matcher.start()?;
        let mut mask = vec![0u32; vocabulary.num_mask_words()];
        matcher.fill_mask(&state, &vocabulary, &mut mask)?;
        if matcher.advance_bytes(&mut state, input)? {
            matcher.fill_mask(&state, &vocabulary, &mut mask)?;
            matcher.check_invariants(&state)?;
        }
        Ok(())
    })();
    if let Err(error) = outcome {
        prop_assert!(grammar_error_is_typed(&error), "{error:?} for {text}");
    }
    Ok(())
}

fn edge_number() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        json!(0),
        json!(-1),
        json!(3),
        json!(2.5),
        json!(-0.0),
        json!(1e-300),
        json!(1e308),
        json!(-1e308),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(i64::MAX),
        json!(4_294_967_296u64),
        json!(0.1),
        json!(1e15),
    ])
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        edge_number(),
        prop::sample::select(vec![
            json!("string"),
            json!("object"),
            json!("array"),
            json!("integer"),
            json!("number"),
            json!("boolean"),
            json!("null"),
            json!(["string", "null"]),
            json!(["integer", "array"]),
            json!("no-such-type"),
            json!([]),
            json!(true),
            json!(false),
            json!(null),
            json!({}),
            json!("#"),
            json!("#/definitions/a"),
            json!("#/$defs/n"),
            json!("#/properties/a"),
            json!("#/items"),
            json!("#/anyOf/0"),
            json!("#/nowhere"),
            json!("http://x/y"),
            json!("#/a~1b%25"),
            json!("^[a-z]+$"),
            json!("(a"),
            json!("\\p{L}{2,5}"),
            json!("(?=x)"),
            json!("[\u{10FFFF}-\u{0}]"),
            json!("date-time"),
            json!("email"),
            json!("uuid"),
            json!("no-such-format"),
            json!(["a", "b"]),
            json!(["a", 1, null, {"x": [1]}]),
            json!("é\u{1F600}"),
            json!(""),
        ]),
    ]
}

fn keyword() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "type",
        "properties",
        "required",
        "items",
        "prefixItems",
        "additionalItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "$ref",
        "$defs",
        "definitions",
        "$schema",
        "$id",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependentRequired",
        "$dynamicRef",
        "unevaluatedProperties",
        "nullable",
        "a",
        "n",
        "x",
    ])
}

/// Schema-shaped values: objects of real keywords with (often wrong) values, nested.
fn schema_value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            3 => prop::collection::vec((keyword(), inner.clone()), 0..6).prop_map(|entries| {
                Value::Object(entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Map<_, _>>())
            }),
            1 => prop::collection::vec(inner, 0..4).prop_map(Value::Array),
        ]
    })
}

/// Schemas nested `depth` levels through one keyword: past both paths' depth bounds (96), up to
/// the 128 levels of JSON that schema text can carry (`serde_json` refuses deeper text; a
/// `Value` built deeper in Rust overflows `serde_json`'s own recursive clone, out of scope here).
/// Chains of `additionalProperties` stop at 12: from about 16 levels each costs about a second
/// (every level of the grammar path rebuilds its bounded fallback regex up to the 4 MiB limit),
/// bounded but too slow for a test run.
fn deep_schema() -> impl Strategy<Value = Value> {
    (prop::sample::select(vec!["items", "not", "anyOf", "additionalProperties", "properties"]), 1usize..128)
        .prop_map(|(keyword, depth)| {
            (keyword, if keyword == "additionalProperties" { depth % 12 } else { depth })
        })
        .prop_map(|(keyword, depth)| {
            let mut schema = json!({"type": "integer"});
            for _ in 0..depth {
                schema = match keyword {
                    "anyOf" => json!({"anyOf": [schema, {"type": "null"}]}),
                    "properties" => json!({"type": "object", "properties": {"a": schema}, "required": ["a"]}),
                    other => json!({ other: schema }),
                };
            }
            schema
        })
}

const VALID: [&str; 4] = [
    r##"{"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "integer"}}, "required": ["a"]}"##,
    r##"{"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"}"##,
    r##"{"type": "array", "items": {"enum": [1, "x", null]}, "minItems": 1, "maxItems": 3}"##,
    r##"{"anyOf": [{"type": "number", "minimum": -1.5, "maximum": 10}, {"pattern": "^[a-z]+$"}]}"##,
];

/// A valid schema's text with a few bytes inserted, deleted or replaced.
fn damaged_text() -> impl Strategy<Value = String> {
    let edit = (any::<prop::sample::Index>(), 0u8..3, prop::sample::select(b"{}[]\":,0-e.\\ a".to_vec()));
    (prop::sample::select(VALID.to_vec()), prop::collection::vec(edit, 1..6)).prop_map(|(text, edits)| {
        let mut bytes = text.as_bytes().to_vec();
        for (at, kind, b) in edits {
            let i = at.index(bytes.len() + 1);
            match kind {
                0 => bytes.insert(i, b),
                1 if i < bytes.len() => {
                    bytes.remove(i);
                }
                _ if i < bytes.len() => bytes[i] = b,
                _ => bytes.push(b),
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"{}[]\":, a1-.".to_vec()), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(64)))]

    #[test]
    fn schema_shaped_values_compile_or_fail_typed(schema in schema_value(), open in any::<bool>(), bytes in input()) {
        through_regex(&schema, open, &bytes)?;
        through_grammar(&schema.to_string(), open, &bytes)?;
    }

    #[test]
    fn damaged_schema_text_compiles_or_fails_typed(text in damaged_text(), open in any::<bool>(), bytes in input()) {
        if let Ok(schema) = serde_json::from_str::<Value>(&text) {
            through_regex(&schema, open, &bytes)?;
        }
        through_grammar(&text, open, &bytes)?;
    }
}

proptest! {
    // Deep schemas cost tens of milliseconds each (a debug build): fewer cases by default.
    #![proptest_config(ProptestConfig::with_cases(common::cases(16)))]

    #[test]
    fn deeply_nested_schemas_compile_or_fail_typed(schema in deep_schema(), open in any::<bool>(), bytes in input()) {
        through_regex(&schema, open, &bytes)?;
        through_grammar(&schema.to_string(), open, &bytes)?;
    }
}

#[test]
fn schema_text_nested_past_the_json_reader_is_refused() {
    let deep = format!("{}{{}}{}", r#"{"items":"#.repeat(100_000), "}".repeat(100_000));
    assert!(matches!(
        json_schema_to_grammar(&deep, &JsonSchemaOptions::default()),
        Err(GrammarError::Schema(FsmError::InvalidSchema { .. }))
    ));
}
