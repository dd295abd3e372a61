//! The token index against brute force: masks equal the oracle's allowed set at every state
//! of random walks (soundness and completeness), every accepted EOS path is a full match,
//! and every string of the language can be produced token by token.

mod common;

use common::{chooser, mask_ids, vocab_with_eos, Oracle, EDGE_PATTERNS};
use proptest::prelude::*;
use sglr_fsm::{CompileLimits, TokenFsm};

/// Tokens for the tests: every single byte that occurs in `texts` (so every string over them
/// is spellable, as with byte-level BPE) plus the given multi-byte tokens.
fn vocabulary_tokens(multi: &[Vec<u8>], alphabet: &[u8]) -> Vec<Vec<u8>> {
    let mut tokens: Vec<Vec<u8>> = alphabet.iter().map(|&b| vec![b]).collect();
    for token in multi {
        if !tokens.contains(token) {
            tokens.push(token.clone());
        }
    }
    tokens
}

/// Bytes the edge patterns use, including partial UTF-8 sequences via the multi-byte chars.
fn alphabet() -> Vec<u8> {
    let text =
        "abcdexhloHELO0123456789.+-{}[]\\nu\": truefals,\u{1F608}\u{1F60A}\u{1F60D}\u{4E00}\u{4E2F}\u{e9}";
    let mut bytes: Vec<u8> = text.bytes().chain(0x80..=0xBF).collect();
    bytes.sort_unstable();
    bytes.dedup();
    bytes
}

fn multi_byte_token() -> impl Strategy<Value = Vec<u8>> {
    let pieces = prop::sample::select(vec![
        "a",
        "b",
        "ab",
        "bc",
        "c",
        "1",
        "12",
        ".5",
        "0",
        "x",
        "xx",
        "\u{1F608}",
        "\u{e9}",
        "\u{4E00}",
        "\"",
        "\": ",
        "true",
        "e",
        "cd",
        "He",
        "llo",
        "{\"a",
        ", \"b\": ",
        "}",
        "af",
    ]);
    (prop::collection::vec(pieces, 1..3), any::<bool>(), 0usize..4).prop_map(|(parts, cut, at)| {
        let mut bytes: Vec<u8> = parts.concat().into_bytes();
        // Sometimes cut inside a multi-byte character (byte-level BPE has such tokens).
        if cut && bytes.len() > 1 {
            let keep = 1 + at % (bytes.len() - 1);
            bytes.truncate(keep);
        }
        bytes
    })
}

fn check_walks(pattern: &str, multi: Vec<Vec<u8>>, seed: u64) -> Result<(), TestCaseError> {
    let tokens = vocabulary_tokens(&multi, &alphabet());
    let (vocab, eos) = vocab_with_eos(&tokens);
    let fsm = TokenFsm::from_regex(pattern, vocab.clone(), &CompileLimits::default()).unwrap();
    let oracle = Oracle::new(pattern);
    let full = regex::bytes::Regex::new(&format!("^(?:{pattern})$")).unwrap();
    let mut choose = chooser(seed);
    let mut words = vec![0i32; vocab.num_mask_words()];
    for _walk in 0..6 {
        let (mut state, mut oracle_state) = (fsm.start_state(), oracle.start);
        let mut text: Vec<u8> = Vec::new();
        for _step in 0..24 {
            fsm.fill_bitmask(state, &mut words).unwrap();
            let allowed = mask_ids(&words);
            let expected: Vec<u32> = (0..tokens.len() as u32)
                .filter(|&t| oracle.is_live(oracle.walk(oracle_state, &tokens[t as usize])))
                .chain(oracle.is_accepting(oracle_state).then_some(eos))
                .collect();
            prop_assert_eq!(&allowed, &expected, "pattern {:?} after {:?}", pattern, text);
            prop_assert_eq!(fsm.is_accepting(state).unwrap(), oracle.is_accepting(oracle_state));
            if allowed.is_empty() {
                prop_assert!(false, "dead end after {:?} in {:?}", text, pattern);
            }
            let token = allowed[choose(allowed.len())];
            if token == eos {
                prop_assert!(full.is_match(&text), "EOS after non-match {:?} for {:?}", text, pattern);
                prop_assert!(fsm.is_terminal(fsm.advance(state, eos).unwrap()));
                break;
            }
            let bytes = &tokens[token as usize];
            state = fsm.advance(state, token).unwrap();
            oracle_state = oracle.walk(oracle_state, bytes);
            text.extend_from_slice(bytes);
        }
    }
    fsm.check_invariants().map_err(|e| TestCaseError::fail(e.to_string()))?;
    Ok(())
}

fn check_completeness(pattern: &str, multi: Vec<Vec<u8>>, seed: u64) -> Result<(), TestCaseError> {
    let tokens = vocabulary_tokens(&multi, &alphabet());
    let (vocab, eos) = vocab_with_eos(&tokens);
    let fsm = TokenFsm::from_regex(pattern, vocab, &CompileLimits::default()).unwrap();
    let oracle = Oracle::new(pattern);
    let mut choose = chooser(seed);
    for _ in 0..8 {
        let Some(text) = oracle.random_completion(oracle.start, 12, &alphabet(), &mut choose) else {
            continue;
        };
        // A random tokenization: at each position any token that spells the next bytes.
        let mut state = fsm.start_state();
        let mut at = 0;
        while at < text.len() {
            let fits: Vec<usize> =
                (0..tokens.len()).filter(|&t| text[at..].starts_with(&tokens[t])).collect();
            prop_assert!(!fits.is_empty(), "no token spells {:?}", &text[at..]);
            let token = fits[choose(fits.len())];
            let next = fsm.try_advance(state, token as u32).unwrap();
            prop_assert!(next.is_some(), "{:?}: token {:?} refused at {}", pattern, tokens[token], at);
            state = next.unwrap();
            at += tokens[token].len();
        }
        prop_assert!(fsm.is_accepting(state).unwrap(), "{:?} not accepted: {:?}", pattern, text);
        prop_assert!(fsm.allowed_token_ids(state).unwrap().contains(&eos));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn masks_equal_the_oracle_on_edge_patterns(
        index in 0..EDGE_PATTERNS.len(),
        multi in prop::collection::vec(multi_byte_token(), 0..12),
        seed in any::<u64>(),
    ) {
        check_walks(EDGE_PATTERNS[index], multi, seed)?;
    }

    #[test]
    fn every_match_is_producible(
        index in 0..EDGE_PATTERNS.len(),
        multi in prop::collection::vec(multi_byte_token(), 0..12),
        seed in any::<u64>(),
    ) {
        check_completeness(EDGE_PATTERNS[index], multi, seed)?;
    }

    #[test]
    fn masks_equal_the_oracle_on_random_patterns(
        pattern in random_pattern(),
        multi in prop::collection::vec(multi_byte_token(), 0..8),
        seed in any::<u64>(),
    ) {
        check_walks(&pattern, multi.clone(), seed)?;
        check_completeness(&pattern, multi, seed)?;
    }
}

/// Small random regexes over the test alphabet.
fn random_pattern() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(vec![
        "a",
        "b",
        "c",
        "ab",
        "[a-c]",
        "[0-9]",
        "\u{e9}",
        "[\u{1F608}-\u{1F60A}]",
        "x",
        "\\.",
        "",
    ])
    .prop_map(String::from);
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| v.concat()),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|v| format!("(?:{})", v.join("|"))),
            (inner.clone(), prop::sample::select(vec!["*", "+", "?", "{1,3}", "{2}", "??", "+?"]))
                .prop_map(|(r, q)| format!("(?:{r}){q}")),
        ]
    })
}

#[test]
fn special_tokens_are_never_allowed_and_eos_only_when_accepting() {
    let tokens: Vec<Option<Vec<u8>>> = vec![
        Some(b"1".to_vec()),
        Some(b"12".to_vec()),
        None, // special
        Some(b"<|x|>".to_vec()),
        Some(b"x".to_vec()),
    ];
    let vocab = std::sync::Arc::new(sglr_vocab::Vocabulary::new(tokens, vec![3]).unwrap());
    let fsm = TokenFsm::from_regex("[0-9]+", vocab, &CompileLimits::default()).unwrap();
    assert_eq!(fsm.allowed_token_ids(fsm.start_state()).unwrap(), vec![0, 1]);
    let after = fsm.advance(fsm.start_state(), 1).unwrap();
    assert_eq!(fsm.allowed_token_ids(after).unwrap(), vec![0, 1, 3]);
    assert!(fsm.try_advance(after, 2).unwrap().is_none());
    let done = fsm.advance(after, 3).unwrap();
    assert!(fsm.is_terminal(done) && fsm.is_accepting(done).unwrap());
    assert_eq!(fsm.allowed_token_ids(done).unwrap(), vec![3]);
    assert!(fsm.try_advance(done, 0).unwrap().is_none());
    assert!(fsm.try_advance(fsm.start_state(), 3).unwrap().is_none());
}

#[test]
fn bad_states_tokens_and_buffers_are_typed_errors() {
    use sglr_fsm::FsmError;
    let (vocab, _) = vocab_with_eos(&[b"a".to_vec()]);
    let fsm = TokenFsm::from_regex("a+", vocab, &CompileLimits::default()).unwrap();
    assert!(matches!(fsm.advance(99, 0), Err(FsmError::UnknownState { .. })));
    assert!(matches!(fsm.advance(0, 7), Err(FsmError::TokenOutOfRange { .. })));
    assert!(matches!(fsm.fill_bitmask(0, &mut []), Err(FsmError::BitmaskTooSmall { .. })));
    let mut padded = vec![-1i32; 3];
    fsm.fill_bitmask(0, &mut padded).unwrap();
    assert_eq!(padded, vec![1, 0, 0]);
}

#[test]
fn string_bodies_share_one_component_walk() {
    let tokens: Vec<Vec<u8>> = (0x20..0x7Fu8)
        .map(|b| vec![b])
        .chain(["ab", "\",", ", ", "x\"y", r"\u00e9", "\u{e9}"].map(|t| t.as_bytes().to_vec()))
        .collect();
    let (vocab, _) = vocab_with_eos(&tokens);
    let body = r#""(?:[^"\\]|\\["\\n]|\\u[0-9a-f]{4})*""#;
    let pattern = format!(r#"\{{"a": {body}, "b": {body}\}}"#);
    let fsm = TokenFsm::from_regex(&pattern, vocab.clone(), &CompileLimits::default()).unwrap();
    let mut words = vec![0i32; vocab.num_mask_words()];
    let first_body = fsm.advance_bytes(fsm.start_state(), br#"{"a": ""#).unwrap().unwrap();
    let second_body = fsm.advance_bytes(first_body, br#"x", "b": ""#).unwrap().unwrap();
    assert_ne!(first_body, second_body);
    fsm.fill_bitmask(first_body, &mut words).unwrap();
    let cached = vocab.num_shared_walks();
    assert!(cached >= 1);
    fsm.fill_bitmask(second_body, &mut words).unwrap();
    assert_eq!(vocab.num_shared_walks(), cached, "the second body reuses the first walk");
    // Rows built through the shared walk equal fresh whole-trie walks.
    fsm.check_invariants().unwrap();
    let closing = tokens.iter().position(|t| t == b"\",").unwrap() as u32;
    assert!(!mask_ids(&words).contains(&closing), "\"b\" is the last field: no comma");
    fsm.fill_bitmask(first_body, &mut words).unwrap();
    assert!(mask_ids(&words).contains(&closing));
}
