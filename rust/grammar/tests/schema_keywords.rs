//! JSON schema keywords beyond the regex path through the grammar path (tuples, free values,
//! extra keys, drafts, `oneOf`, negations, conditions ...): known documents decided by hand.

mod common;

use common::{accepts, keyword_matcher, matcher, open_matcher};
use sglr_fsm::{CompileLimits, FsmError};
use sglr_grammar::{json_schema_to_grammar, GrammarError, GrammarMatcher, ParserLimits};
use sglr_schema::JsonSchemaOptions;

/// Known documents per keyword, each decided by hand from the keyword's definition.
#[test]
fn keywords_beyond_the_regex_path() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            // Free-form objects and arrays at any depth (the regex path unrolls 3 levels).
            r#"{"type": "object", "properties": {"a": {"type": ["object", "null"]}, "b": {"type": "array"}}}"#,
            &[
                r#"{"a": {"x": {"y": {"z": {"w": [[[[{}]]]]}}}}}"#,
                r#"{"b": [[[[[[1]]]]], {"k": {"k": {"k": {}}}}]}"#,
            ],
            &[r#"{"a": 1}"#, r#"{"b": {}}"#, r#"{"a": {"x": [}}"#],
        ),
        (
            r#"{"type": "object", "patternProperties": {"^x_": {"type": "integer"}}, "additionalProperties": false}"#,
            &[r#"{}"#, r#"{"x_a": 1}"#, r#"{"x_a": 1, "x_b": -2}"#],
            &[r#"{"y": 1}"#, r#"{"x_a": "s"}"#, r#"{"x_": 1.5}"#],
        ),
        (
            // A declared name matching a pattern meets both schemas; others meet the rest.
            r#"{"type": "object", "properties": {"x_id": {"minimum": 0}},
                "patternProperties": {"^x_": {"type": "integer"}, "id$": {"maximum": 9}},
                "additionalProperties": {"type": "string"}}"#,
            &[r#"{"x_id": 3}"#, r#"{"x_id": 3, "x_b": 100, "bid": 2.5, "z": "s"}"#, r#"{"x_id": 9}"#],
            &[
                r#"{"x_id": -1}"#,
                r#"{"x_id": 10}"#,
                r#"{"x_id": 1.5}"#,
                r#"{"x_bid": 10}"#,
                r#"{"z": 1}"#,
                r#"{"x_a": "s"}"#,
            ],
        ),
        (
            // A non-ASCII declared name meets the pattern it matches, in either spelling.
            r#"{"type": "object", "properties": {"é": {"type": "integer"}}, "patternProperties": {"^é$": {"minimum": 5}}}"#,
            &[r#"{"é": 5}"#, r#"{"\u00e9": 7}"#],
            &[r#"{"é": 3}"#, r#"{"\u00e9": 3}"#],
        ),
        (
            r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2, "maxProperties": 3}"#,
            &[r#"{"a": 1, "b": 2}"#, r#"{"a": 1, "b": 2, "c": 3}"#, r#"{"a": 1, "b": 2, "b": 3}"#],
            // Two extras may repeat a key (a parsed object keeps one): not two members.
            &[
                r#"{}"#,
                r#"{"a": 1}"#,
                r#"{"b": 1}"#,
                r#"{"a": 1, "b": 2, "c": 3, "d": 4}"#,
                r#"{"b": 1, "b": 2}"#,
            ],
        ),
        (
            r#"{"type": "object", "propertyNames": {"maxLength": 2, "pattern": "^[a-z]+$"}, "properties": {"long": {}}}"#,
            &[r#"{}"#, r#"{"ab": 1}"#, r#"{"a": {"x": [1, {"deep": [[[[1]]]]}]}}"#],
            &[r#"{"long": 1}"#, r#"{"abc": 1}"#, r#"{"A": 1}"#],
        ),
        (
            r#"{"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 3}"#,
            &[r#""ab""#, r#""abc""#],
            &[r#""a""#, r#""abcd""#, r#""aB""#],
        ),
        (
            r#"{"type": "integer", "multipleOf": 7}"#,
            &["0", "7", "-14", "700", "98"],
            &["1", "-0", "07", "15", "7.0"],
        ),
        (
            // On a number, an integral divisor admits a fraction of zeros (and "-0", which is 0).
            r#"{"type": "number", "multipleOf": 5, "minimum": -10, "exclusiveMaximum": 20}"#,
            &["0", "-10", "15", "5", "10.0", "-5.00", "-0"],
            &["-15", "20", "25", "3", "10.5", "20.0", "1e1"],
        ),
        (
            // A fractional divisor: fractions up to its scale, bounds fractional too.
            r#"{"type": "number", "multipleOf": 0.25, "minimum": -0.5, "exclusiveMaximum": 2.5}"#,
            &["0", "-0.5", "0.25", "1.5", "2.25", "2.250", "1", "-0.25"],
            &["0.1", "2.5", "-0.75", "0.125", "1e0", "3"],
        ),
        (
            r#"{"type": "number", "multipleOf": 0.01}"#,
            &["19.99", "0.5", "-3", "12.340"],
            &["0.001", "1.005", "1e-2"],
        ),
        (
            // On integers a fractional divisor d / 10^k means multiples of d / gcd(d, 10^k).
            r#"{"type": "integer", "multipleOf": 2.5}"#,
            &["0", "5", "-10", "25"],
            &["2", "2.5", "7"],
        ),
        (
            r#"{"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "required": ["a"],
                           "additionalProperties": false},
                          {"properties": {"a": {"minimum": 5}, "b": {"type": "string"}}}]}"#,
            &[r#"{"a": 5}"#, r#"{"a": 6, "b": "x"}"#],
            &[r#"{"a": 4}"#, r#"{"b": "x"}"#, r#"{"a": 5, "c": 1}"#],
        ),
        (
            // Exactly one of the names present (the others absent).
            r#"{"type": "object", "properties": {"n": {}, "ssn": {"type": "string"}, "ein": {"type": "string"}},
                "required": ["n"], "oneOf": [{"required": ["ssn"]}, {"required": ["ein"]}]}"#,
            &[r#"{"n": 1, "ssn": "a"}"#, r#"{"n": 1, "ein": "b", "z": 2}"#],
            &[r#"{"n": 1}"#, r#"{"n": 1, "ssn": "a", "ein": "b"}"#, r#"{"ssn": "a"}"#, r#""a""#],
        ),
        (
            r#"{"enum": [{"a": [1, 2]}, [null], "x", 1.5]}"#,
            &[r#"{"a": [1, 2]}"#, r#"[null]"#, r#""x""#, "1.5"],
            &[r#"{"a": [1]}"#, r#"[]"#, r#""y""#, "1"],
        ),
    ];
    for (schema, good, bad) in cases {
        let m = keyword_matcher(schema, true);
        for text in *good {
            assert!(accepts(&m, text), "{schema} should accept {text}");
        }
        for text in *bad {
            assert!(!accepts(&m, text), "{schema} should reject {text}");
        }
    }
}

/// A required name that only additionalProperties could admit, when it admits nothing.
#[test]
fn required_names_without_schema_obey_additional_properties() {
    let schema = r#"{"type": "object", "required": ["x"], "additionalProperties": false, "patternProperties": {"^y": {}}}"#;
    let options = JsonSchemaOptions { additional_properties_default: true, ..JsonSchemaOptions::default() };
    assert!(matches!(json_schema_to_grammar(schema, &options), Err(GrammarError::EmptyLanguage)));
}

/// Tuples through the rules: `prefixItems` with `items` for the rest, draft-4 `items: [...]`
/// with `additionalItems`, and `additionalItems` beside a single `items` schema (meaningless
/// there), against `minItems` / `maxItems`; each document decided by hand.
#[test]
fn tuples() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            r#"{"type": "array", "items": [{"type": "integer"}, {"type": "string"}], "additionalItems": false}"#,
            &["[]", "[1]", r#"[1, "x"]"#],
            &[r#"["x"]"#, r#"[1, 2]"#, r#"[1, "x", 3]"#],
        ),
        (
            r#"{"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "boolean"},
                "minItems": 2}"#,
            &["[1, true]", "[1, true, false]"],
            &["[]", "[1]", "[1, 2]", "[true, true]"],
        ),
        (
            r#"{"type": "array", "prefixItems": [{"const": "a"}, {"const": "b"}], "items": {"type": "null"},
                "maxItems": 3}"#,
            &["[]", r#"["a"]"#, r#"["a", "b"]"#, r#"["a", "b", null]"#],
            &[r#"["b"]"#, r#"["a", "b", null, null]"#, r#"["a", null]"#, r#"["a", "b", 1]"#],
        ),
        (
            r#"{"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "maxItems": 1}"#,
            &["[]", "[1]"],
            &["[1, 2]"],
        ),
        (
            // The rest is free when `items` is absent.
            r#"{"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 1}"#,
            &["[1]", r#"[1, "x", {"a": [null]}]"#],
            &["[]", r#"["x"]"#],
        ),
        (
            r#"{"type": "array", "items": [{"type": "integer"}, false], "additionalItems": {"type": "integer"}}"#,
            &["[]", "[1]"],
            &["[1, 2]", "[1, 2, 3]"],
        ),
        (
            // additionalItems beside a single schema: ignored.
            r#"{"type": "array", "items": {"type": "integer"}, "additionalItems": false}"#,
            &["[]", "[1, 2, 3]"],
            &[r#"["x"]"#],
        ),
    ];
    for (schema, valid, invalid) in cases {
        // As written (one regex lexeme), and with an unused reference beside it (the array's
        // rules; its items stay regexes).
        let with_rules = schema.replacen('{', r##"{"$defs": {"unused": {"$ref": "#"}}, "##, 1);
        for schema in [schema.to_string(), with_rules] {
            let m = keyword_matcher(&schema, false);
            for text in *valid {
                assert!(accepts(&m, text), "{schema} should accept {text}");
            }
            for text in *invalid {
                assert!(!accepts(&m, text), "{schema} should reject {text}");
            }
        }
    }
    // More items than the tuple and its rest admit: no document at all.
    let none =
        r#"{"type": "array", "items": [{"type": "integer"}], "additionalItems": false, "minItems": 2}"#;
    let options = JsonSchemaOptions { additional_properties_default: false, ..JsonSchemaOptions::default() };
    assert!(json_schema_to_grammar(none, &options).is_err());
    // A tuple inside a container is taken apart into rules: no lexeme spells a whole member.
    let long = r#"{"type": "object", "properties": {"free": {"type": "object"},
        "pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string", "maxLength": 100}],
                 "additionalItems": false}}}"#;
    let m = keyword_matcher(long, true);
    assert!(accepts(&m, &format!(r#"{{"pair": [1, "{}"]}}"#, "x".repeat(100))));
    assert!(!accepts(&m, &format!(r#"{{"pair": [1, "{}"]}}"#, "x".repeat(101))));
}

#[test]
fn free_values_nest_to_any_depth_next_to_declared_members() {
    // Not recursive, and regular up to a depth: the regex path would unroll the free members.
    let m =
        open_matcher(r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}"#);
    let mut deep = String::from("1");
    for _ in 0..8 {
        deep = format!(r#"[{{"k": {deep}}}]"#);
    }
    assert!(accepts(&m, &format!(r#"{{"a": 1, "b": {deep}}}"#)));
    assert!(accepts(&m, r#"{"a": 1, "b": {"c": {"d": {"e": {"f": []}}}}}"#));
    for bad in [r#"{"a": "x", "b": 1}"#, r#"{"b": 1}"#, r#"{"a": 1, "b": [[[[}"#] {
        assert!(!accepts(&m, bad), "{bad}");
    }
    // A free item schema inside a tuple (rules refuse tuples): the bounded regex still holds.
    let m = open_matcher(r#"{"type": "array", "items": [{"type": "integer"}, {}], "maxItems": 2}"#);
    assert!(accepts(&m, r#"[1, {"x": [1]}]"#));
    assert!(!accepts(&m, r#"["x", 1]"#));
}

#[test]
fn extra_keys_with_escapes() {
    let m = open_matcher(
        r#"{"type": "object", "properties": {"psr-0": {"type": "object",
            "additionalProperties": {"type": "string"}}, "name": {"type": "integer"}}}"#,
    );
    assert!(accepts(&m, r#"{"psr-0": {"Vendor\\Namespace\\": "src/"}}"#));
    assert!(accepts(&m, r#"{"name": 1, "limited\u201d: {\u201cx": null}"#));
    // `name` in another spelling is the declared property: an integer.
    assert!(!accepts(&m, r#"{"n\u0061me": "x"}"#));
    assert!(!accepts(&m, r#"{"psr-0": {"Vendor\\": 1}}"#));
    assert!(!accepts(&m, r#"{"\u006Eame": "x"}"#));
    // Prefixes and extensions of a declared name are other keys.
    assert!(accepts(&m, r#"{"nam": "x", "names": [1], "psr-": null}"#));
    assert!(accepts(&m, r#"{"n\u0061m": "x"}"#));
}

#[test]
fn ref_siblings_are_ignored_in_draft_04() {
    let schema = r##"{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
        "definitions": {"enabled": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}},
        "properties": {"check": {"$ref": "#/definitions/enabled",
            "properties": {"config": {"type": "integer"}}, "type": "string"}},
        "additionalProperties": false}"##;
    let m = matcher(schema);
    assert!(accepts(&m, r#"{"check": {"enabled": true}}"#));
    assert!(!accepts(&m, r#"{"check": "s"}"#));
    assert!(!accepts(&m, r#"{"check": {"enabled": 1}}"#));
    let later = schema
        .replace("http://json-schema.org/draft-04/schema#", "https://json-schema.org/draft/2020-12/schema");
    assert!(json_schema_to_grammar(&later, &JsonSchemaOptions::default())
        .map(|g| {
            let m = GrammarMatcher::new(g, CompileLimits::default(), ParserLimits::default());
            !accepts(&m, r#"{"check": {"enabled": true}}"#)
        })
        .unwrap_or(true));
}

/// `oneOf` branches that only require one name each: branch i is rewritten as the object with
/// the other branches' names absent (`false` merged into their properties); the members after
/// them keep their place in schema order.
#[test]
fn exclusive_required_branches_keep_member_order() {
    let schema = r##"{"definitions": {"image": {"type": "object", "properties": {"w": {"type": "integer"}}}},
        "type": "object", "required": ["id"],
        "oneOf": [{"required": ["title"]}, {"required": ["img"]}],
        "properties": {"id": {"type": "integer"}, "title": {"type": "string"},
                       "img": {"$ref": "#/definitions/image"}, "ext": {"type": "object"}}}"##;
    let m = keyword_matcher(schema, true);
    for text in [r#"{"id": 1, "img": {"w": 2}, "ext": {}}"#, r#"{"id": 1, "title": "t", "ext": {}}"#] {
        assert!(accepts(&m, text), "should accept {text}");
    }
    for text in [r#"{"id": 1, "title": "t", "img": {}, "ext": {}}"#, r#"{"id": 1, "ext": {}}"#] {
        assert!(!accepts(&m, text), "should reject {text}");
    }
}

/// `implied_types` off: a typeless keyword constrains only its own type; on (the default) it
/// implies that type. Recursion through such a schema keeps either reading.
#[test]
fn typeless_keywords_follow_the_implied_types_option() {
    let schema = r##"{"$defs": {"node": {"properties": {"next": {"$ref": "#/$defs/node"},
        "size": {"minimum": 1}}, "required": ["size"]}}, "$ref": "#/$defs/node"}"##;
    let build = |implied_types| {
        let options = JsonSchemaOptions { implied_types, ..JsonSchemaOptions::default() };
        let grammar = json_schema_to_grammar(schema, &options).unwrap();
        GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
    };
    let (implied, spec) = (build(true), build(false));
    for text in [r#"{"size": 1}"#, r#"{"next": {"size": 5}, "size": 2}"#] {
        assert!(accepts(&implied, text) && accepts(&spec, text), "{text}");
    }
    for text in [r#""text""#, r#"{"next": [true], "size": 1}"#, r#"{"size": "big"}"#, "null"] {
        assert!(accepts(&spec, text), "spec should accept {text}");
        assert!(!accepts(&implied, text), "implied should refuse {text}");
    }
    for text in [r#"{"size": 0}"#, r#"{"next": {"size": 1}}"#, r#"{"next": {"size": 0}, "size": 1}"#] {
        assert!(!accepts(&spec, text), "spec should refuse {text}");
    }
}

/// The grammar path takes a `oneOf` apart the same way: types two branches leave free are
/// taken out of every branch (here through a recursive `$ref`).
#[test]
fn one_of_takes_out_types_two_branches_leave_free() {
    let schema = r##"{"$defs": {"node": {"oneOf": [
        {"properties": {"kind": {"const": "leaf"}}, "required": ["kind"]},
        {"properties": {"kind": {"const": "pair"}, "left": {"$ref": "#/$defs/node"}}, "required": ["kind", "left"]}
    ]}}, "$ref": "#/$defs/node"}"##;
    let options = JsonSchemaOptions { implied_types: false, ..JsonSchemaOptions::default() };
    let grammar = json_schema_to_grammar(schema, &options).unwrap();
    let m = GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default());
    for text in
        [r#"{"kind": "leaf"}"#, r#"{"kind": "pair", "left": {"kind": "pair", "left": {"kind": "leaf"}}}"#]
    {
        assert!(accepts(&m, text), "should accept {text}");
    }
    for text in [r#""leaf""#, "1", "null", r#"{"kind": "pair", "left": 3}"#, r#"{"kind": "other"}"#] {
        assert!(!accepts(&m, text), "should refuse {text}");
    }
}

/// On the grammar path too, `enum` values are written only when they meet the keywords beside
/// them (here a `$ref` resolved in the document, inside a recursive schema), and a `not` next
/// to an `enum` is decided value by value.
#[test]
fn enum_values_meet_their_sibling_keywords() {
    let schema = r##"{"$defs": {"short": {"maxLength": 2}, "node": {"type": "object", "properties": {
        "tag": {"enum": ["a", "bb", "ccc"], "allOf": [{"$ref": "#/$defs/short"}], "not": {"const": "a"}},
        "next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"}"##;
    let m = matcher(schema);
    for text in [r#"{"tag": "bb"}"#, r#"{"tag": "bb", "next": {"tag": "bb"}}"#] {
        assert!(accepts(&m, text), "should accept {text}");
    }
    for text in [r#"{"tag": "a"}"#, r#"{"tag": "ccc"}"#, r#"{"tag": "bb", "next": {"tag": "ccc"}}"#] {
        assert!(!accepts(&m, text), "should refuse {text}");
    }
}

/// `dependencies` / `dependentRequired`: each member either absent or present with what it
/// brings, spelled as alternatives of the object.
#[test]
fn dependencies_as_alternatives() {
    let names = matcher(
        r#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
            "c": {"type": "boolean"}}, "dependencies": {"a": ["b"]}, "dependentRequired": {"c": ["a"]}}"#,
    );
    for text in ["{}", r#"{"b": "x"}"#, r#"{"a": 1, "b": "x"}"#, r#"{"a": 1, "b": "x", "c": true}"#] {
        assert!(accepts(&names, text), "should accept {text}");
    }
    for text in [r#"{"a": 1}"#, r#"{"c": true}"#, r#"{"b": "x", "c": true}"#, r#"{"a": 1, "c": true}"#] {
        assert!(!accepts(&names, text), "should refuse {text}");
    }
    let schema_form = matcher(
        r#"{"type": "object", "properties": {"a": {}, "n": {"type": "integer"}},
            "dependencies": {"a": {"required": ["n"], "properties": {"n": {"minimum": 5}}}}}"#,
    );
    for text in [r#"{"n": 1}"#, r#"{"a": 1, "n": 7}"#, "{}"] {
        assert!(accepts(&schema_form, text), "should accept {text}");
    }
    for text in [r#"{"a": 1}"#, r#"{"a": 1, "n": 3}"#] {
        assert!(!accepts(&schema_form, text), "should refuse {text}");
    }
}

/// Two `anyOf` lists in one conjunction are multiplied out; two `not`s become one of either.
#[test]
fn conjunctions_of_alternatives_and_negations() {
    let both = matcher(
        r#"{"allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]},
            {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 2}]}]}"#,
    );
    for text in ["7", r#""ab""#] {
        assert!(accepts(&both, text), "should accept {text}");
    }
    for text in ["3", r#""abc""#, "true"] {
        assert!(!accepts(&both, text), "should refuse {text}");
    }
    let negations =
        matcher(r#"{"allOf": [{"enum": [1, 2, 3]}, {"not": {"const": 1}}, {"not": {"const": 2}}]}"#);
    assert!(accepts(&negations, "3"));
    assert!(!accepts(&negations, "1") && !accepts(&negations, "2"));
}

/// A pattern next to an enforced format: both shapes as one intersection lexeme (with a
/// length bound, a counted one), where no single regex spells them.
#[test]
fn pattern_next_to_a_format() {
    let dated = matcher(r#"{"type": "string", "pattern": "^2024-", "format": "date"}"#);
    assert!(accepts(&dated, r#""2024-01-05""#));
    for text in [r#""2023-01-05""#, r#""2024-13-01""#, r#""2024-""#] {
        assert!(!accepts(&dated, text), "should refuse {text}");
    }
    let bounded = matcher(r#"{"type": "string", "pattern": "^a", "format": "email", "maxLength": 6}"#);
    assert!(accepts(&bounded, r#""a@b.co""#));
    for text in [r#""a@bc.com""#, r#""b@b.co""#, r#""ab.cde""#] {
        assert!(!accepts(&bounded, text), "should refuse {text}");
    }
}

/// `not`, type by type: scalars less a regular language, objects lacking a required name,
/// types taken whole; double negation; what cannot be negated is refused by name.
#[test]
fn negations_type_by_type() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            r#"{"type": "string", "not": {"enum": ["intramural", "x"]}}"#,
            &[r#""abc""#, r#""xx""#],
            &[r#""intramural""#, r#""x""#],
        ),
        (
            r#"{"type": "object", "properties": {"a": {}, "b": {}}, "not": {"required": ["a", "b"]}}"#,
            &["{}", r#"{"a": 1}"#, r#"{"b": 2}"#],
            &[r#"{"a": 1, "b": 2}"#],
        ),
        (
            r#"{"type": "integer", "minimum": 0, "maximum": 20, "not": {"minimum": 5, "maximum": 10}}"#,
            &["3", "15", "0"],
            &["7", "5", "10", "21"],
        ),
        (
            r#"{"type": "object", "properties": {"a": {}}, "not": {"properties": {"a": {"type": "integer"}}}}"#,
            &[r#"{"a": "x"}"#, r#"{"a": 1.5}"#],
            &["{}", r#"{"a": 1}"#],
        ),
        (r#"{"not": {"type": "null"}}"#, &["1", r#""x""#, "[null, {}]"], &["null"]),
        (r#"{"type": "string", "not": {"not": {"maxLength": 2}}}"#, &[r#""ab""#], &[r#""abc""#]),
        (r#"{"type": ["integer", "string"], "not": {"type": "integer"}}"#, &[r#""1""#], &["1"]),
    ];
    for (schema, valid, invalid) in cases {
        let m = matcher(schema);
        for text in *valid {
            assert!(accepts(&m, text), "{schema} should accept {text}");
        }
        for text in *invalid {
            assert!(!accepts(&m, text), "{schema} should refuse {text}");
        }
    }
    let refused = r#"{"type": "object", "not": {"minProperties": 2}}"#;
    match json_schema_to_grammar(refused, &JsonSchemaOptions::default()) {
        Err(GrammarError::Schema(FsmError::UnsupportedSchema { keyword, .. })) => assert_eq!(keyword, "not"),
        other => panic!("{other:?}"),
    }
}

/// An object that could meet `minProperties` only with two undeclared members (whose keys a
/// grammar cannot keep distinct) is refused by name, not compiled to an empty language.
#[test]
fn min_properties_beyond_one_undeclared_member_is_refused() {
    let options = JsonSchemaOptions { additional_properties_default: true, ..JsonSchemaOptions::default() };
    let schema = r#"{"type": "object", "properties": {"a": {}}, "minProperties": 3}"#;
    match json_schema_to_grammar(schema, &options) {
        Err(GrammarError::Schema(FsmError::UnsupportedSchema { keyword, .. })) => {
            assert_eq!(keyword, "minProperties")
        }
        other => panic!("{other:?}"),
    }
    // Reachable with the declared members and one more: compiled.
    let reachable = r#"{"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 3}"#;
    let grammar = json_schema_to_grammar(reachable, &options).unwrap();
    let m = GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default());
    assert!(accepts(&m, r#"{"a": 1, "b": 2, "c": 3}"#));
    assert!(!accepts(&m, r#"{"a": 1, "b": 2}"#));
}

/// `if` / `then` / `else` as (if and then) or (not if, and else), also inside `allOf` parts,
/// where `then` and `else` travel with their `if`.
#[test]
fn conditions_as_alternatives() {
    let object = r#""type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
        "required": ["kind"]"#;
    let condition = r#""if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["n"]},
        "else": {"properties": {"n": false}}"#;
    for schema in
        [format!("{{{object}, {condition}}}"), format!(r#"{{"allOf": [{{{object}}}, {{{condition}}}]}}"#)]
    {
        let m = matcher(&schema);
        for text in [r#"{"kind": "a", "n": 1}"#, r#"{"kind": "b"}"#] {
            assert!(accepts(&m, text), "{schema} should accept {text}");
        }
        for text in [r#"{"kind": "a"}"#, r#"{"kind": "b", "n": 1}"#] {
            assert!(!accepts(&m, text), "{schema} should refuse {text}");
        }
    }
    // Draft 4 has no `if`: the condition is an unknown keyword, and so are its branches.
    let draft4 =
        format!(r#"{{"$schema": "http://json-schema.org/draft-04/schema#", {object}, {condition}}}"#);
    let m = matcher(&draft4);
    assert!(accepts(&m, r#"{"kind": "a"}"#) && accepts(&m, r#"{"kind": "b", "n": 1}"#));
}

/// `oneOf` branches that may overlap: each branch and none of the others, through `not`.
#[test]
fn overlapping_one_of_as_each_branch_and_none_of_the_others() {
    let options = JsonSchemaOptions { additional_properties_default: true, ..JsonSchemaOptions::default() };
    let build = |schema: &str| {
        let grammar = json_schema_to_grammar(schema, &options).unwrap_or_else(|e| panic!("{schema}: {e}"));
        GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
    };
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            r#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}"#,
            &[r#"{"a": 1}"#, r#"{"b": "x", "c": 0}"#],
            &[r#"{"a": 1, "b": "x"}"#, "{}", r#"{"c": 0}"#],
        ),
        (
            r#"{"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 5}, {"type": "number", "maximum": 0}]}"#,
            &["3", "6.5", "-0.5"],
            &["7", "-1", "2.5"],
        ),
    ];
    for (schema, valid, invalid) in cases {
        let m = build(schema);
        for text in *valid {
            assert!(accepts(&m, text), "{schema} should accept {text}");
        }
        for text in *invalid {
            assert!(!accepts(&m, text), "{schema} should refuse {text}");
        }
    }
}
