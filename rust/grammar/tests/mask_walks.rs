//! Token masks against advancing each token, at every byte of JSON documents, with a
//! vocabulary of tokens that end lexemes and go on (`a":`, `1,`, `" "`): the mask's shortcuts
//! (a key-name prefix state borrowing its donor's tokens and boundaries, a walk's closures kept
//! across depths, leaves decided without closing a set) must give exactly the advanced tokens.

use serde_json::json;
use sglr_fsm::CompileLimits;
use sglr_grammar::{json_schema_to_grammar, GrammarMatcher, Lexeme, ParserLimits};
use sglr_schema::JsonSchemaOptions;
use sglr_vocab::Vocabulary;

/// Every printable ASCII byte, pairs of common bytes, and tokens spanning lexeme ends.
fn vocabulary() -> Vocabulary {
    vocabulary_with(&[])
}

/// [`vocabulary`] and `extra` tokens.
fn vocabulary_with(extra: &[&str]) -> Vocabulary {
    let mut texts: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).collect();
    let common = ["a", "l", "p", "h", "b", "e", "t", "x", "1", "0", "\"", ":", ",", " ", "}", "{"];
    for first in common {
        for second in common {
            texts.push(format!("{first}{second}"));
        }
    }
    for text in [
        "alpha", "lpha\"", "pha\":", "alphabet", "bet\"", "\":", "\": ", "\":\"", "\",\"", "\"}", "a\":",
        "x\",", "1,", "10,", "0}", "1}", ", \"", "\", \"", "e\"", "hab", "ab\":", "\\\"", "\\u0061", "é",
        "é\"",
    ] {
        texts.push(text.to_string());
    }
    texts.extend(extra.iter().map(|text| text.to_string()));
    texts.sort();
    texts.dedup();
    let mut tokens: Vec<Option<Vec<u8>>> = texts.into_iter().map(|t| Some(t.into_bytes())).collect();
    let eos = tokens.len() as u32;
    tokens.push(None);
    Vocabulary::new(tokens, vec![eos]).unwrap()
}

fn matcher(schema: &serde_json::Value) -> GrammarMatcher {
    let options = JsonSchemaOptions { additional_properties_default: true, ..JsonSchemaOptions::default() };
    let grammar = json_schema_to_grammar(&schema.to_string(), &options).unwrap();
    GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
}

/// At every byte of `document`: the mask equals the tokens that advance.
fn check_document(matcher: &GrammarMatcher, vocabulary: &Vocabulary, document: &str) {
    let mut state = matcher.start().unwrap();
    for (position, &byte) in document.as_bytes().iter().enumerate() {
        let allowed = matcher.allowed_tokens(&state, vocabulary).unwrap();
        for token in 0..vocabulary.vocab_size() as u32 {
            let mut probe = state.clone();
            let advanced = matcher.advance_token(&mut probe, vocabulary, token).unwrap();
            assert_eq!(
                advanced,
                allowed.binary_search(&token).is_ok(),
                "token {:?} after {:?}",
                vocabulary.token_bytes(token).map(String::from_utf8_lossy),
                &document[..position]
            );
        }
        assert!(matcher.advance_bytes(&mut state, &[byte]).unwrap(), "{document} at {position}");
    }
    assert!(matcher.is_accepting(&state));
}

#[test]
fn object_with_free_keys_next_to_declared_ones() {
    // Undeclared keys beside declared names that prefix each other: key-name prefix states
    // delegate to the free key body.
    let schema = json!({"type": "object", "properties": {
        "alpha": {"type": "integer"}, "alphabet": {"type": "string"}, "beta": {"type": "boolean"}}});
    let m = matcher(&schema);
    let vocabulary = vocabulary();
    for document in [
        r#"{"alpha": 10, "alphabet": "a\"b", "beta": true}"#,
        r#"{"alph": 1, "alphabe": {"x": [1, "é"]}, "alphabets": null}"#,
        r#"{"beta":false,"x":"","ab":0}"#,
    ] {
        check_document(&m, &vocabulary, document);
    }
}

#[test]
fn free_key_states_inside_the_names_share_their_twins_groups() {
    // Many keys' closing quotes and colons inside tokens with more after them (`pha": `,
    // `x": 1`): the free key's states walk them as suffix groups, those inside the declared
    // names taking their twins' groups (`alpha": ` spells a whole name: dead there only).
    let extra = [
        "a\": ",
        "ab\": ",
        "pha\": ",
        "x\": ",
        "e\": ",
        "alpha\": ",
        "lpha\": ",
        "t\": 1",
        "b\": \"",
        "x\":{",
    ];
    let vocabulary = vocabulary_with(&extra);
    let schema = json!({"type": "object", "properties": {
        "alpha": {"type": "integer"}, "alphabet": {"type": "string"}, "tab": {"type": "boolean"}}});
    let m = matcher(&schema);
    for document in [
        r#"{"alpha": 1, "tab": true, "x": {"e": 0}}"#,
        r#"{"alphabet": "y", "alphab": "x", "ta": [1]}"#,
        r#"{"t": 1, "b": "", "alph": null}"#,
    ] {
        check_document(&m, &vocabulary, document);
    }
}

#[test]
fn recursive_values_and_numbers() {
    // Numbers end at every digit and values nest: walks below boundaries close sets.
    let schema = json!({"$defs": {"node": {"type": "object", "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["value"], "additionalProperties": false}},
        "$ref": "#/$defs/node"});
    let m = matcher(&schema);
    let vocabulary = vocabulary();
    for document in [
        r#"{"value": 10, "children": [{"value": 1}, {"value": 0, "children": []}]}"#,
        r#"{"value":101,"children":[{"value":1,"children":[{"value":0}]}]}"#,
    ] {
        check_document(&m, &vocabulary, document);
    }
}

#[test]
fn a_free_key_body_is_computed_once_for_every_schema() {
    // The body of an undeclared key accepts the same continuations whatever the declared
    // names: its mask is kept under its residual automaton, so a second schema reuses it.
    let vocabulary = vocabulary();
    let first = matcher(&json!({"type": "object", "properties": {"alpha": {"type": "integer"}}}));
    let second = matcher(&json!({"type": "object", "properties": {"gamma": {"type": "string"}}}));
    let inside_free_key = |m: &GrammarMatcher| {
        let mut state = m.start().unwrap();
        assert!(m.advance_bytes(&mut state, br#"{"zz"#).unwrap());
        m.allowed_tokens(&state, &vocabulary).unwrap()
    };
    let allowed_first = inside_free_key(&first);
    let num_shared = vocabulary.num_shared_results();
    let allowed_second = inside_free_key(&second);
    assert_eq!(vocabulary.num_shared_results(), num_shared, "the second schema computed its own mask");
    assert_eq!(allowed_first, allowed_second);
    check_document(&second, &vocabulary, r#"{"gamma": "g", "zz": 1, "alpha": {}}"#);
}

#[test]
fn a_context_seen_before_reuses_its_boundary_walk() {
    // The string value of every element after the first of an array of objects sits in the
    // same context (the same reachable sets, numbered differently): its boundary walk is
    // memoised by one element and reused by the next, and every mask still equals the tokens
    // that advance.
    let schema = json!({"type": "array", "items": {"type": "object", "properties": {
        "alpha": {"type": "string"}, "beta": {"type": "integer"}}, "additionalProperties": false}});
    let m = matcher(&schema);
    let vocabulary = vocabulary();
    let inside_value = |prefix: &str| {
        let mut state = m.start().unwrap();
        assert!(m.advance_bytes(&mut state, prefix.as_bytes()).unwrap());
        m.allowed_tokens(&state, &vocabulary).unwrap()
    };
    let second = inside_value(r#"[{"alpha": "x", "beta": 1}, {"alpha": "ab"#);
    let (num_kept, num_reused) = m.boundary_walk_counts();
    assert!(num_kept > 0, "the element's walk is kept");
    let third = inside_value(r#"[{"alpha": "x", "beta": 1}, {}, {"alpha": "pq"#);
    assert_eq!(m.boundary_walk_counts(), (num_kept, num_reused + 1), "the third element reused it");
    assert_eq!(second, third);
    // Other contexts (the first element, the value before "beta", after the last element) are
    // not confused with it.
    check_document(&m, &vocabulary, r#"[{"alpha": "a", "beta": 10}, {"alpha": "b\"", "beta": 0}, {}]"#);
}

#[test]
fn closing_quotes_inside_tokens_are_walked_as_one_suffix_trie() {
    // Inside a string value, every token with a closing quote part-way (`e"`, `x",`, `é"`,
    // `lpha"`, `"}`) ends the string for good at that quote: what follows is walked once for all
    // of them, and the masks still equal the tokens that advance, in every context (more
    // members to come or not, an array element, a key next).
    let schema = json!({"type": "object", "properties": {
        "alpha": {"type": "string"},
        "items": {"type": "array", "items": {"type": "string"}},
        "beta": {"type": "string"}}, "required": ["beta"]});
    let m = matcher(&schema);
    let vocabulary = vocabulary();
    for document in [
        r#"{"alpha": "alpha", "items": ["x", "e", "é"], "beta": "lpha"}"#,
        r#"{"alpha":"pha","beta":"x","extra":"e"}"#,
        r#"{"items":[],"beta":"\"é\""}"#,
    ] {
        check_document(&m, &vocabulary, document);
    }
    assert!(m.num_suffix_tries() > 0, "no string value merged its closing quotes");
    // Two string lexemes live at once (either branch): a closing quote one of them cannot take
    // part-way is merged only where the other is dead without ending first.
    let either = json!({"type": "object", "properties": {"v": {"anyOf": [
        {"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "x$"}]}}});
    let m = matcher(&either);
    for document in [r#"{"v": "alpha"}"#, r#"{"v":"bx"}"#, r#"{"v": "ax", "w": "e"}"#] {
        check_document(&m, &vocabulary, document);
    }
}

#[test]
fn a_key_ends_at_its_colon_when_its_value_starts_with_a_regex() {
    let schema = json!({
        "type": "object",
        "properties": {
            "alpha": {"type": "string"},
            "bet": {"enum": ["x", 1]},
            "pha": {"type": "string", "maxLength": 3},
            "hab": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]},
            "free": {},
        },
        "required": ["alpha", "bet", "pha", "hab"],
    });
    let matcher = matcher(&schema);
    let grammar = matcher.grammar();
    let then_of = |name: &str| {
        (0..grammar.num_lexemes() as u32)
            .find_map(|id| match grammar.lexeme(id) {
                Lexeme::Literal { text, then } if text == &format!("\"{name}\"") => Some(then.clone()),
                _ => None,
            })
            .unwrap()
    };
    // A regex value, and a plain counted string, take the space after the colon; a value
    // that starts with a rule leaves it in the key.
    assert_eq!(then_of("alpha"), "(?:[ ]?):");
    assert_eq!(then_of("bet"), "(?:[ ]?):");
    assert_eq!(then_of("pha"), "(?:[ ]?):");
    assert_eq!(then_of("hab"), "(?:[ ]?):(?:[ ]?)");
    assert_eq!(then_of("free"), "(?:[ ]?):", "a free value takes the space too");
    let vocabulary = vocabulary_with(&[" \"", " 1", ": \"", "\": \"x", "\": \"", "\" \""]);
    for document in [
        r#"{"alpha": "ab", "bet": 1, "pha": "x", "hab": 10, "free": {"a": [1, "x"]}}"#,
        r#"{"alpha":"ab","bet":"x","pha":"abc","hab":"ab","free":[],"x":{"b":true}}"#,
        r#"{"alpha" : "", "bet" :1, "pha" : "", "hab" : "", "b": [ {} ] }"#,
    ] {
        check_document(&matcher, &vocabulary, document);
    }
    for (text, valid) in [(r#"{"alpha":  "#, false), (r#"{"alpha": "", "bet": 1, "pha":  "#, false)] {
        let mut state = matcher.start().unwrap();
        assert_eq!(matcher.advance_bytes(&mut state, text.as_bytes()).unwrap(), valid, "{text}");
    }
    let mut state = matcher.start().unwrap();
    let too_long = r#"{"alpha": "", "bet": 1, "pha": "abcd"#;
    assert!(
        !matcher.advance_bytes(&mut state, too_long.as_bytes()).unwrap(),
        "maxLength holds after the space"
    );
}
