//! EBNF text -> grammar: known grammars, typed errors with positions, fuzzing, and random
//! regular grammars checked against the `regex` crate.

use proptest::prelude::*;
use sglr_fsm::CompileLimits;
use sglr_grammar::{parse_ebnf, GrammarError, GrammarMatcher, ParserLimits};

fn matcher(text: &str) -> GrammarMatcher {
    GrammarMatcher::new(parse_ebnf(text).unwrap(), CompileLimits::default(), ParserLimits::default())
}

fn accepts(matcher: &GrammarMatcher, text: &str) -> bool {
    let mut state = matcher.start().unwrap();
    let ok = matcher.advance_bytes(&mut state, text.as_bytes()).unwrap() && matcher.is_accepting(&state);
    matcher.check_invariants(&state).unwrap();
    ok
}

#[test]
fn arithmetic_gbnf() {
    let m = matcher(
        r#"
        # expressions with precedence
        root   ::= expr
        expr   ::= term (("+" | "-") term)*
        term   ::= factor (("*" | "/") factor)*
        factor ::= number | "(" ws expr ws ")"
        number ::= [0-9]+ ("." [0-9]+)?
        ws     ::= [ \t]*
        "#,
    );
    for good in ["1", "1+2*3", "(1+2)*3.5", "((( 7 )))", "2/( 3-1 )"] {
        assert!(accepts(&m, good), "{good}");
    }
    for bad in ["", "1+", "(1", "1..2", "a", "()"] {
        assert!(!accepts(&m, bad), "{bad}");
    }
}

#[test]
fn lark_style_with_regex_terminals() {
    let m = matcher(
        r#"
        start: item ("," item)*
        ?item: NAME | "[" start "]"
        NAME: /[a-z]+/
        "#,
    );
    assert!(accepts(&m, "a,[b,[c]],d"));
    assert!(!accepts(&m, "a,,b"));
    assert!(!accepts(&m, "[a"));
}

#[test]
fn literals_escapes_classes_and_bounds() {
    let m = matcher(r#"root ::= "\"q\"\n" [^a-c\]] "é" ("x"){2,3} "#);
    assert!(accepts(&m, "\"q\"\nzéxx"));
    assert!(accepts(&m, "\"q\"\ndéxxx"));
    assert!(!accepts(&m, "\"q\"\n]éxx"));
    assert!(!accepts(&m, "\"q\"\nbéxx"));
    assert!(!accepts(&m, "\"q\"\nzéxxxx"));
}

#[test]
fn recursion_through_rules() {
    let m = matcher("root ::= \"(\" root \")\" root | \"\"");
    for good in ["", "()", "(())()", "((()()))"] {
        assert!(accepts(&m, good), "{good}");
    }
    for bad in ["(", ")(", "(()"] {
        assert!(!accepts(&m, bad), "{bad}");
    }
}

#[test]
fn syntax_errors_name_line_and_column() {
    let cases: &[(&str, usize, usize)] = &[
        ("root ::= \"a\"\nfoo ::= (\"b\"", 2, 9),
        ("root ::= \"abc", 1, 10),
        ("root ::= [z-a]", 1, 10),
        ("root ::= a\n", 1, 10),
        ("root = \"a\"", 1, 6),
        ("root ::= \"a\" @", 1, 14),
        ("root ::= \"\\q\"", 1, 12),
        ("root ::= /a(/", 1, 10),
    ];
    for &(text, line, column) in cases {
        match parse_ebnf(text) {
            Err(GrammarError::Syntax { line: l, column: c, message }) => {
                assert_eq!((l, c), (line, column), "{text:?}: {message}");
            }
            other => panic!("{text:?}: expected a syntax error, got {other:?}"),
        }
    }
    let undefined = parse_ebnf("root ::= item\n").unwrap_err();
    assert!(undefined.to_string().contains("undefined rule 'item'"), "{undefined}");
}

/// A random regular expression over {a, b} that may call earlier rules.
#[derive(Debug, Clone)]
enum Regular {
    Literal(&'static str),
    Class(&'static str),
    Call(usize),
    Seq(Vec<Regular>),
    Alt(Vec<Regular>),
    Star(Box<Regular>),
    Plus(Box<Regular>),
    Opt(Box<Regular>),
}

fn regular_strategy(num_rules: usize) -> impl Strategy<Value = Regular> {
    let leaf = prop_oneof![
        prop_oneof![Just("a"), Just("b"), Just("ab"), Just("")].prop_map(Regular::Literal),
        prop_oneof![Just("[ab]"), Just("[^b]"), Just("[a]")].prop_map(Regular::Class),
        (0..num_rules.max(1)).prop_map(Regular::Call),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(Regular::Seq),
            prop::collection::vec(inner.clone(), 2..3).prop_map(Regular::Alt),
            inner.clone().prop_map(|r| Regular::Star(Box::new(r))),
            inner.clone().prop_map(|r| Regular::Plus(Box::new(r))),
            inner.prop_map(|r| Regular::Opt(Box::new(r))),
        ]
    })
}

/// (EBNF text, equivalent regex) of rule `index`, which may only call rules below it.
fn render(r: &Regular, index: usize, regexes: &[String]) -> (String, String) {
    match r {
        Regular::Literal(s) => (format!("\"{s}\""), s.to_string()),
        Regular::Class(c) => (c.to_string(), c.replace("[^b]", "[^b\\n]").to_string()),
        Regular::Call(k) if *k < index => (format!("r{k}"), format!("(?:{})", regexes[*k])),
        Regular::Call(_) => ("\"a\"".into(), "a".into()),
        Regular::Seq(items) => {
            let parts: Vec<_> = items.iter().map(|i| render(i, index, regexes)).collect();
            (
                format!("( {} )", parts.iter().map(|p| p.0.clone()).collect::<Vec<_>>().join(" ")),
                parts.iter().map(|p| format!("(?:{})", p.1)).collect::<String>(),
            )
        }
        Regular::Alt(items) => {
            let parts: Vec<_> = items.iter().map(|i| render(i, index, regexes)).collect();
            (
                format!("( {} )", parts.iter().map(|p| p.0.clone()).collect::<Vec<_>>().join(" | ")),
                format!("(?:{})", parts.iter().map(|p| p.1.clone()).collect::<Vec<_>>().join("|")),
            )
        }
        Regular::Star(i) | Regular::Plus(i) | Regular::Opt(i) => {
            let (text, regex) = render(i, index, regexes);
            let op = match r {
                Regular::Star(_) => "*",
                Regular::Plus(_) => "+",
                _ => "?",
            };
            (format!("({text}){op}"), format!("(?:{regex}){op}"))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(grammar) = parse_ebnf(&text) {
            let m = GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default());
            let _ = m.start();
        }
    }

    #[test]
    fn grammar_like_text_never_panics(text in r#"(root|a|b| |::=|:|"|'|\[|\]|\^|-|\(|\)|\||\*|\+|\?|\{|\}|,|[0-9]|\\|/|\n|#|x)*"#) {
        if let Ok(grammar) = parse_ebnf(&text) {
            let m = GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default());
            if let Ok(mut state) = m.start() {
                let _ = m.advance_bytes(&mut state, b"ab(a)");
            }
        }
    }

    #[test]
    fn regular_grammars_match_their_regex(
        bodies in prop::collection::vec(regular_strategy(3), 1..4),
        texts in prop::collection::vec("[abc]{0,6}", 1..8),
    ) {
        let mut lines = Vec::new();
        let mut regexes: Vec<String> = Vec::new();
        for (index, body) in bodies.iter().enumerate() {
            let (text, regex) = render(body, index, &regexes);
            lines.push(format!("r{index} ::= {text}"));
            regexes.push(regex);
        }
        let last = bodies.len() - 1;
        lines.push(format!("root ::= r{last}"));
        let grammar_text = lines.join("\n");
        let m = matcher(&grammar_text);
        let reference = regex::Regex::new(&format!("^(?:{})$", regexes[last])).unwrap();
        for text in &texts {
            prop_assert_eq!(accepts(&m, text), reference.is_match(text), "{} on {:?}", grammar_text, text);
        }
    }
}
