//! Objects whose declared properties may come in any order (`properties_any_order`), on both
//! paths: every order of every subset decided by `required`, nothing twice, undeclared members
//! as `additionalProperties` says, nested objects, counts, the bound on the states, and random
//! objects against a reference decision.

mod common;

use common::{accepts, cases};
use proptest::prelude::*;
use sglr_fsm::{ByteDfa, CompileLimits, FsmError};
use sglr_grammar::{json_schema_to_grammar, GrammarError, GrammarMatcher, ParserLimits};
use sglr_schema::{json_schema_to_regex, JsonSchemaOptions};

fn any_order() -> JsonSchemaOptions {
    JsonSchemaOptions { properties_any_order: true, ..JsonSchemaOptions::default() }
}

fn any_order_matcher(schema: &str) -> GrammarMatcher {
    let grammar = json_schema_to_grammar(schema, &any_order()).unwrap_or_else(|e| panic!("{schema}: {e}"));
    GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
}

/// The regex path's DFA for `schema` under any order (None where it refuses), its regex allowed
/// to be long (undeclared members' keys take a few KiB in every order).
fn any_order_dfa(schema: &str) -> Option<ByteDfa> {
    let options = JsonSchemaOptions { max_regex_len: 1 << 16, ..any_order() };
    let regex = json_schema_to_regex(schema, &options).ok()?;
    Some(ByteDfa::build(&regex, &CompileLimits::default()).unwrap())
}

/// Every sequence of distinct indices below `n` (every order of every subset).
fn sequences(n: usize) -> Vec<Vec<usize>> {
    let mut all = vec![Vec::new()];
    let mut frontier: Vec<Vec<usize>> = vec![Vec::new()];
    while let Some(prefix) = frontier.pop() {
        for j in (0..n).filter(|j| !prefix.contains(j)) {
            let mut longer = prefix.clone();
            longer.push(j);
            all.push(longer.clone());
            frontier.push(longer);
        }
    }
    all
}

const MEMBERS: [&str; 4] = [r#""a": 1"#, r#""b": "x""#, r#""c": true"#, r#""d": null"#];

fn object(members: &[&str]) -> String {
    format!("{{{}}}", members.join(", "))
}

fn schema_of(n: usize, required: &str, extra: &str) -> String {
    let types = [
        r#""a": {"type": "integer"}"#,
        r#""b": {"type": "string"}"#,
        r#""c": {"type": "boolean"}"#,
        r#""d": {"type": "null"}"#,
    ];
    format!(
        r#"{{"type": "object", "properties": {{{}}}, "required": [{required}]{extra}}}"#,
        types[..n].join(", ")
    )
}

/// All 65 orders and subsets of four properties: accepted exactly when both required ones are
/// in; the regex path refuses four (naming `properties`), the grammar path holds them.
#[test]
fn every_order_of_every_subset() {
    let schema = schema_of(4, r#""a", "c""#, "");
    let m = any_order_matcher(&schema);
    let all = sequences(4);
    assert_eq!(all.len(), 65);
    for sequence in &all {
        let text = object(&sequence.iter().map(|&j| MEMBERS[j]).collect::<Vec<_>>());
        let valid = sequence.contains(&0) && sequence.contains(&2);
        assert_eq!(accepts(&m, &text), valid, "{text}");
    }
    match json_schema_to_regex(&schema, &any_order()) {
        Err(FsmError::UnsupportedSchema { keyword, .. }) => assert_eq!(keyword, "properties"),
        other => panic!("the regex path should refuse four properties in any order: {other:?}"),
    }
}

/// Three properties: the regex path spells their orders, and agrees with the grammar path.
#[test]
fn the_regex_path_agrees_for_three_properties() {
    for extra in ["", r#", "additionalProperties": {"type": "integer"}"#] {
        let schema = schema_of(3, r#""b""#, extra);
        let m = any_order_matcher(&schema);
        let dfa = any_order_dfa(&schema).expect("three properties fit a regex");
        let mut texts: Vec<String> =
            sequences(3).iter().map(|s| object(&s.iter().map(|&j| MEMBERS[j]).collect::<Vec<_>>())).collect();
        texts.extend(
            [
                r#"{"z": 1, "b": "x"}"#,
                r#"{"b": "x", "z": 1, "a": 1, "y": 2}"#,
                r#"{"z": 1}"#,
                r#"{"b": "x", "z": "s"}"#,
            ]
            .map(String::from),
        );
        for text in &texts {
            assert_eq!(dfa.matches(text.as_bytes()), accepts(&m, text), "{schema}: {text}");
        }
    }
}

/// A declared property twice, or a required one missing, is refused in any order.
#[test]
fn duplicates_and_missing_required_are_refused() {
    let m = any_order_matcher(&schema_of(4, r#""a", "c""#, ""));
    let dfa = any_order_dfa(&schema_of(3, r#""a", "c""#, "")).unwrap();
    for text in [
        r#"{"c": true, "a": 1, "a": 2}"#,
        r#"{"a": 1, "c": true, "c": false}"#,
        r#"{"c": true, "b": "x", "b": "y", "a": 1}"#,
        r#"{"c": true, "b": "x"}"#,
        r#"{"b": "x", "d": null}"#,
        r#"{}"#,
    ] {
        assert!(!accepts(&m, text), "{text}");
        assert!(!dfa.matches(text.as_bytes()), "{text}");
    }
}

/// Objects inside objects are in any order too; the ordered default still refuses another order.
#[test]
fn nested_objects_in_any_order() {
    let schema = r#"{"type": "object", "required": ["id", "point"], "properties": {
        "id": {"type": "integer"},
        "point": {"type": "object", "required": ["x", "y"], "additionalProperties": false,
                  "properties": {"x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"}}},
        "tags": {"type": "array", "items": {"type": "string"}}}}"#;
    let m = any_order_matcher(schema);
    for text in [
        r#"{"point": {"y": 2, "x": 1}, "id": 3}"#,
        r#"{"tags": ["t"], "point": {"z": 0, "y": 2, "x": 1}, "id": 3}"#,
        r#"{"id": 3, "point": {"x": 1, "y": 2}}"#,
    ] {
        assert!(accepts(&m, text), "{text}");
    }
    for text in [
        r#"{"point": {"y": 2, "y": 1}, "id": 3}"#,
        r#"{"point": {"y": 2}, "id": 3}"#,
        r#"{"point": {"x": 1, "y": 2, "w": 0}, "id": 3}"#,
        r#"{"point": {"x": 1, "y": 2}, "id": 3, "id": 4}"#,
    ] {
        assert!(!accepts(&m, text), "{text}");
    }
    let ordered = common::matcher(schema);
    assert!(!accepts(&ordered, r#"{"point": {"y": 2, "x": 1}, "id": 3}"#));
    assert!(accepts(&ordered, r#"{"id": 3, "point": {"x": 1, "y": 2}}"#));
}

/// Undeclared members anywhere among the declared ones when admitted, never when closed; the
/// declared ones still once each.
#[test]
fn additional_properties_true_and_false() {
    let open = any_order_matcher(&schema_of(4, r#""a""#, r#", "additionalProperties": true"#));
    let closed = any_order_matcher(&schema_of(4, r#""a""#, r#", "additionalProperties": false"#));
    for text in [r#"{"z": [1], "a": 1}"#, r#"{"b": "x", "z": {}, "a": 1, "y": null}"#] {
        assert!(accepts(&open, text), "{text}");
        assert!(!accepts(&closed, text), "{text}");
    }
    for text in [r#"{"z": 1, "a": 1, "a": 1}"#, r#"{"z": 1}"#] {
        assert!(!accepts(&open, text), "{text}");
    }
    assert!(accepts(&closed, r#"{"d": null, "a": 1}"#));
}

/// Counts: `minProperties` / `maxProperties` over members in any order.
#[test]
fn member_counts_in_any_order() {
    let schema = schema_of(4, "", r#", "minProperties": 2, "maxProperties": 3"#);
    let m = any_order_matcher(&schema);
    for sequence in sequences(4) {
        let text = object(&sequence.iter().map(|&j| MEMBERS[j]).collect::<Vec<_>>());
        assert_eq!(accepts(&m, &text), (2..=3).contains(&sequence.len()), "{text}");
    }
}

fn wide_schema(num_properties: usize, extra: &str) -> String {
    let properties: Vec<String> =
        (0..num_properties).map(|i| format!(r#""p{i}": {{"type": "integer"}}"#)).collect();
    format!(r#"{{"type": "object", "properties": {{{}}}{extra}}}"#, properties.join(", "))
}

/// Past the bound on states the grammar path refuses by name; `maxProperties` keeps wide
/// objects under it (only the sets it admits are states).
#[test]
fn the_bound_on_states() {
    let m = any_order_matcher(&wide_schema(12, ""));
    assert!(accepts(&m, r#"{"p11": 1, "p0": 2, "p5": 3}"#));
    assert!(!accepts(&m, r#"{"p11": 1, "p0": 2, "p11": 3}"#));
    for (num_properties, keyword) in [(14, "properties"), (40, "properties")] {
        match json_schema_to_grammar(&wide_schema(num_properties, ""), &any_order()) {
            Err(GrammarError::Schema(FsmError::UnsupportedSchema { keyword: named, .. })) => {
                assert_eq!(named, keyword)
            }
            other => panic!("{num_properties} properties should be refused: {other:?}"),
        }
    }
    let m = any_order_matcher(&wide_schema(40, r#", "maxProperties": 2"#));
    assert!(accepts(&m, r#"{"p39": 1, "p0": 2}"#));
    assert!(!accepts(&m, r#"{"p39": 1, "p0": 2, "p1": 3}"#));
    assert!(!accepts(&m, r#"{"p39": 1, "p39": 2}"#));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    /// Random objects (declared keys in any order, repeated, missing, undeclared ones) decided
    /// as a validator would: every key once, the required ones present, undeclared ones only
    /// when admitted; the regex path (up to three properties) agrees.
    #[test]
    fn random_objects_against_a_reference(
        num_properties in 1usize..=5,
        required_bits in 0u32..32,
        open in any::<bool>(),
        keys in proptest::collection::vec(0usize..6, 0..7),
    ) {
        let required: Vec<usize> = (0..num_properties).filter(|j| required_bits >> j & 1 == 1).collect();
        let names: Vec<String> = required.iter().map(|j| format!(r#""k{j}""#)).collect();
        let extra = format!(r#", "additionalProperties": {open}"#);
        let properties: Vec<String> =
            (0..num_properties).map(|j| format!(r#""k{j}": {{"type": "integer"}}"#)).collect();
        let schema = format!(
            r#"{{"type": "object", "properties": {{{}}}, "required": [{}]{extra}}}"#,
            properties.join(", "),
            names.join(", ")
        );
        // Key 5 is never declared; others past `num_properties` neither.
        let text = object(&keys.iter().map(|j| format!(r#""k{j}": {j}"#)).collect::<Vec<_>>().iter().map(String::as_str).collect::<Vec<_>>());
        let distinct = keys.iter().enumerate().all(|(i, k)| !keys[..i].contains(k));
        let valid = distinct
            && required.iter().all(|j| keys.contains(j))
            && (open || keys.iter().all(|&j| j < num_properties));
        let m = any_order_matcher(&schema);
        // NOTE: repeated undeclared keys are beyond a grammar (only declared ones are tracked).
        let repeats_only_undeclared = !distinct
            && keys.iter().enumerate().all(|(i, k)| *k >= num_properties || !keys[..i].contains(k));
        if !(open && repeats_only_undeclared) {
            prop_assert_eq!(accepts(&m, &text), valid, "{} {}", schema, text);
        }
        if let Some(dfa) = any_order_dfa(&schema) {
            prop_assert_eq!(dfa.matches(text.as_bytes()), accepts(&m, &text), "{} {}", schema, text);
        }
    }
}

/// `const` / `enum` objects are equal whatever their keys' order: spelled in every order on
/// the regex path (up to three keys), as the object schemas they are on the grammar path.
#[test]
fn literal_objects_in_any_order() {
    let small = r#"{"enum": [{"a": 1, "b": [{"c": null, "d": true}]}, 3]}"#;
    let wide = r#"{"const": {"p": 1, "q": 2, "r": 3, "s": {"t": 4, "u": 5}}}"#;
    let dfa = any_order_dfa(small).expect("three keys fit a regex");
    let m = any_order_matcher(small);
    for (text, valid) in [
        (r#"{"b": [{"d": true, "c": null}], "a": 1}"#, true),
        (r#"{"a": 1, "b": [{"c": null, "d": true}]}"#, true),
        ("3", true),
        (r#"{"b": [{"d": true}], "a": 1}"#, false),
        (r#"{"a": 1, "a": 1, "b": [{"c": null, "d": true}]}"#, false),
    ] {
        assert_eq!(dfa.matches(text.as_bytes()), valid, "{text}");
        assert_eq!(accepts(&m, text), valid, "{text}");
    }
    assert!(json_schema_to_regex(wide, &any_order()).is_err());
    let m = any_order_matcher(wide);
    for (text, valid) in [
        (r#"{"s": {"u": 5, "t": 4}, "r": 3, "p": 1, "q": 2}"#, true),
        (r#"{"p": 1, "q": 2, "r": 3, "s": {"t": 4, "u": 5}}"#, true),
        (r#"{"p": 1, "q": 2, "r": 3}"#, false),
        (r#"{"p": 1, "q": 2, "r": 3, "s": {"t": 4, "u": 5}, "v": 6}"#, false),
        (r#"{"p": 1, "q": 2, "r": 4, "s": {"t": 4, "u": 5}}"#, false),
    ] {
        assert_eq!(accepts(&m, text), valid, "{text}");
    }
}

/// One declared property among undeclared ones may come after them, on both paths.
#[test]
fn one_declared_property_after_undeclared_ones() {
    let schema = r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "integer"}}"#;
    let dfa = any_order_dfa(schema).unwrap();
    let m = any_order_matcher(schema);
    for (text, valid) in [
        (r#"{"z": 1, "a": 2}"#, true),
        (r#"{"z": 1, "a": 2, "y": 3}"#, true),
        (r#"{"z": 1, "a": 2, "a": 3}"#, false),
    ] {
        assert_eq!(dfa.matches(text.as_bytes()), valid, "{text}");
        assert_eq!(accepts(&m, text), valid, "{text}");
    }
}
