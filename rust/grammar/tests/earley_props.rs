//! Random small grammars and strings: the Earley matcher agrees with a naive recognizer, on
//! whole strings, on every prefix's liveness for accepted strings, and on token masks.

mod reference;

use proptest::prelude::*;
use sglr_fsm::CompileLimits;
use sglr_grammar::{GrammarBuilder, GrammarMatcher, ParserLimits, Symbol};
use sglr_vocab::Vocabulary;

use reference::Reference;

/// Lexemes over {a, b}: literals, a repetition, two that match the empty string, and one that
/// ends for good after several different paths (`b`, `ab`, `aab`: mask walks merge what
/// follows them).
const LEXEMES: [&str; 7] = ["a", "b", "ab", "a+", "b?", "(ab)*", "a*b"];

#[derive(Debug, Clone)]
enum Sym {
    N(usize),
    L(usize),
}

fn grammar_strategy() -> impl Strategy<Value = Vec<Vec<Vec<Sym>>>> {
    let symbol = prop_oneof![(0..3usize).prop_map(Sym::N), (0..LEXEMES.len()).prop_map(Sym::L)];
    let rhs = prop::collection::vec(symbol, 0..4);
    let alternatives = prop::collection::vec(rhs, 1..4);
    prop::collection::vec(alternatives, 3)
}

fn build(rules: &[Vec<Vec<Sym>>]) -> Option<GrammarMatcher> {
    let mut builder = GrammarBuilder::new();
    let ids: Vec<_> = (0..rules.len()).map(|i| builder.nonterminal(&format!("n{i}"))).collect();
    for (lhs, alternatives) in rules.iter().enumerate() {
        for rhs in alternatives {
            let rhs = rhs
                .iter()
                .map(|s| match *s {
                    Sym::N(n) => Symbol::Nonterminal(ids[n]),
                    Sym::L(l) => Symbol::Lexeme(builder.lexeme(LEXEMES[l])),
                })
                .collect();
            builder.rule(ids[lhs], rhs);
        }
    }
    let grammar = builder.build(ids[0]).ok()?;
    Some(GrammarMatcher::new(grammar, CompileLimits::default(), ParserLimits::default()))
}

fn tiny_vocabulary() -> Vocabulary {
    let tokens = ["a", "b", "ab", "ba", "aa", "bb", "aab", "abab", "x"];
    let mut list: Vec<Option<Vec<u8>>> = tokens.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
    list.push(None); // EOS
    Vocabulary::new(list, vec![tokens.len() as u32]).unwrap()
}

fn all_short_strings() -> Vocabulary {
    let mut list: Vec<Option<Vec<u8>>> = Vec::new();
    for len in 1..=5u32 {
        for bits in 0..1u32 << len {
            list.push(Some((0..len).map(|i| if bits >> i & 1 == 1 { b'b' } else { b'a' }).collect()));
        }
    }
    let eos = list.len() as u32;
    list.push(None);
    Vocabulary::new(list, vec![eos]).unwrap()
}

/// At every prefix of `prefix` (one matcher, so memoised lexeme masks are reused across
/// steps): the mask holds exactly the tokens that advance.
fn masks_agree_along(
    matcher: &GrammarMatcher,
    vocabulary: &Vocabulary,
    prefix: &str,
) -> Result<(), TestCaseError> {
    let mut state = matcher.start().unwrap();
    for step in 0..=prefix.len() {
        if step > 0 && !matcher.advance_bytes(&mut state, &prefix.as_bytes()[step - 1..step]).unwrap() {
            return Ok(());
        }
        let allowed = matcher.allowed_tokens(&state, vocabulary).unwrap();
        for token in 0..vocabulary.vocab_size() as u32 {
            let mut probe = state.clone();
            let ok = matcher.advance_token(&mut probe, vocabulary, token).unwrap();
            matcher.check_invariants(&probe).unwrap();
            prop_assert_eq!(ok, allowed.contains(&token), "token {} after {:?}", token, &prefix[..step]);
        }
    }
    Ok(())
}

/// A lexeme that ends for good after `b`, `ab`, `aab`, ... and goes on in the grammar: its
/// boundaries are walked as one merged suffix trie, and the masks still equal the advanced
/// tokens.
#[test]
fn merged_terminal_boundaries_keep_masks_exact() {
    let a_star_b = LEXEMES.iter().position(|&l| l == "a*b").unwrap();
    let a = LEXEMES.iter().position(|&l| l == "a").unwrap();
    let b = LEXEMES.iter().position(|&l| l == "b?").unwrap();
    let rules = vec![
        vec![vec![Sym::L(a_star_b), Sym::N(1)]],
        vec![vec![Sym::L(a), Sym::L(b)], vec![Sym::L(a_star_b)]],
        vec![vec![]],
    ];
    let matcher = build(&rules).unwrap();
    for prefix in ["", "a", "aa", "ab", "aab", "aaba"] {
        masks_agree_along(&matcher, &all_short_strings(), prefix).unwrap();
    }
    assert!(matcher.num_suffix_tries() > 0, "no mask merged its terminal boundaries");
}

/// After `a` in `a+ b a+?`, `a+` may end at every further `a` and go on: its boundaries all end
/// in the loop's state and could have ended earlier, where `b` (what follows) dies on the rest
/// of the path; they are walked as one suffix trie and the masks still equal the advanced
/// tokens.
#[test]
fn merged_boundaries_that_could_end_earlier_keep_masks_exact() {
    let position = |lexeme: &str| LEXEMES.iter().position(|&l| l == lexeme).unwrap();
    let rules = vec![
        vec![vec![Sym::L(position("a+")), Sym::L(position("b")), Sym::N(1)]],
        vec![vec![Sym::L(position("a+"))], vec![]],
        vec![vec![]],
    ];
    let matcher = build(&rules).unwrap();
    for prefix in ["a", "aa", "aab", "aaba", "ab"] {
        masks_agree_along(&matcher, &all_short_strings(), prefix).unwrap();
    }
    assert!(matcher.num_suffix_tries() > 0, "no mask merged its boundaries");
    // In `a+ a b`, what follows `a+` is `a` itself: it ends on the rest of a longer run, so the
    // parser at `aa` also holds `a` completed, unlike at `a`: those boundaries must not merge.
    let rules = vec![
        vec![vec![Sym::L(position("a+")), Sym::L(position("a")), Sym::L(position("b"))]],
        vec![vec![]],
        vec![vec![]],
    ];
    let matcher = build(&rules).unwrap();
    for prefix in ["a", "aa", "aaa"] {
        masks_agree_along(&matcher, &all_short_strings(), prefix).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn matcher_agrees_with_reference(rules in grammar_strategy(), texts in prop::collection::vec("[ab]{0,6}", 1..6)) {
        let Some(matcher) = build(&rules) else { return Ok(()) };
        let reference = Reference::new(matcher.grammar());
        for text in &texts {
            let text = text.as_bytes();
            let mut state = matcher.start().unwrap();
            matcher.check_invariants(&state).unwrap();
            let mut alive = true;
            for &byte in text {
                let before = state.num_bytes();
                alive = matcher.advance_bytes(&mut state, &[byte]).unwrap();
                matcher.check_invariants(&state).unwrap();
                if !alive {
                    prop_assert_eq!(state.num_bytes(), before, "a refused byte must leave the state");
                    break;
                }
            }
            let accepted = alive && matcher.is_accepting(&state);
            prop_assert_eq!(accepted, reference.accepts(text), "text {:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn masks_agree_with_advancing(rules in grammar_strategy(), prefix in "[ab]{0,4}") {
        let Some(matcher) = build(&rules) else { return Ok(()) };
        masks_agree_along(&matcher, &tiny_vocabulary(), &prefix)?;
    }

    /// Every string over {a, b} of 1 to 5 bytes as a token: tokens that end several lexemes and
    /// go on, so a mask walk closes sets below boundaries and keeps closures across depths.
    #[test]
    fn masks_agree_with_advancing_on_long_tokens(rules in grammar_strategy(), prefix in "[ab]{0,5}") {
        let Some(matcher) = build(&rules) else { return Ok(()) };
        masks_agree_along(&matcher, &all_short_strings(), &prefix)?;
    }

    #[test]
    fn forced_bytes_are_the_only_way_on(rules in grammar_strategy(), text in "[ab]{0,5}") {
        let Some(matcher) = build(&rules) else { return Ok(()) };
        let vocabulary = tiny_vocabulary();
        let mut state = matcher.start().unwrap();
        if !matcher.advance_bytes(&mut state, text.as_bytes()).unwrap() {
            return Ok(());
        }
        let forced = matcher.forced_bytes(&state, 16).unwrap();
        let mut after = state.clone();
        prop_assert!(matcher.advance_bytes(&mut after, &forced).unwrap());
        matcher.check_invariants(&after).unwrap();
        if let Some(&first) = forced.first() {
            prop_assert!(!matcher.is_accepting(&state));
            for token in matcher.allowed_tokens(&state, &vocabulary).unwrap() {
                prop_assert_eq!(vocabulary.token_bytes(token).map(|b| b[0]), Some(first));
            }
        }
    }
}
