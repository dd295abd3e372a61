//! Printed grammars read back as the same language: recursive schemas and EBNF grammars go
//! through `grammar_to_ebnf` -> `parse_ebnf`, and both matchers agree on known strings and on
//! random byte strings; a printed grammar embeds in a larger one under its own name.

use proptest::prelude::*;
use sglr_fsm::CompileLimits;
use sglr_grammar::{
    grammar_to_ebnf, json_schema_to_grammar, parse_ebnf, Grammar, GrammarMatcher, ParserLimits,
};
use sglr_schema::JsonSchemaOptions;

const TREE: &str = r##"{
  "$defs": {"node": {"type": "object", "properties": {
      "name": {"type": "string", "pattern": "^[a-z/]{1,4}$"},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["name"]}},
  "$ref": "#/$defs/node"}"##;

fn matcher(grammar: Grammar) -> GrammarMatcher {
    GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
}

fn accepts(m: &GrammarMatcher, text: &[u8]) -> bool {
    let mut state = m.start().unwrap();
    let ok = m.advance_bytes(&mut state, text).unwrap() && m.is_accepting(&state);
    m.check_invariants(&state).unwrap();
    ok
}

fn schema_pair() -> (GrammarMatcher, GrammarMatcher, String) {
    let grammar = json_schema_to_grammar(TREE, &JsonSchemaOptions::default()).unwrap();
    let text = grammar_to_ebnf(&grammar, "tree").unwrap();
    let reread = parse_ebnf(&text).unwrap();
    (matcher(grammar), matcher(reread), text)
}

#[test]
fn a_recursive_schema_reads_back_as_the_same_language() {
    let (original, reread, text) = schema_pair();
    assert!(text.starts_with("tree ::= "), "{text}");
    let good = [
        r#"{"name": "a/b"}"#,
        r#"{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}"#,
        r#"{"name":"x","children":[]}"#,
    ];
    let bad = [r#"{"name": "ab/cd"}"#, r#"{"children": []}"#, r#"{"name": "a", "children": [{}]}"#, "{", ""];
    for doc in good {
        assert!(accepts(&original, doc.as_bytes()) && accepts(&reread, doc.as_bytes()), "{doc}");
    }
    for doc in bad {
        assert!(!accepts(&original, doc.as_bytes()) && !accepts(&reread, doc.as_bytes()), "{doc}");
    }
}

#[test]
fn ebnf_with_line_breaks_slashes_and_empty_rules_round_trips() {
    let source = "root ::= \"a/\\n\" item* (\"x\" | \"\")\nitem ::= [\\n/] | \"(\" root \")\"\n";
    let grammar = parse_ebnf(source).unwrap();
    let original = matcher(grammar.clone());
    let reread = matcher(parse_ebnf(&grammar_to_ebnf(&grammar, "g").unwrap()).unwrap());
    for doc in ["a/\n", "a/\n/\nx", "a/\n(a/\n)", "a/\n(a/\nx)x"] {
        assert!(accepts(&original, doc.as_bytes()) && accepts(&reread, doc.as_bytes()), "{doc}");
    }
    for doc in ["a/", "a/\n(", "a/\nxx", "a/\n(a/\n"] {
        assert!(!accepts(&original, doc.as_bytes()) && !accepts(&reread, doc.as_bytes()), "{doc}");
    }
}

#[test]
fn a_printed_grammar_embeds_under_its_name() {
    let grammar = json_schema_to_grammar(TREE, &JsonSchemaOptions::default()).unwrap();
    let wrapped = format!(
        "root ::= \"<call>\" tree (\";\" tree)* \"</call>\"\n{}",
        grammar_to_ebnf(&grammar, "tree").unwrap()
    );
    let m = matcher(parse_ebnf(&wrapped).unwrap());
    assert!(accepts(&m, br#"<call>{"name": "a"};{"name": "b", "children": [{"name": "c"}]}</call>"#));
    assert!(!accepts(&m, br#"<call>{"name": "a"}"#));
    assert!(!accepts(&m, br#"<call>{"name": "abcde"}</call>"#));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random strings over the schema's own alphabet: both matchers give the same verdict.
    #[test]
    fn printed_and_original_agree(choices in proptest::collection::vec(0usize..12, 0..40)) {
        let pieces = ["{", "}", "[", "]", "\"name\"", "\"children\"", ":", " ", ",", "\"a\"", "\"/\"", "\"ab/c\""];
        let doc: String = choices.iter().map(|&i| pieces[i]).collect();
        let (original, reread, _) = schema_pair();
        prop_assert_eq!(accepts(&original, doc.as_bytes()), accepts(&reread, doc.as_bytes()), "{}", doc);
    }
}

#[test]
fn a_lexeme_without_regex_text_is_a_typed_refusal_naming_the_keyword() {
    let schema = r##"{"$defs": {"n": {"type": "object", "properties": {
        "size": {"type": "integer", "multipleOf": 7},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}}, "$ref": "#/$defs/n"}"##;
    let grammar = json_schema_to_grammar(schema, &JsonSchemaOptions::default()).unwrap();
    let error = grammar_to_ebnf(&grammar, "n").unwrap_err();
    assert!(error.to_string().contains("multipleOf"), "{error}");
}

#[test]
fn undeclared_keys_print_as_their_regex() {
    // Undeclared members are built as a product DFA but print as `key_not_in`'s regex.
    let options = JsonSchemaOptions { additional_properties_default: true, ..Default::default() };
    let grammar = json_schema_to_grammar(TREE, &options).unwrap();
    let reread = matcher(parse_ebnf(&grammar_to_ebnf(&grammar, "tree").unwrap()).unwrap());
    let original = matcher(grammar);
    let good = [r#"{"name": "a", "extra": [1, {"x": null}]}"#, r#"{"name": "b", "nam": 1}"#];
    let bad = [r#"{"name": "a", "n\u0061me": "b"}"#, r#"{"name": "a", "children": 3}"#, r#"{"x": 1}"#];
    for doc in good {
        assert!(accepts(&original, doc.as_bytes()) && accepts(&reread, doc.as_bytes()), "{doc}");
    }
    for doc in bad {
        assert!(!accepts(&original, doc.as_bytes()) && !accepts(&reread, doc.as_bytes()), "{doc}");
    }
}
