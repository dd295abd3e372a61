//! Hostile EBNF text: grammar-shaped text (deep groups, stacked repetitions, counts past the
//! bounds, escapes, classes, regex terminals, undefined rules) and valid grammars with bytes
//! inserted, deleted or replaced either parse to a grammar or fail with a typed error; never a
//! panic, a stack overflow or an unbounded allocation. A grammar that parses starts, steps
//! through bytes and fills a token mask under small automaton limits, or fails typed.
//! Cases per property: `PROPTEST_CASES` (default 64).

mod common;

use proptest::prelude::*;
use sglr_fsm::CompileLimits;
use sglr_grammar::{parse_ebnf, Grammar, GrammarError, GrammarMatcher, ParserLimits};
use sglr_vocab::Vocabulary;

/// Most symbols a grammar may hold beyond what its text spells out (the lowering's expansion
/// budget for repetitions, with room for the rules it adds per repetition).
const MAX_EXPANDED_SYMBOLS: usize = 200_000;

fn small_limits() -> CompileLimits {
    CompileLimits {
        nfa_size_limit: 1 << 20,
        dfa_size_limit: 1 << 20,
        determinize_size_limit: 1 << 20,
        nest_limit: 100,
    }
}

fn vocabulary() -> Vocabulary {
    let tokens: [&[u8]; 9] = [b"a", b"b", b"ab", b"(", b"\"", b"0", b"\xC3\xA9", b"\xF0", b" "];
    let mut list: Vec<Option<Vec<u8>>> = tokens.iter().map(|t| Some(t.to_vec())).collect();
    list.push(None); // EOS
    Vocabulary::new(list, vec![tokens.len() as u32]).unwrap()
}

fn num_symbols(grammar: &Grammar) -> usize {
    (0..grammar.num_rules() as u32).map(|r| grammar.rule(r).rhs.len() + 1).sum()
}

/// Whether `error` is one a caller can be given: anything but a broken invariant (a bug).
fn is_typed(error: &GrammarError) -> bool {
    !matches!(error, GrammarError::Invariant(_))
}

/// Parses `text`; on a grammar, drives a matcher over `input`. Every failure must be typed.
fn exercise(text: &str, input: &[u8]) -> Result<(), TestCaseError> {
    let grammar = match parse_ebnf(text) {
        Ok(grammar) => grammar,
        Err(error) => {
            prop_assert!(is_typed(&error), "{error:?} for {text:?}");
            return Ok(());
        }
    };
    prop_assert!(
        num_symbols(&grammar) <= MAX_EXPANDED_SYMBOLS + 8 * text.len(),
        "{} symbols from {} bytes of text",
        num_symbols(&grammar),
        text.len()
    );
    let matcher = GrammarMatcher::new(grammar, small_limits(), ParserLimits { max_items_per_set: 2_000 });
    let vocabulary = vocabulary();
    let mut state = match matcher.start() {
        Ok(state) => state,
        Err(error) => {
            prop_assert!(is_typed(&error), "{error:?} for {text:?}");
            return Ok(());
        }
    };
    for step in [&input[..input.len() / 2], &input[input.len() / 2..]] {
        let mut mask = vec![0u32; vocabulary.num_mask_words()];
        if let Err(error) = matcher.fill_mask(&state, &vocabulary, &mut mask) {
            prop_assert!(is_typed(&error), "{error:?} for {text:?}");
            return Ok(());
        }
        match matcher.advance_bytes(&mut state, step) {
            Ok(true) => matcher.check_invariants(&state).map_err(|e| TestCaseError::fail(e.to_string()))?,
            Ok(false) => return Ok(()),
            Err(error) => {
                prop_assert!(is_typed(&error), "{error:?} for {text:?}");
                return Ok(());
            }
        }
    }
    Ok(())
}

fn atom() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "'a'",
        "\"b\"",
        "\"ab\"",
        "\"\\n\\t\\\\\\\"\"",
        "'\\x41'",
        "'\\u00e9'",
        "'\\U0001F600'",
        "'\\q'",
        "''",
        "\"é\"",
        "'\u{10FFFF}'",
        "[a-z]",
        "[^\\]\"]",
        "[\\x00-\\U0010FFFF]",
        "[^\\x00-\\U0010FFFF]",
        "[z-a]",
        "[]",
        "/[0-9]+/",
        "/(/",
        "/a{2000}/",
        "/(?i)x/",
        "/\\p{L}+/",
        "r0",
        "r1",
        "r2",
        "zz",
        "root",
        "'a'{",
        "\"",
        "[",
        "(",
        ")",
        "|",
        "::=",
    ])
    .prop_map(String::from)
}

fn postfix() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "",
        "",
        "?",
        "*",
        "+",
        "{3}",
        "{0,5}",
        "{2,}",
        "{1000}",
        "{0,1000}",
        "{1001}",
        "{5,2}",
        "{99999999999}",
        "{",
        "{,3}",
        "??",
        "*+",
    ])
}

/// Grammar-shaped expressions: sequences, alternations and groups of atoms, with postfixes.
fn expression() -> impl Strategy<Value = String> {
    (atom(), postfix()).prop_map(|(a, p)| format!("{a}{p}")).prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..4).prop_map(|items| items.join(" ")),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|items| items.join(" | ")),
            (inner, postfix()).prop_map(|(e, p)| format!("({e}){p}")),
        ]
    })
}

fn grammar_text() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(expression(), 1..4),
        any::<bool>(),
        prop::sample::select(vec!["::=", ":", "::", ""]),
    )
        .prop_map(|(bodies, lark, operator)| {
            let operator = if lark { ":" } else { operator };
            let mut lines: Vec<String> =
                bodies.iter().enumerate().map(|(i, body)| format!("r{i} {operator} {body}")).collect();
            lines.push(format!("root {operator} r0"));
            lines.join("\n")
        })
}

/// Constructs whose size grows with a count: groups, stacked repetitions, nested counts.
fn hostile_text() -> impl Strategy<Value = String> {
    (0usize..4, 1usize..3000).prop_map(|(kind, n)| match kind {
        0 => format!("root ::= {}'a'{}", "(".repeat(n), ")".repeat(n)),
        1 => format!("root ::= 'a'{}", "?".repeat(n)),
        2 => format!("a ::= 'x' | 'a' a\nroot ::= a{}", "{7}".repeat(n.min(40))),
        _ => format!("root ::= {}'a'{}", "('b' | ".repeat(n), ")*".repeat(n)),
    })
}

const VALID: [&str; 4] = [
    "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
    "start: item (\",\" item)*\n?item: NAME | \"[\" start \"]\"\nNAME: /[a-z]+/",
    "root ::= \"\\\"q\\\"\\n\" [^a-c\\]] \"é\" (\"x\"){2,3}",
    "root ::= pair{0,3}\npair ::= 'a' 'b'? | \"(\" root \")\" # comment",
];

/// A valid grammar with up to eight edits (a byte inserted, deleted or replaced).
fn damaged_text() -> impl Strategy<Value = String> {
    let edit = (
        any::<prop::sample::Index>(),
        0u8..3,
        prop::sample::select(vec![
            '(', ')', '"', '\'', '[', ']', '\\', '{', '}', '|', '*', '\n', ':', '=', 'a', 'é', '\u{0}',
        ]),
    );
    (prop::sample::select(VALID.to_vec()), prop::collection::vec(edit, 1..8)).prop_map(|(text, edits)| {
        let mut chars: Vec<char> = text.chars().collect();
        for (at, kind, c) in edits {
            let i = at.index(chars.len() + 1);
            match kind {
                0 => chars.insert(i, c),
                1 if i < chars.len() => {
                    chars.remove(i);
                }
                _ if i < chars.len() => chars[i] = c,
                _ => chars.push(c),
            }
        }
        chars.into_iter().collect()
    })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(b"ab(\")0x, \xC3\xA9\xF0".to_vec()), 0..12)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(64)))]

    #[test]
    fn grammar_shaped_text_parses_or_fails_typed(text in grammar_text(), bytes in input()) {
        exercise(&text, &bytes)?;
    }

    #[test]
    fn damaged_grammars_parse_or_fail_typed(text in damaged_text(), bytes in input()) {
        exercise(&text, &bytes)?;
    }

    #[test]
    fn constructs_that_grow_with_a_count_stay_bounded(text in hostile_text(), bytes in input()) {
        exercise(&text, &bytes)?;
    }

    #[test]
    fn arbitrary_text_parses_or_fails_typed(text in any::<String>(), bytes in input()) {
        exercise(&text, &bytes)?;
    }
}

fn syntax_error(text: &str) -> String {
    match parse_ebnf(text) {
        Err(GrammarError::Syntax { message, .. }) => message,
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn groups_nested_past_the_bound_are_a_syntax_error_not_a_stack_overflow() {
    let deep = format!("root ::= {}'a'{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(syntax_error(&deep).contains("nest deeper"));
    let fine = format!("root ::= {}'a'{}", "(".repeat(50), ")".repeat(50));
    assert!(parse_ebnf(&fine).is_ok());
    // Just inside the bound, over a rule reference (so the lowering recurses all the way down):
    // it fits the 2 MiB stack of a test thread, in a debug build too.
    let deepest = format!("root ::= {}r{}\nr ::= 'a'", "('x' ".repeat(49), ")?".repeat(49));
    let matcher = GrammarMatcher::new(parse_ebnf(&deepest).unwrap(), small_limits(), ParserLimits::default());
    let mut state = matcher.start().unwrap();
    let text = format!("{}a", "x".repeat(49));
    assert!(matcher.advance_bytes(&mut state, text.as_bytes()).unwrap() && matcher.is_accepting(&state));
    let too_deep = format!("root ::= {}r{}\nr ::= 'a'", "('x' ".repeat(50), ")?".repeat(50));
    assert!(syntax_error(&too_deep).contains("nest deeper"));
}

#[test]
fn stacked_repetitions_past_the_bound_are_a_syntax_error_not_a_stack_overflow() {
    assert!(syntax_error(&format!("root ::= 'a'{}", "?".repeat(100_000))).contains("nest deeper"));
    assert!(syntax_error(&format!("root ::= {}'a'{}", "('b' | ".repeat(5_000), ")*".repeat(5_000)))
        .contains("nest deeper"));
    assert!(parse_ebnf("root ::= 'a'?*+{2}").is_ok());
}

#[test]
fn nested_counts_that_multiply_past_the_budget_are_refused_not_allocated() {
    // 10^9 symbols from 50 bytes of text.
    let bomb = "a ::= 'x' | 'a' a\nroot ::= a{1000}{1000}{1000}";
    assert!(matches!(parse_ebnf(bomb), Err(GrammarError::GrammarTooLarge(_))));
    let fine = parse_ebnf("a ::= 'x' | 'a' a\nroot ::= a{10}{10}").unwrap();
    assert!(num_symbols(&fine) >= 100);
}
