//! JSON schema -> regex: documents that validate match, documents that do not are refused,
//! unsupported keywords are named.

use serde_json::json;
use sglr_fsm::FsmError;
use sglr_schema::{json_value_to_regex, JsonSchemaOptions};

fn matcher(schema: serde_json::Value, options: &JsonSchemaOptions) -> regex::Regex {
    let regex = json_value_to_regex(&schema, options).unwrap();
    regex::Regex::new(&format!("^(?:{regex})$")).unwrap()
}

/// The default options with room for free values unrolled 3 levels (tens of KB of regex, past
/// the default `max_regex_len`, which routes such schemas to the grammar path).
fn roomy() -> JsonSchemaOptions {
    JsonSchemaOptions { max_regex_len: 4 << 20, ..JsonSchemaOptions::default() }
}

fn check(schema: serde_json::Value, valid: &[&str], invalid: &[&str]) {
    let re = matcher(schema.clone(), &roomy());
    for doc in valid {
        assert!(re.is_match(doc), "{schema} should accept {doc}");
    }
    for doc in invalid {
        assert!(!re.is_match(doc), "{schema} should refuse {doc}");
    }
}

#[test]
fn objects_required_optional_and_order() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["b"]
    });
    check(
        schema,
        &[
            r#"{"b": "x"}"#,
            r#"{"a": 1, "b": "x"}"#,
            r#"{"a":1,"b":"x","c":true}"#,
            r#"{"b": "x", "c": false}"#,
        ],
        &[r#"{}"#, r#"{"a": 1}"#, r#"{"b": "x", "d": 1}"#, r#"{"b": "x",}"#, r#"{"a": "1", "b": "x"}"#],
    );
}

#[test]
fn many_optional_properties_use_the_linear_form() {
    let props: serde_json::Map<String, serde_json::Value> =
        (0..12).map(|i| (format!("p{i}"), json!({"type": "integer"}))).collect();
    let schema = json!({"type": "object", "properties": props});
    check(
        schema,
        &[r#"{}"#, r#"{"p0": 1}"#, r#"{"p11": 1}"#, r#"{"p1": 1, "p5": 2, "p11": 3}"#],
        &[r#"{"p5": 1, "p1": 2}"#, r#"{"p1": 1 "p2": 2}"#, r#"{, "p1": 1}"#, r#"{"p1": 1,}"#],
    );
}

#[test]
fn additional_properties_false_true_and_schema() {
    let closed =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false});
    check(closed, &[r#"{"a": 1}"#, "{}"], &[r#"{"a": 1, "b": 2}"#]);
    let open =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true});
    check(
        open,
        &[r#"{"a": 1, "b": [1, {"c": null}]}"#, r#"{"zz": "x"}"#],
        // An extra property may not repeat a declared name.
        &[r#"{"a": 1, "a": "x"}"#, r#"{"a": "x"}"#],
    );
    // A required name neither declared nor allowed as an extra: nothing validates.
    let impossible = json!({"type": "object", "required": ["x"], "additionalProperties": false});
    let regex = json_value_to_regex(&impossible, &JsonSchemaOptions::default()).unwrap();
    let re = regex::Regex::new(&format!("^(?:{regex})$")).unwrap();
    for doc in [r#"{"x": 1}"#, "{}", r#"{"x": null}"#] {
        assert!(!re.is_match(doc), "{regex} accepts {doc}");
    }
    // Without additionalProperties spelled out, the required name takes any value.
    check(json!({"type": "object", "required": ["x"]}), &[r#"{"x": 1}"#, r#"{"x": [true]}"#], &["{}"]);
    let map = json!({"type": "object", "additionalProperties": {"type": "number"}});
    check(map, &[r#"{"x": 1.5, "y": -2}"#, "{}"], &[r#"{"x": "1"}"#]);
}

#[test]
fn strings_lengths_patterns_formats_and_escapes() {
    check(
        json!({"type": "string", "minLength": 2, "maxLength": 3}),
        &[r#""ab""#, r#""a\"c""#, r#""\u00e9\u00e9""#],
        &[r#""a""#, r#""abcd""#],
    );
    check(
        json!({"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"}),
        &[r#""AB12""#],
        &[r#""Ab12""#, r#""AB""#, r#""xAB1""#],
    );
    check(json!({"type": "string", "pattern": "[0-9]"}), &[r#""ab1cd""#, r#""9""#], &[r#""abc""#]);
    check(
        json!({"type": "string", "format": "date"}),
        &[r#""2024-02-29""#, r#""1999-12-31""#],
        &[r#""2024-13-01""#, r#""2024-04-31""#, r#""24-01-01""#],
    );
    check(
        json!({"type": "string", "format": "date-time"}),
        &[r#""2024-01-02T03:04:05Z""#, r#""2024-01-02T03:04:05.123+02:00""#],
        &[r#""2024-01-02 03:04:05""#],
    );
    check(
        json!({"type": "string", "format": "uuid"}),
        &[r#""123e4567-e89b-12d3-a456-426614174000""#],
        &[r#""123e4567e89b12d3a456426614174000""#],
    );
    check(
        json!({"type": "string", "format": "email"}),
        &[r#""john.smith+tag@mail.example.co.uk""#],
        &[r#""john@""#, r#""@x.org""#],
    );
    check(json!({"type": "string", "format": "ipv4"}), &[r#""192.168.0.255""#], &[r#""256.1.1.1""#]);
    check(
        json!({"type": "string"}),
        &[r#""tab\tquote\"nl\n\u00e9""#, r#""""#],
        &["\"raw\ttab\"", r#""bad \x""#],
    );
}

#[test]
fn numbers_with_bounds() {
    check(
        json!({"type": "integer", "minimum": -5, "exclusiveMaximum": 100}),
        &["-5", "0", "99"],
        &["-6", "100", "1.5", "01"],
    );
    check(json!({"type": "integer", "minimum": 1.5, "maximum": 3.5}), &["2", "3"], &["1", "4"]);
    // Fractional bounds on numbers hold exactly, digit by digit.
    check(
        json!({"type": "number", "minimum": 0.5, "exclusiveMaximum": 2.25}),
        &["0.5", "0.50", "1", "2.2", "2.249", "2.24999"],
        &["0.49", "0.4999", "2.25", "2.250", "3", "-1", "0"],
    );
    check(
        json!({"type": "number", "maximum": -0.125}),
        &["-0.125", "-0.13", "-1", "-2.5"],
        &["-0.12", "0", "-0.1"],
    );
    check(
        json!({"type": "number", "exclusiveMinimum": 0, "maximum": 1}),
        &["0.5", "1", "1.000"],
        &["0", "-0.5", "1.01", "2"],
    );
    check(json!({"type": "number"}), &["-1.5e+10", "0", "3.25"], &["+1", ".5", "1."]);
    // Draft-4 boolean exclusivity.
    check(json!({"type": "integer", "minimum": 0, "exclusiveMinimum": true}), &["1"], &["0"]);
}

#[test]
fn arrays_enums_consts_and_unions() {
    check(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
        &["[1]", "[1, 2, 3]"],
        &["[]", "[1, 2, 3, 4]", r#"["a"]"#],
    );
    check(
        json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
        &["[]", r#"["a"]"#, r#"["a", 1]"#],
        &[r#"["a", 1, 2]"#, "[1]"],
    );
    check(
        json!({"enum": ["red", 2, null, {"a": [1]}]}),
        &[r#""red""#, "2", "2.0", "null", r#"{"a": [1]}"#],
        &[r#""blue""#, "3"],
    );
    check(json!({"const": "caf\u{e9}"}), &["\"caf\u{e9}\"", r#""caf\u00e9""#], &[r#""cafe""#]);
    check(
        json!({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}),
        &["1", r#""x""#],
        &[r#""xy""#, "true"],
    );
    check(json!({"type": ["string", "null"]}), &["null", r#""a""#], &["1"]);
    check(
        json!({"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
            {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]}
        ]}),
        &[r#"{"kind": "a", "x": 1}"#, r#"{"kind": "b"}"#],
        &[r#"{"kind": "c"}"#],
    );
}

#[test]
fn refs_all_of_and_recursion() {
    check(
        json!({"definitions": {"p": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
               "type": "array", "items": {"$ref": "#/definitions/p"}}),
        &[r#"[{"x": 1}, {"x": 2}]"#],
        &[r#"[{"y": 1}]"#],
    );
    check(
        json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}}, "required": ["b"]}
        ]}),
        &[r#"{"a": 1, "b": "x"}"#],
        &[r#"{"a": 1}"#, r#"{"b": "x"}"#],
    );
    // A recursive tree unrolls a few levels; deeper nesting is cut, never wrongly admitted.
    let tree = json!({"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}}, "required": ["v"]});
    check(
        tree,
        &[r#"{"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]}"#],
        &[r#"{"v": 1, "kids": [{"w": 2}]}"#],
    );
}

/// A property declared again by a later `allOf` part keeps the place where it was first
/// declared (members are emitted in that order), with both parts' schemas.
#[test]
fn all_of_merged_properties_keep_their_first_position() {
    let schema = json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}},
         "required": ["a", "b"]},
        {"properties": {"a": {"maxLength": 2}}}
    ]});
    check(
        schema,
        &[r#"{"a": "xy", "b": 1}"#, r#"{"a": "x", "b": 1, "c": true}"#],
        &[r#"{"a": "xyz", "b": 1}"#, r#"{"b": 1, "a": "x"}"#, r#"{"a": "x"}"#],
    );
}

#[test]
fn whitespace_pattern_is_configurable() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let compact = JsonSchemaOptions { whitespace_pattern: String::new(), ..JsonSchemaOptions::default() };
    let re = matcher(schema.clone(), &compact);
    assert!(re.is_match(r#"{"a":1}"#) && !re.is_match(r#"{"a": 1}"#));
    let flexible =
        JsonSchemaOptions { whitespace_pattern: r"[ \t\n\r]*".into(), ..JsonSchemaOptions::default() };
    let re = matcher(schema, &flexible);
    assert!(re.is_match("{\n  \"a\" :\t1\n}"));
    let bad = JsonSchemaOptions { whitespace_pattern: "(".into(), ..JsonSchemaOptions::default() };
    assert!(matches!(json_value_to_regex(&json!({}), &bad), Err(FsmError::InvalidRegex(_))));
}

#[test]
fn unsupported_keywords_are_named() {
    let cases = [
        (json!({"not": {"type": "string"}}), "not"),
        (json!({"if": {}, "then": {}}), "if"),
        (json!({"type": "array", "uniqueItems": true}), "uniqueItems"),
        (json!({"type": "object", "patternProperties": {"^x": {}}}), "patternProperties"),
        (json!({"type": "integer", "multipleOf": 3}), "multipleOf"),
        (json!({"type": "number", "minimum": 1e40}), "minimum"),
        (json!({"type": "string", "format": "email", "pattern": "x"}), "pattern"),
        (json!({"type": "string", "pattern": "(?=x)"}), "pattern"),
        (json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}), "oneOf"),
        (json!({"$ref": "https://example.com/schema.json"}), "$ref"),
        (json!({"type": "object", "minProperties": 2}), "minProperties"),
    ];
    for (schema, keyword) in cases {
        match json_value_to_regex(&schema, &JsonSchemaOptions::default()) {
            Err(FsmError::UnsupportedSchema { keyword: got, .. }) => {
                assert_eq!(got, keyword, "{schema}")
            }
            other => panic!("{schema}: expected unsupported '{keyword}', got {other:?}"),
        }
    }
    let invalid =
        [json!({"type": "strin"}), json!({"required": "a"}), json!({"$ref": "#/nowhere"}), json!(3)];
    for schema in invalid {
        assert!(
            matches!(
                json_value_to_regex(&schema, &JsonSchemaOptions::default()),
                Err(FsmError::InvalidSchema { .. })
            ),
            "{schema}"
        );
    }
}

#[test]
fn extra_keys_may_hold_escapes_but_never_spell_a_declared_name() {
    let schema = json!({
        "type": "object",
        "properties": {"error": {"type": "string"}, "café": {"type": "integer"}},
        "additionalProperties": {"type": "null"}
    });
    check(
        schema,
        &[
            // A key holding a quote or a backslash (as `json.dumps` writes them).
            r#"{"error\": x": null}"#,
            r#"{"Vendor\\Namespace\\": null}"#,
            r#"{"error": "e", "limited\u201d: {\u201cshares": null}"#,
            r#"{"caf\u00e8": null}"#,
            r#"{"\ud83d\ude00": null}"#,
            r#"{"e\nrror": null}"#,
        ],
        &[
            // A declared name in another spelling is not an extra key (its value is no null).
            r#"{"\u0065rror": null}"#,
            r#"{"err\u006Fr": null}"#,
            r#"{"caf\u00e9": null}"#,
            r#"{"caf\u00E9": null}"#,
            r#"{"café": null}"#,
            r#"{"e\u0072ror": null}"#,
        ],
    );
}

#[test]
fn declared_names_with_quotes_and_backslashes_are_excluded_from_extra_keys() {
    let schema = json!({
        "type": "object",
        "properties": {"a\"b": {"type": "integer"}, "c\\d/e": {"type": "integer"}},
        "additionalProperties": {"type": "null"}
    });
    check(
        schema,
        &[r#"{"a\"b": 1}"#, r#"{"c\\d/e": 1}"#, r#"{"a\"c": null}"#, r#"{"c\\d": null}"#],
        &[r#"{"a\"b": null}"#, r#"{"a\u0022b": null}"#, r#"{"c\u005cd\/e": null}"#, r#"{"c\\d/e": null}"#],
    );
}

#[test]
fn ref_siblings_are_ignored_in_drafts_before_2019() {
    let definitions = json!({"point": {"required": ["x"], "properties": {"x": {"type": "integer"}}}});
    for (draft, siblings_apply) in [
        ("http://json-schema.org/draft-04/schema#", false),
        ("http://json-schema.org/draft-07/schema#", false),
        ("https://json-schema.org/draft/2020-12/schema", true),
    ] {
        let schema = json!({
            "$schema": draft,
            "definitions": definitions,
            "type": "object",
            "properties": {"p": {"type": "string", "$ref": "#/definitions/point"}},
            "required": ["p"],
            "additionalProperties": false
        });
        if siblings_apply {
            // Both apply: a string (`required` says nothing about strings).
            check(schema, &[r#"{"p": "s"}"#], &[r#"{"p": {"x": 1}}"#]);
        } else {
            check(schema, &[r#"{"p": {"x": 1}}"#], &[r#"{"p": {"y": 1}}"#]);
        }
    }
}

#[test]
fn ref_siblings_in_an_all_of_part_are_ignored_in_draft_07() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"enabled": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}},
        "allOf": [{"$ref": "#/definitions/enabled", "properties": {"config": {"type": "integer"}}}]
    });
    let options = JsonSchemaOptions { additional_properties_default: true, ..roomy() };
    let re = matcher(schema, &options);
    assert!(re.is_match(r#"{"enabled": true, "config": {"threshold": 4}}"#));
    assert!(!re.is_match(r#"{"enabled": 1}"#));
}

#[test]
fn free_values_at_any_depth_are_refused_by_name() {
    let exact = JsonSchemaOptions { max_any_depth: None, ..JsonSchemaOptions::default() };
    for (schema, keyword) in [
        (json!({"type": "object", "properties": {"a": true}}), "true"),
        (json!({"type": "object", "properties": {"a": {}}}), "items"),
        (json!({"type": "object", "additionalProperties": true}), "additionalProperties"),
        (json!({"type": "array"}), "items"),
    ] {
        match json_value_to_regex(&schema, &exact) {
            Err(FsmError::UnsupportedSchema { keyword: named, .. }) => assert_eq!(named, keyword, "{schema}"),
            other => panic!("{schema}: {other:?}"),
        }
        assert!(json_value_to_regex(&schema, &roomy()).is_ok());
        // Unrolled, a free value is tens of KB of regex (60 to 130 ms to determinize): past the
        // default bound, a typed error that sends the schema to the grammar path.
        assert!(matches!(
            json_value_to_regex(&schema, &JsonSchemaOptions::default()),
            Err(FsmError::AutomatonTooLarge { .. })
        ));
    }
    // Nothing left free: the same regex either way.
    let closed =
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
    assert_eq!(
        json_value_to_regex(&closed, &exact).unwrap(),
        json_value_to_regex(&closed, &JsonSchemaOptions::default()).unwrap()
    );
}

/// Length bounds past `max_unrolled_length` are refused by name (the grammar path counts them
/// without unrolling); at or below it, or with no limit, they are spelled out exactly.
#[test]
fn large_length_bounds_are_refused_by_name() {
    let limit = JsonSchemaOptions::default().max_unrolled_length.unwrap();
    let refused =
        |schema: serde_json::Value| match json_value_to_regex(&schema, &JsonSchemaOptions::default()) {
            Err(FsmError::UnsupportedSchema { keyword, .. }) => Some(keyword),
            _ => None,
        };
    assert_eq!(refused(json!({"type": "string", "maxLength": limit + 1})).as_deref(), Some("maxLength"));
    assert_eq!(refused(json!({"type": "string", "minLength": limit + 1})).as_deref(), Some("minLength"));
    let nested = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 10_000}}});
    assert_eq!(refused(nested).as_deref(), Some("maxLength"));
    assert_eq!(refused(json!({"type": "string", "maxLength": limit})), None);
    // A bound a pattern already implies counts nothing.
    assert_eq!(refused(json!({"type": "string", "pattern": "^[a-z]{2}$", "maxLength": 10_000})), None);
    let unlimited = JsonSchemaOptions { max_unrolled_length: None, ..JsonSchemaOptions::default() };
    let re = matcher(json!({"type": "string", "minLength": 70, "maxLength": 71}), &unlimited);
    assert!(re.is_match(&format!("\"{}\"", "x".repeat(70))));
    assert!(!re.is_match(&format!("\"{}\"", "x".repeat(72))));
}

/// Keywords of one type without `type`: by default they imply it; with `implied_types` off
/// (the specification's reading) they constrain only values of that type.
#[test]
fn typeless_keywords_imply_their_type_unless_read_as_the_specification() {
    let schema = json!({
        "type": "object",
        "properties": {
            "widget": {"properties": {"size": {"type": "integer"}}, "required": ["size"]},
            "name": {"minLength": 2},
            "level": {"minimum": 3},
            "mode": {"enum": ["a", 1]}
        }
    });
    let implied = matcher(schema.clone(), &roomy());
    let spec = matcher(schema, &JsonSchemaOptions { implied_types: false, ..roomy() });
    for doc in [r#"{"widget": {"size": 1}}"#, r#"{"name": "ab"}"#, r#"{"level": 4}"#, r#"{"mode": 1}"#] {
        assert!(implied.is_match(doc) && spec.is_match(doc), "{doc}");
    }
    // Other types: free in the specification's reading, refused by the implied one.
    for doc in [r#"{"widget": "string"}"#, r#"{"name": 7}"#, r#"{"level": "low"}"#, r#"{"widget": [1, {}]}"#]
    {
        assert!(spec.is_match(doc), "spec should accept {doc}");
        assert!(!implied.is_match(doc), "implied should refuse {doc}");
    }
    // The keywords still hold for their own type, and `enum` still restricts the types.
    for doc in [
        r#"{"widget": {}}"#,
        r#"{"widget": {"size": "1"}}"#,
        r#"{"name": "a"}"#,
        r#"{"level": 2}"#,
        r#"{"mode": true}"#,
    ] {
        assert!(!spec.is_match(doc), "spec should refuse {doc}");
    }
}

/// Read as the specification does, `oneOf` branches with object keywords and no `type` both
/// admit every string, number, array...: those values match two branches, so none is valid,
/// and the objects are told apart by their discriminator.
#[test]
fn one_of_takes_out_types_two_branches_leave_free() {
    let schema = json!({"oneOf": [
        {"properties": {"kind": {"const": "a"}, "n": {"type": "integer"}}, "required": ["kind"]},
        {"properties": {"kind": {"const": "b"}}, "required": ["kind"]}
    ]});
    let spec = JsonSchemaOptions { implied_types: false, additional_properties_default: true, ..roomy() };
    let re = matcher(schema, &spec);
    for doc in [r#"{"kind": "a"}"#, r#"{"kind": "a", "n": 2}"#, r#"{"kind": "b", "x": [1]}"#] {
        assert!(re.is_match(doc), "should accept {doc}");
    }
    for doc in [
        r#""text""#,
        "3",
        "1.5",
        "null",
        "true",
        "[1]",
        "{}",
        r#"{"kind": "c"}"#,
        r#"{"kind": "a", "n": "2"}"#,
    ] {
        assert!(!re.is_match(doc), "should refuse {doc}");
    }
    // One free branch per type is fine; integers free in two branches but fractions in one
    // cannot be written as a `type`, so that stays refused.
    let one_free = json!({"oneOf": [{"type": "string"}, {"properties": {"a": {"type": "integer"}}}]});
    let re = matcher(one_free, &JsonSchemaOptions { implied_types: true, ..roomy() });
    assert!(re.is_match(r#""x""#) && re.is_match(r#"{"a": 1}"#) && !re.is_match("1"));
    let integers = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
    match json_value_to_regex(&integers, &roomy()) {
        Err(FsmError::UnsupportedSchema { keyword, .. }) => assert_eq!(keyword, "oneOf"),
        other => panic!("{other:?}"),
    }
}

/// `enum` / `const` values are written as literals only when they meet the keywords beside
/// them (and in other `allOf` parts); a keyword the check cannot decide refuses by name.
#[test]
fn enum_values_must_meet_their_sibling_keywords() {
    let cases = [
        (json!({"enum": ["abc", "a"], "maxLength": 2}), vec![r#""a""#], vec![r#""abc""#]),
        (json!({"enum": [1, 5, 6.5], "minimum": 3, "multipleOf": 0.5}), vec!["5", "6.5"], vec!["1"]),
        (
            json!({"enum": [[1, 2], [1], [2, 2]], "maxItems": 2, "uniqueItems": true}),
            vec!["[1,2]", "[1]"],
            vec!["[2,2]"],
        ),
        (
            json!({"enum": [{"a": 1}, {"b": 2}, {"a": "x"}], "required": ["a"], "properties": {"a": {"type": "integer"}}}),
            vec![r#"{"a":1}"#],
            vec![r#"{"b":2}"#, r#"{"a":"x"}"#],
        ),
        (json!({"enum": ["ab1", "abc"], "pattern": "\\d$"}), vec![r#""ab1""#], vec![r#""abc""#]),
        (
            json!({"allOf": [{"enum": ["x", "yy", "zzz"]}, {"minLength": 2}, {"not": {"const": "zzz"}}]}),
            vec![r#""yy""#],
            vec![r#""x""#, r#""zzz""#],
        ),
        (
            json!({"$defs": {"short": {"maxLength": 1}}, "enum": ["x", "yy"], "allOf": [{"$ref": "#/$defs/short"}]}),
            vec![r#""x""#],
            vec![r#""yy""#],
        ),
        (json!({"const": 2, "exclusiveMaximum": 2}), vec![], vec!["2"]),
    ];
    for (schema, valid, invalid) in cases {
        match json_value_to_regex(&schema, &roomy()) {
            Ok(regex) => {
                let re = regex::Regex::new(&format!("^(?:{regex})$")).unwrap();
                for doc in &valid {
                    assert!(re.is_match(doc), "{schema} should accept {doc}");
                }
                for doc in &invalid {
                    assert!(!re.is_match(doc), "{schema} should refuse {doc}");
                }
            }
            // Nothing left to admit: an empty language, never a document it should refuse.
            Err(FsmError::EmptyLanguage) => assert!(valid.is_empty(), "{schema}"),
            Err(error) => panic!("{schema}: {error}"),
        }
    }
    let unknowable = json!({"enum": [{"a": 1}], "unevaluatedProperties": false});
    match json_value_to_regex(&unknowable, &roomy()) {
        Err(FsmError::UnsupportedSchema { keyword, .. }) => assert_eq!(keyword, "unevaluatedProperties"),
        other => panic!("{other:?}"),
    }
}

/// `oneOf` object branches are disjoint when one requires a name the other forbids (closed,
/// and no pattern of it matches), or declares a required member with a disjoint schema.
#[test]
fn one_of_objects_told_apart_by_required_members() {
    let spec = JsonSchemaOptions { implied_types: false, additional_properties_default: true, ..roomy() };
    let closed = json!({"type": "object", "oneOf": [
        {"properties": {"x": {"type": "integer"}}, "required": ["x"], "additionalProperties": false},
        {"properties": {"y": {"type": "string"}}, "required": ["y"], "additionalProperties": false}
    ]});
    let re = matcher(closed, &spec);
    for doc in [r#"{"x": 1}"#, r#"{"y": "s"}"#] {
        assert!(re.is_match(doc), "should accept {doc}");
    }
    for doc in [r#"{"x": 1, "y": "s"}"#, "{}", r#"{"x": "1"}"#] {
        assert!(!re.is_match(doc), "should refuse {doc}");
    }
    let by_member_type = json!({"type": "object", "oneOf": [
        {"properties": {"v": {"type": "integer"}}, "required": ["v"]},
        {"properties": {"v": {"type": "string"}, "w": {"type": "boolean"}}, "required": ["v"]}
    ]});
    let re = matcher(by_member_type, &spec);
    for doc in [r#"{"v": 1}"#, r#"{"v": "a", "w": true}"#, r#"{"v": 2, "w": "any"}"#] {
        assert!(re.is_match(doc), "should accept {doc}");
    }
    assert!(!re.is_match(r#"{"v": null}"#));
    // Open branches (undeclared members allowed) with different required names overlap.
    let open = json!({"type": "object", "oneOf": [{"required": ["x"]}, {"required": ["y"]}]});
    match json_value_to_regex(&open, &spec) {
        Err(FsmError::UnsupportedSchema { keyword, .. }) => assert_eq!(keyword, "oneOf"),
        other => panic!("{other:?}"),
    }
    // A pattern of the closed branch that matches the other's required name: no proof.
    let pattern = json!({"type": "object", "oneOf": [
        {"properties": {"x1": {}}, "required": ["x1"], "additionalProperties": false},
        {"patternProperties": {"^x": {}}, "additionalProperties": false}
    ]});
    match json_value_to_regex(&pattern, &JsonSchemaOptions { max_any_depth: Some(2), ..spec.clone() }) {
        Err(FsmError::UnsupportedSchema { keyword, .. }) => assert_eq!(keyword, "oneOf"),
        other => panic!("{other:?}"),
    }
}
