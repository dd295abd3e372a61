//! Structural tags (SGLang's `structural_tag`, xgrammar's begin/schema/end form): free text in
//! which every occurrence of a trigger opens a segment `begin JSON end`, the JSON valid under
//! that structure's schema; after the end, free text again, any number of times.
//!
//! The grammar is `root ::= body tail?`, `body ::= ε | body segment`, and for a structure whose
//! begin starts with trigger `t`: `segment ::= upto_t rest(begin) schema end`. The free text
//! is a lexeme, not a rule over characters, so its masks are one DFA walk:
//! - `upto_t`: text ending with `t` in which no trigger ends earlier (the segment opens at the
//!   first place a trigger is complete, as a trigger-scanning automaton would see it);
//! - `tail`: non-empty text holding no trigger at all.
//!
//! So a trigger can never be passed by, and the end of output (accepting) is only reachable
//! outside a segment. A trigger must be no prefix of another (then each begin has one trigger)
//! and every trigger some begin's prefix; errors name the field (`structures[i].begin`).

use sglr_schema::JsonSchemaOptions;

use crate::error::GrammarError;
use crate::grammar::{Grammar, GrammarBuilder, Lexeme, NonterminalId, Symbol};
use crate::schema::json_schema_to_grammar;

/// One constrained segment: the text `begin`, a JSON value under `schema` (JSON text), `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagStructure {
    pub begin: String,
    pub schema: String,
    pub end: String,
}

/// Structures and the triggers (prefixes of their begins) that open them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuralTag {
    pub structures: Vec<TagStructure>,
    pub triggers: Vec<String>,
}

/// Any text, as a regex over whole UTF-8 characters.
const ANY_TEXT: &str = "(?s:.*)";

/// The grammar of outputs `tag` admits; schemas are read with `options`.
pub fn structural_tag_to_grammar(
    tag: &StructuralTag,
    options: &JsonSchemaOptions,
) -> Result<Grammar, GrammarError> {
    let trigger_of = check(tag)?;
    let escaped: Vec<String> = tag.triggers.iter().map(|t| regex_syntax::escape(t)).collect();
    let any_trigger = format!("(?:{})", escaped.join("|"));

    let mut builder = GrammarBuilder::new();
    let root = builder.nonterminal("root");
    let body = builder.nonterminal("body");
    builder.rule(body, Vec::new());
    for (index, structure) in tag.structures.iter().enumerate() {
        let trigger = trigger_of[index];
        let upto = builder.lexeme_of(Lexeme::Intersection {
            all: vec![format!("{ANY_TEXT}{}", escaped[trigger])],
            none: vec![format!("{ANY_TEXT}{any_trigger}(?s:.+)")],
        });
        let schema = json_schema_to_grammar(&structure.schema, options).map_err(|error| {
            GrammarError::StructuralTag {
                field: format!("structures[{index}].schema"),
                message: error.to_string(),
            }
        })?;
        let value = embed(&mut builder, &schema, &format!("structures[{index}]"))?;
        let mut rhs = vec![Symbol::Nonterminal(body), Symbol::Lexeme(upto)];
        let rest = &structure.begin[tag.triggers[trigger].len()..];
        rhs.extend(literal(&mut builder, rest));
        rhs.push(Symbol::Nonterminal(value));
        rhs.extend(literal(&mut builder, &structure.end));
        builder.rule(body, rhs);
    }
    let tail = builder.lexeme_of(Lexeme::Intersection {
        all: vec!["(?s:.+)".into()],
        none: vec![format!("{ANY_TEXT}{any_trigger}{ANY_TEXT}")],
    });
    builder.rule(root, vec![Symbol::Nonterminal(body)]);
    builder.rule(root, vec![Symbol::Nonterminal(body), Symbol::Lexeme(tail)]);
    builder.build(root)
}

/// Refuses a malformed tag, naming the field; returns each structure's trigger (by index).
fn check(tag: &StructuralTag) -> Result<Vec<usize>, GrammarError> {
    let refuse = |field: String, message: String| Err(GrammarError::StructuralTag { field, message });
    if tag.structures.is_empty() {
        return refuse("structures".into(), "at least one structure is required".into());
    }
    if let Some(index) = tag.triggers.iter().position(String::is_empty) {
        return refuse(format!("triggers[{index}]"), "a trigger must not be empty".into());
    }
    for (index, trigger) in tag.triggers.iter().enumerate() {
        if let Some(other) =
            tag.triggers.iter().enumerate().find(|&(o, t)| o != index && t.starts_with(trigger.as_str()))
        {
            return refuse(
                format!("triggers[{index}]"),
                format!("trigger {trigger:?} is a prefix of trigger {:?} (triggers[{}])", other.1, other.0),
            );
        }
        // A trigger inside another, ending before its end, completes first: the other could
        // never open a segment (and its free-text lexeme would match nothing).
        let before_end = &trigger[..trigger.len() - trigger.chars().next_back().map_or(0, char::len_utf8)];
        if let Some((other, inner)) =
            tag.triggers.iter().enumerate().find(|&(o, t)| o != index && before_end.contains(t.as_str()))
        {
            return refuse(
                format!("triggers[{index}]"),
                format!("trigger {trigger:?} holds trigger {inner:?} (triggers[{other}]) before its end"),
            );
        }
        if !tag.structures.iter().any(|s| s.begin.starts_with(trigger.as_str())) {
            return refuse(
                format!("triggers[{index}]"),
                format!("trigger {trigger:?} is no structure's begin prefix"),
            );
        }
    }
    let mut trigger_of = Vec::with_capacity(tag.structures.len());
    for (index, structure) in tag.structures.iter().enumerate() {
        if structure.begin.is_empty() {
            return refuse(format!("structures[{index}].begin"), "begin must not be empty".into());
        }
        match tag.triggers.iter().position(|t| structure.begin.starts_with(t.as_str())) {
            Some(trigger) => trigger_of.push(trigger),
            None => {
                return refuse(
                    format!("structures[{index}].begin"),
                    format!("begin {:?} starts with none of the triggers", structure.begin),
                )
            }
        }
    }
    Ok(trigger_of)
}

/// A lexeme for the exact text (nothing for an empty one).
fn literal(builder: &mut GrammarBuilder, text: &str) -> Option<Symbol> {
    (!text.is_empty()).then(|| Symbol::Lexeme(builder.lexeme(&regex_syntax::escape(text))))
}

/// Copies `grammar`'s rules into `builder` (nonterminals renamed under `prefix`, lexemes
/// shared by definition); returns the nonterminal of its start symbol.
fn embed(
    builder: &mut GrammarBuilder,
    grammar: &Grammar,
    prefix: &str,
) -> Result<NonterminalId, GrammarError> {
    // NOTE: created on first mention: a nonterminal whose rules `build` dropped (it derives
    // nothing) is mentioned by no rule left, and would be undefined here.
    let mut ids: Vec<Option<NonterminalId>> = vec![None; grammar.names.len()];
    let mut id_of = |builder: &mut GrammarBuilder, n: NonterminalId| {
        *ids[n as usize]
            .get_or_insert_with(|| builder.nonterminal(&format!("{prefix}/{}", grammar.names[n as usize])))
    };
    let lexeme_ids: Vec<u32> =
        grammar.lexemes.iter().map(|lexeme| builder.lexeme_of(lexeme.clone())).collect();
    // Rule 0 is the augmented `<start> -> start`: the embedded value is `start` itself.
    let start = match grammar.rules.first().map(|rule| rule.rhs.as_slice()) {
        Some([Symbol::Nonterminal(n)]) => id_of(builder, *n),
        _ => return Err(GrammarError::Invariant("a built grammar starts with its augmented rule".into())),
    };
    for rule in &grammar.rules[1..] {
        let lhs = id_of(builder, rule.lhs);
        let rhs = rule
            .rhs
            .iter()
            .map(|symbol| match *symbol {
                Symbol::Nonterminal(n) => Symbol::Nonterminal(id_of(builder, n)),
                Symbol::Lexeme(l) => Symbol::Lexeme(lexeme_ids[l as usize]),
            })
            .collect();
        builder.rule(lhs, rhs);
    }
    Ok(start)
}
