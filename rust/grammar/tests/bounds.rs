//! Laziness, bounds and typed errors.

use sglr_fsm::CompileLimits;
use sglr_grammar::{GrammarBuilder, GrammarError, GrammarMatcher, ParserLimits, Symbol};
use sglr_vocab::Vocabulary;

#[test]
fn first_mask_builds_only_the_lexemes_it_reaches() {
    let mut builder = GrammarBuilder::new();
    let root = builder.nonterminal("root");
    let tail = builder.nonterminal("tail");
    let x = builder.lexeme("x");
    let numbers = builder.lexeme("[0-9]{1,40}");
    let word = builder.lexeme("[a-z]+");
    builder.rule(root, vec![Symbol::Lexeme(x), Symbol::Nonterminal(tail)]);
    builder.rule(tail, vec![Symbol::Lexeme(numbers)]);
    builder.rule(tail, vec![Symbol::Lexeme(word)]);
    let matcher =
        GrammarMatcher::new(builder.build(root).unwrap(), CompileLimits::default(), ParserLimits::default());
    let vocabulary =
        Vocabulary::new(vec![Some(b"x".to_vec()), Some(b"x1".to_vec()), Some(b"1".to_vec()), None], vec![3])
            .unwrap();
    let mut state = matcher.start().unwrap();
    assert_eq!(matcher.num_lexemes_built(), 1);
    // "x1" walks into the numbers / word lexemes, so the first mask builds them; "1" alone does not.
    assert_eq!(matcher.allowed_tokens(&state, &vocabulary).unwrap(), vec![0, 1]);
    assert!(matcher.advance_bytes(&mut state, b"x12").unwrap());
    assert!(matcher.is_accepting(&state));
    assert!(!matcher.advance_bytes(&mut state, b"a").unwrap());
}

#[test]
fn an_exploding_chart_is_a_typed_error() {
    // S -> S S | a is ambiguous enough that sets grow with the input.
    let mut builder = GrammarBuilder::new();
    let s = builder.nonterminal("s");
    let a = builder.lexeme("a");
    builder.rule(s, vec![Symbol::Nonterminal(s), Symbol::Nonterminal(s), Symbol::Nonterminal(s)]);
    builder.rule(s, vec![Symbol::Lexeme(a)]);
    let limits = ParserLimits { max_items_per_set: 50 };
    let matcher = GrammarMatcher::new(builder.build(s).unwrap(), CompileLimits::default(), limits);
    let mut state = matcher.start().unwrap();
    let error = (0..200).find_map(|_| matcher.advance_bytes(&mut state, b"a").err()).expect("limit reached");
    assert!(matches!(error, GrammarError::ParserTooLarge { limit: 50, .. }), "{error}");
    matcher.check_invariants(&state).unwrap();
}

#[test]
fn bad_grammars_are_typed_errors() {
    let mut builder = GrammarBuilder::new();
    let root = builder.nonterminal("root");
    let missing = builder.nonterminal("missing");
    builder.rule(root, vec![Symbol::Nonterminal(missing)]);
    assert_eq!(builder.build(root).unwrap_err(), GrammarError::UndefinedRule("missing".into()));

    let mut builder = GrammarBuilder::new();
    let root = builder.nonterminal("root");
    builder.rule(root, vec![Symbol::Nonterminal(root)]);
    assert_eq!(builder.build(root).unwrap_err(), GrammarError::EmptyLanguage);

    let mut builder = GrammarBuilder::new();
    let root = builder.nonterminal("root");
    let bad = builder.lexeme("(unclosed");
    builder.rule(root, vec![Symbol::Lexeme(bad)]);
    let matcher =
        GrammarMatcher::new(builder.build(root).unwrap(), CompileLimits::default(), ParserLimits::default());
    assert!(matches!(matcher.start().unwrap_err(), GrammarError::Lexeme { .. }));
}

#[test]
fn eos_finishes_only_accepting_states() {
    let mut builder = GrammarBuilder::new();
    let root = builder.nonterminal("root");
    let ab = builder.lexeme("ab");
    builder.rule(root, vec![Symbol::Lexeme(ab)]);
    let matcher =
        GrammarMatcher::new(builder.build(root).unwrap(), CompileLimits::default(), ParserLimits::default());
    let vocabulary = Vocabulary::new(vec![Some(b"a".to_vec()), Some(b"b".to_vec()), None], vec![2]).unwrap();
    let mut state = matcher.start().unwrap();
    assert_eq!(matcher.forced_bytes(&state, 8).unwrap(), b"ab");
    assert!(!matcher.advance_token(&mut state, &vocabulary, 2).unwrap());
    assert!(matcher.advance_token(&mut state, &vocabulary, 0).unwrap());
    assert!(matcher.advance_token(&mut state, &vocabulary, 1).unwrap());
    assert_eq!(matcher.allowed_tokens(&state, &vocabulary).unwrap(), vec![2]);
    assert!(matcher.advance_token(&mut state, &vocabulary, 2).unwrap());
    assert!(state.is_finished());
    assert_eq!(matcher.allowed_tokens(&state, &vocabulary).unwrap(), vec![2]);
    assert!(matcher.advance_token(&mut state, &vocabulary, 2).unwrap(), "EOS after EOS, as the mask says");
    assert!(!matcher.advance_token(&mut state, &vocabulary, 0).unwrap());
    matcher.check_invariants(&state).unwrap();
    assert!(matches!(
        matcher.advance_token(&mut state, &vocabulary, 9),
        Err(GrammarError::TokenOutOfRange { .. })
    ));
}
