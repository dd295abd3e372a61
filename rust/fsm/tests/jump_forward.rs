//! Jump-forward strings against a brute-force search over all 256 bytes of the oracle DFA.

mod common;

use common::{chooser, vocab_with_eos, Oracle, EDGE_PATTERNS};
use proptest::prelude::*;
use sglr_fsm::{CompileLimits, TokenFsm};

/// Longest byte string every continuation from `state` starts with: follow states with exactly
/// one live byte, never past an accepting state (stopping there is the other option).
fn brute_force_forced(oracle: &Oracle, mut state: regex_automata::util::primitives::StateID) -> Vec<u8> {
    let mut forced = Vec::new();
    while !oracle.is_accepting(state) {
        let live = oracle.live_bytes(state);
        if live.len() != 1 {
            break;
        }
        forced.push(live[0]);
        state = oracle.step(state, live[0]);
    }
    // Drop a trailing character that starts inside the string but is not complete.
    let mut i = 0;
    while i < forced.len() {
        let lead = forced[i];
        let char_len = if lead < 0x80 {
            1
        } else if lead >= 0xF0 {
            4
        } else if lead >= 0xE0 {
            3
        } else if lead >= 0xC0 {
            2
        } else {
            1
        };
        if i + char_len > forced.len() {
            forced.truncate(i);
            break;
        }
        i += char_len;
    }
    forced
}

fn check_jumps(pattern: &str, seed: u64) -> Result<(), TestCaseError> {
    let tokens: Vec<Vec<u8>> =
        (0..=255u8).map(|b| vec![b]).chain([b"ab".to_vec(), "\u{1F608}".as_bytes()[..2].to_vec()]).collect();
    let (vocab, eos) = vocab_with_eos(&tokens);
    let fsm = TokenFsm::from_regex(pattern, vocab, &CompileLimits::default()).unwrap();
    let oracle = Oracle::new(pattern);
    let mut choose = chooser(seed);
    for _ in 0..4 {
        let (mut state, mut oracle_state) = (fsm.start_state(), oracle.start);
        for _ in 0..16 {
            let jump = fsm.jump_forward(state).unwrap();
            prop_assert_eq!(&jump.bytes, &brute_force_forced(&oracle, oracle_state), "{:?}", pattern);
            prop_assert_eq!(fsm.advance_bytes(state, &jump.bytes).unwrap(), Some(jump.state));
            // Every sampled full continuation starts with the forced string.
            for _ in 0..3 {
                if let Some(rest) =
                    oracle.random_completion(oracle_state, 8, &(0..=255).collect::<Vec<u8>>(), &mut choose)
                {
                    prop_assert!(
                        rest.starts_with(&jump.bytes),
                        "{:?}: {:?} vs {:?}",
                        pattern,
                        rest,
                        jump.bytes
                    );
                }
            }
            let allowed = fsm.allowed_token_ids(state).unwrap();
            let token = allowed[choose(allowed.len())];
            if token == eos {
                break;
            }
            oracle_state = oracle.walk(oracle_state, &tokens[token as usize]);
            state = fsm.advance(state, token).unwrap();
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn jump_forward_finds_every_forced_span(index in 0..EDGE_PATTERNS.len(), seed in any::<u64>()) {
        check_jumps(EDGE_PATTERNS[index], seed)?;
    }

    #[test]
    fn jump_forward_on_literal_heavy_patterns(
        index in 0..FORCED_PATTERNS.len(),
        seed in any::<u64>(),
    ) {
        check_jumps(FORCED_PATTERNS[index], seed)?;
    }
}

const FORCED_PATTERNS: &[&str] = &[
    r#"\{"name": "[a-z]{1,4}", "age": [0-9]{1,2}\}"#,
    "prefix-(one|two)-suffix",
    "\u{1F608}\u{1F609}x|\u{1F608}\u{1F60A}y",
    "abc(d|$)",
    "(ab)+c",
    "\u{4E00}\u{4E01}[\u{4E02}\u{4E03}]",
];

#[test]
fn forced_strings_on_known_states() {
    let tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let (vocab, _) = vocab_with_eos(&tokens);
    let fsm = TokenFsm::from_regex(r#"\{"name": "[a-z]+"\}"#, vocab, &CompileLimits::default()).unwrap();
    let jump = fsm.jump_forward(fsm.start_state()).unwrap();
    assert_eq!(jump.bytes, br#"{"name": ""#);
    assert!(fsm.jump_forward(jump.state).unwrap().bytes.is_empty());
    // Never past an accepting state.
    let fsm = TokenFsm::from_regex("ab(cd)?", fsm.vocabulary().clone(), &CompileLimits::default()).unwrap();
    let jump = fsm.jump_forward(fsm.start_state()).unwrap();
    assert_eq!(jump.bytes, b"ab");
    assert!(fsm.is_accepting(jump.state).unwrap());
    assert!(fsm.jump_forward(jump.state).unwrap().bytes.is_empty());
    // Never into a partial character: the emoji differ only in their last byte.
    let fsm =
        TokenFsm::from_regex("x[\u{1F608}\u{1F609}]", fsm.vocabulary().clone(), &CompileLimits::default())
            .unwrap();
    assert_eq!(fsm.jump_forward(fsm.start_state()).unwrap().bytes, b"x");
}
