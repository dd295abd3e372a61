//! Strings with length bounds past the regex path's `max_unrolled_length` (and next to a
//! pattern or format): counted lexemes, exact against the unrolled regex's language.

use proptest::prelude::*;
use sglr_fsm::schema::JsonSchemaOptions;
use sglr_fsm::CompileLimits;
use sglr_grammar::{json_schema_to_grammar, GrammarMatcher, ParserLimits};

fn matcher(schema: &str, max_unrolled_length: Option<usize>) -> GrammarMatcher {
    let options = JsonSchemaOptions { max_unrolled_length, ..JsonSchemaOptions::default() };
    let grammar = json_schema_to_grammar(schema, &options).unwrap();
    GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
}

fn accepts(m: &GrammarMatcher, text: &str) -> bool {
    let mut state = m.start().unwrap();
    let ok = m.advance_bytes(&mut state, text.as_bytes()).unwrap() && m.is_accepting(&state);
    m.check_invariants(&state).unwrap();
    ok
}

#[test]
fn large_max_length_is_exact() {
    let schema = r#"{"type": "object", "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 10000}},
        "required": ["s"], "additionalProperties": false}"#;
    let m = matcher(schema, JsonSchemaOptions::default().max_unrolled_length);
    let doc = |body: &str| format!(r#"{{"s": "{body}"}}"#);
    assert!(accepts(&m, &doc("ab")));
    assert!(accepts(&m, &doc(&"x".repeat(10_000))));
    assert!(accepts(&m, &doc(&format!("{}\\u00e9é", "x".repeat(9_998)))));
    assert!(!accepts(&m, &doc("a")));
    assert!(!accepts(&m, &doc(&"x".repeat(10_001))));
    assert!(!accepts(&m, &doc(&format!("{}\\n", "x".repeat(10_000)))));
}

#[test]
fn lengths_next_to_a_format_or_pattern() {
    let m = matcher(r#"{"type": "string", "format": "email", "maxLength": 300}"#, Some(64));
    assert!(accepts(&m, r#""a@b.co""#));
    assert!(!accepts(&m, r#""not an email""#));
    assert!(!accepts(&m, &format!("\"{}@b.co\"", "a".repeat(296))));
    assert!(accepts(&m, &format!("\"{}@b.co\"", "a".repeat(295))));
    let m = matcher(r#"{"type": "string", "pattern": "^[a-z]+$", "minLength": 100}"#, Some(64));
    assert!(accepts(&m, &format!("\"{}\"", "a".repeat(100))));
    assert!(!accepts(&m, &format!("\"{}\"", "a".repeat(99))));
    assert!(!accepts(&m, &format!("\"{}1\"", "a".repeat(100))));
}

#[test]
fn empty_counted_languages_derive_nothing() {
    // Three characters of [a-z]{2}: nothing; the optional member is dropped, the required one
    // makes the schema empty.
    let optional = r#"{"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-z]{2}$", "minLength": 3}}}"#;
    let m = matcher(optional, Some(0));
    assert!(accepts(&m, "{}"));
    assert!(!accepts(&m, r#"{"s": "abc"}"#));
    let required = r#"{"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-z]{2}$", "minLength": 3}},
        "required": ["s"]}"#;
    let options = JsonSchemaOptions { max_unrolled_length: Some(0), ..JsonSchemaOptions::default() };
    assert!(json_schema_to_grammar(required, &options).is_err());
}

fn json_char() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9@.\"\\\\]".prop_map(|c| c.to_string()),
        Just("\\n".to_string()),
        Just("\\u00e9".to_string()),
        Just("é".to_string()),
        Just("😀".to_string()),
    ]
}

/// The validator's answer: a JSON string (any escapes) of `min..=max` characters, all in
/// `a-z` when `lowercase`.
fn valid(text: &str, min: usize, max: Option<usize>, lowercase: bool) -> bool {
    let Ok(decoded) = serde_json::from_str::<String>(text) else { return false };
    let count = decoded.chars().count();
    count >= min
        && max.is_none_or(|max| count <= max)
        && (!lowercase || decoded.chars().all(|c| c.is_ascii_lowercase()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Counted lexemes (every bound past a limit of 0), alone or next to a pattern, accept
    /// exactly the strings a validator accepts, as the unrolled regex lexemes (no limit) do.
    #[test]
    fn counted_agrees_with_a_validator(
        min in 0usize..4,
        extra in proptest::option::of(0usize..4),
        lowercase in any::<bool>(),
        texts in proptest::collection::vec(proptest::collection::vec(json_char(), 0..7), 1..6),
    ) {
        let max = extra.map(|extra| min + extra);
        let max_keyword = max.map_or(String::new(), |max| format!(r#", "maxLength": {max}"#));
        let shape = if lowercase { r#", "pattern": "^[a-z]*$""# } else { "" };
        let schema = format!(r#"{{"type": "string", "minLength": {min}{max_keyword}{shape}}}"#);
        let counted = matcher(&schema, Some(0));
        let unrolled = matcher(&schema, None);
        for text in texts {
            let text = format!("\"{}\"", text.concat());
            let expected = valid(&text, min, max, lowercase);
            prop_assert_eq!(accepts(&counted, &text), expected, "{} on {}", schema, text);
            prop_assert_eq!(accepts(&unrolled, &text), expected, "{} on {}", schema, text);
        }
    }
}
