//! Strings with length bounds past the regex path's `max_unrolled_length` (and next to a
//! pattern or format): counted lexemes, exact against the unrolled regex's language.

use proptest::prelude::*;
use sglr_fsm::CompileLimits;
use sglr_grammar::{json_schema_to_grammar, GrammarMatcher, ParseState, ParserLimits};
use sglr_schema::JsonSchemaOptions;
use sglr_vocab::Vocabulary;

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
fn short_bounds_are_counted_exactly_and_bad_bounds_are_typed_errors() {
    // Bounds the regex path would unroll are a counted lexeme on the grammar path.
    let m = matcher(r#"{"type": "string", "minLength": 2, "maxLength": 3, "description": "d"}"#, Some(32));
    for (text, expected) in
        [(r#""ab""#, true), (r#""\u00e9é\n""#, true), (r#""a""#, false), (r#""abcd""#, false)]
    {
        assert_eq!(accepts(&m, text), expected, "{text}");
    }
    let m = matcher(r#"{"type": "string", "maxLength": 0}"#, Some(32));
    assert!(accepts(&m, r#""""#));
    assert!(!accepts(&m, r#""a""#));
    // A bound that is not a non-negative integer is refused with the keyword named.
    let options = JsonSchemaOptions::default();
    for schema in [r#"{"type": "string", "maxLength": -1}"#, r#"{"type": "string", "minLength": 1.5}"#] {
        let error = json_schema_to_grammar(schema, &options).unwrap_err().to_string();
        assert!(error.contains("Length"), "{schema}: {error}");
    }
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

/// Tokens of one to four bytes: string characters, escapes, the quotes and what follows them.
fn vocabulary() -> Vocabulary {
    let texts = [
        "\"", "a", "ab", "abc", "abcd", "b\"", "a\"}", "\"}", "}", "\\", "\\n", "\\u00", "e9", "é", "éa",
        "😀", "x", "xx", "xxxx", " ", "\"a", "{\"s", "\":", "\": ", ":", "{",
    ];
    let mut tokens: Vec<Option<Vec<u8>>> = texts.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
    tokens.push(None);
    Vocabulary::new(tokens, vec![texts.len() as u32]).unwrap()
}

/// Masks, forced bytes and acceptance of `counted` and `unrolled` agree at every step of a walk
/// that takes the `picks`-th allowed token each time (until EOS or the picks run out).
fn agree_along(
    counted: &GrammarMatcher,
    unrolled: &GrammarMatcher,
    vocabulary: &Vocabulary,
    picks: &[usize],
) -> Result<(), TestCaseError> {
    let (mut a, mut b): (ParseState, ParseState) = (counted.start().unwrap(), unrolled.start().unwrap());
    for &pick in picks {
        let allowed = counted.allowed_tokens(&a, vocabulary).unwrap();
        prop_assert_eq!(
            &allowed,
            &unrolled.allowed_tokens(&b, vocabulary).unwrap(),
            "after {} bytes",
            a.num_bytes()
        );
        prop_assert_eq!(counted.forced_bytes(&a, 16).unwrap(), unrolled.forced_bytes(&b, 16).unwrap());
        prop_assert_eq!(counted.is_accepting(&a), unrolled.is_accepting(&b));
        counted.check_invariants(&a).unwrap();
        if allowed.is_empty() || a.is_finished() {
            break;
        }
        let token = allowed[pick % allowed.len()];
        prop_assert!(counted.advance_token(&mut a, vocabulary, token).unwrap());
        prop_assert!(unrolled.advance_token(&mut b, vocabulary, token).unwrap());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// With tokens of at most four bytes, counts more than five characters from both bounds
    /// share masks; every mask along random walks (biased to long strings) is still the
    /// unrolled regex's.
    #[test]
    fn shared_masks_agree_with_the_unrolled_regex(
        min in 0usize..16,
        extra in proptest::option::of(0usize..16),
        picks in proptest::collection::vec(0usize..64, 1..48),
    ) {
        let max = extra.map(|extra| min + extra);
        let max_keyword = max.map_or(String::new(), |max| format!(r#", "maxLength": {max}"#));
        let schema = format!(r#"{{"type": "object", "properties": {{"s": {{"type": "string", "minLength": {min}{max_keyword}}}}},
            "required": ["s"], "additionalProperties": false}}"#);
        let vocabulary = vocabulary();
        agree_along(&matcher(&schema, Some(0)), &matcher(&schema, None), &vocabulary, &picks)?;
    }
}

/// A long walk through a `maxLength` string of 32,767 (and 10^6) characters: its memory stays
/// far below the table's, its masks are shared across the middle counts, and the bound is
/// still exact at the end.
#[test]
fn huge_max_length_masks_in_bounded_memory() {
    let vocabulary = vocabulary();
    let (quote, x, xxxx, quote_close) = (0, 16, 18, 7);
    for max_len in [32_767usize, 1_000_000] {
        let schema = format!(
            r#"{{"type": "object", "properties": {{"s": {{"type": "string", "minLength": 50, "maxLength": {max_len}}}}},
            "required": ["s"], "additionalProperties": false}}"#
        );
        let m = matcher(&schema, JsonSchemaOptions::default().max_unrolled_length);
        let mut state = m.start().unwrap();
        assert!(m.advance_bytes(&mut state, br#"{"s": ""#).unwrap());
        let mut steps = 0;
        // Thousands of characters past the lower bound, a mask at every step.
        while state.num_bytes() < 6 + 4_000 {
            let allowed = m.allowed_tokens(&state, &vocabulary).unwrap();
            assert!(allowed.contains(&xxxx));
            assert_eq!(
                allowed.contains(&quote_close),
                state.num_bytes() - 6 >= 50,
                "at {}",
                state.num_bytes()
            );
            assert!(m.advance_token(&mut state, &vocabulary, xxxx).unwrap());
            steps += 1;
        }
        // Masks: one per count near the lower bound, one for every count in the middle.
        assert!(m.num_lexeme_masks() < 100, "{} masks after {steps} steps", m.num_lexeme_masks());
        assert!(m.memory_bytes() < 1 << 20, "{} bytes", m.memory_bytes());
        // Up to the upper bound: four characters before it, "xxxx" is allowed and "x" is
        // refused right after, where only the close remains.
        let mut end = state.clone();
        assert!(m.advance_bytes(&mut end, "x".repeat(max_len - 4_000 - 4).as_bytes()).unwrap());
        assert!(m.allowed_tokens(&end, &vocabulary).unwrap().contains(&xxxx));
        assert!(m.advance_token(&mut end, &vocabulary, xxxx).unwrap());
        assert_eq!(m.allowed_tokens(&end, &vocabulary).unwrap(), vec![quote, quote_close]);
        assert!(!m.advance_token(&mut end, &vocabulary, x).unwrap());
        assert!(m.advance_token(&mut end, &vocabulary, quote_close).unwrap() && m.is_accepting(&end));
        m.check_invariants(&end).unwrap();
        assert!(m.memory_bytes() < 1 << 20, "{} bytes", m.memory_bytes());
    }
}
