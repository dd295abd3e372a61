//! Helpers shared by the schema tests: matchers under the options they read schemas with, and
//! whole-document acceptance (with the parse state's invariants checked).

#![allow(dead_code)]

use sglr_fsm::CompileLimits;
use sglr_grammar::{json_schema_to_grammar, GrammarMatcher, ParserLimits};
use sglr_schema::JsonSchemaOptions;

pub fn matcher(schema: &str) -> GrammarMatcher {
    let grammar = json_schema_to_grammar(schema, &JsonSchemaOptions::default()).unwrap();
    GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
}

pub fn accepts(m: &GrammarMatcher, text: &str) -> bool {
    let mut state = m.start().unwrap();
    let ok = m.advance_bytes(&mut state, text.as_bytes()).unwrap() && m.is_accepting(&state);
    m.check_invariants(&state).unwrap();
    ok
}

pub fn keyword_matcher(schema: &str, additional_properties_default: bool) -> GrammarMatcher {
    let options = JsonSchemaOptions { additional_properties_default, ..JsonSchemaOptions::default() };
    let grammar = json_schema_to_grammar(schema, &options).unwrap_or_else(|e| panic!("{schema}: {e}"));
    GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
}

pub fn open_matcher(schema: &str) -> GrammarMatcher {
    let options = JsonSchemaOptions { additional_properties_default: true, ..JsonSchemaOptions::default() };
    let grammar = json_schema_to_grammar(schema, &options).unwrap();
    GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
}

/// Cases of a fuzzing property: `PROPTEST_CASES` when set (a long run), else `default` (cheap
/// enough for every `cargo test`). An explicit case count in a config would ignore the variable.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
