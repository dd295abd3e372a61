//! Structural tags: free text with 0, 1 and 2 constrained segments is accepted; invalid JSON in
//! a segment, output ending inside one, a trigger not continued into a begin and a trigger
//! passed by in free text are not; malformed tags are refused naming the field.

use sglr_fsm::CompileLimits;
use sglr_grammar::{
    structural_tag_to_grammar, GrammarError, GrammarMatcher, ParserLimits, StructuralTag, TagStructure,
};
use sglr_schema::JsonSchemaOptions;

const WEATHER: &str =
    r#"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}"#;
const TIME: &str = r#"{"type": "object", "properties": {"zone": {"type": "integer"}}, "required": ["zone"]}"#;

fn structure(begin: &str, schema: &str, end: &str) -> TagStructure {
    TagStructure { begin: begin.into(), schema: schema.into(), end: end.into() }
}

fn tag(structures: Vec<TagStructure>, triggers: &[&str]) -> StructuralTag {
    StructuralTag { structures, triggers: triggers.iter().map(|t| t.to_string()).collect() }
}

fn functions() -> StructuralTag {
    tag(
        vec![
            structure("<function=get_weather>", WEATHER, "</function>"),
            structure("<function=get_time>", TIME, "</function>"),
        ],
        &["<function="],
    )
}

fn matcher(tag: &StructuralTag) -> GrammarMatcher {
    let grammar = structural_tag_to_grammar(tag, &JsonSchemaOptions::default()).unwrap();
    GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default())
}

/// Whether `text` is a whole output; `Some(false)` when it is a prefix of one, `None` when not
/// even that.
fn judge(m: &GrammarMatcher, text: &str) -> Option<bool> {
    let mut state = m.start().unwrap();
    let taken = m.advance_bytes(&mut state, text.as_bytes()).unwrap();
    m.check_invariants(&state).unwrap();
    taken.then(|| m.is_accepting(&state))
}

fn field_of(tag: &StructuralTag) -> String {
    match structural_tag_to_grammar(tag, &JsonSchemaOptions::default()) {
        Err(GrammarError::StructuralTag { field, .. }) => field,
        other => panic!("expected a structural tag error, got {other:?}"),
    }
}

#[test]
fn free_text_and_segments_are_accepted() {
    let m = matcher(&functions());
    assert_eq!(judge(&m, ""), Some(true));
    assert_eq!(judge(&m, "Just text, <b>tags</b> and a <function call."), Some(true));
    assert_eq!(judge(&m, r#"Sure. <function=get_weather>{"city": "Paris"}</function>"#), Some(true));
    let two = r#"a<function=get_weather>{"city":"Oslo"}</function> then <function=get_time>{"zone": -3}</function> done"#;
    assert_eq!(judge(&m, two), Some(true));
    // Back to back, and a trigger's prefix at the very end of free text.
    let adjacent = r#"<function=get_time>{"zone":1}</function><function=get_time>{"zone":2}</function><func"#;
    assert_eq!(judge(&m, adjacent), Some(true));
}

#[test]
fn segments_are_enforced() {
    let m = matcher(&functions());
    // Invalid JSON, and JSON the schema refuses.
    assert_eq!(judge(&m, r#"<function=get_weather>{"city": Paris}"#), None);
    assert_eq!(judge(&m, r#"<function=get_time>{"zone": "utc"}"#), None);
    // Ending inside a segment: after the begin, inside the JSON, before the end is complete.
    assert_eq!(judge(&m, "x <function=get_weather>"), Some(false));
    assert_eq!(judge(&m, r#"<function=get_weather>{"city": "Pa"#), Some(false));
    assert_eq!(judge(&m, r#"<function=get_weather>{"city": "Paris"}</func"#), Some(false));
    // A trigger that no begin continues, and a missing end.
    assert_eq!(judge(&m, "<function=get_news>"), None);
    assert_eq!(judge(&m, "<function= get_weather>"), None);
    assert_eq!(judge(&m, r#"<function=get_weather>{"city": "Paris"} and text"#), None);
}

#[test]
fn the_first_complete_trigger_opens_the_segment() {
    // With trigger "aa", "aaab" holds the trigger at 0: free text "a" then begin "aab" would
    // pass it by.
    let m = matcher(&tag(vec![structure("aab", "{\"type\": \"integer\"}", ";")], &["aa"]));
    assert_eq!(judge(&m, "xaab1;"), Some(true));
    assert_eq!(judge(&m, "aaab1;"), None);
    assert_eq!(judge(&m, "a a b"), Some(true));
}

#[test]
fn malformed_tags_name_the_field() {
    let mut no_begin = functions();
    no_begin.structures[1].begin = String::new();
    assert_eq!(field_of(&no_begin), "structures[1].begin");
    let mut off_trigger = functions();
    off_trigger.structures[0].begin = "<tool=get_weather>".into();
    assert_eq!(field_of(&off_trigger), "structures[0].begin");
    let mut unused_trigger = functions();
    unused_trigger.triggers.push("<tool=".into());
    assert_eq!(field_of(&unused_trigger), "triggers[1]");
    let mut nested_triggers = functions();
    nested_triggers.triggers.push("<function=get".into());
    assert_eq!(field_of(&nested_triggers), "triggers[0]");
    // "x" completes inside "<x>" first: "<x>" could never open a segment.
    let inner = tag(vec![structure("<x>a", "{}", ""), structure("xb", "{}", "")], &["<x>", "x"]);
    assert_eq!(field_of(&inner), "triggers[0]");
    assert_eq!(field_of(&tag(vec![structure("ab", "{}", "")], &["ab", ""])), "triggers[1]");
    let mut bad_schema = functions();
    bad_schema.structures[1].schema = r#"{"type": "object", "properties": "#.into();
    assert_eq!(field_of(&bad_schema), "structures[1].schema");
    assert_eq!(field_of(&tag(Vec::new(), &[])), "structures");
}
