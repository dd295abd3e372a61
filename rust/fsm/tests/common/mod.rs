//! Brute-force oracles shared by the integration tests.
//!
//! The oracle DFA is built directly with `regex-automata` (`MatchKind::All`, anchored) and
//! its liveness by a naive fixpoint over all 256 bytes: none of the FSM's own tables, byte
//! classes, trie or rows are involved.

#![allow(dead_code)]

use std::sync::Arc;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use sglr_vocab::Vocabulary;

pub struct Oracle {
    dfa: dense::DFA<Vec<u32>>,
    live: std::collections::HashSet<StateID>,
    pub start: StateID,
}

impl Oracle {
    pub fn new(pattern: &str) -> Self {
        let dfa = dense::Builder::new()
            .configure(dense::Config::new().match_kind(MatchKind::All).start_kind(StartKind::Anchored))
            .build(pattern)
            .expect("oracle pattern compiles");
        let start = dfa.start_state(&start::Config::new().anchored(Anchored::Yes)).unwrap();
        // All states reachable from the start.
        let mut states = vec![start];
        let mut seen: std::collections::HashSet<StateID> = [start].into();
        let mut i = 0;
        while i < states.len() {
            let s = states[i];
            i += 1;
            for b in 0..=255u8 {
                let n = dfa.next_state(s, b);
                if seen.insert(n) {
                    states.push(n);
                }
            }
        }
        let mut live: std::collections::HashSet<StateID> =
            states.iter().copied().filter(|&s| dfa.is_match_state(dfa.next_eoi_state(s))).collect();
        loop {
            let before = live.len();
            for &s in &states {
                if !live.contains(&s) && (0..=255u8).any(|b| live.contains(&dfa.next_state(s, b))) {
                    live.insert(s);
                }
            }
            if live.len() == before {
                break;
            }
        }
        Self { dfa, live, start }
    }

    pub fn step(&self, state: StateID, byte: u8) -> StateID {
        self.dfa.next_state(state, byte)
    }

    pub fn walk(&self, mut state: StateID, bytes: &[u8]) -> StateID {
        for &b in bytes {
            state = self.step(state, b);
        }
        state
    }

    pub fn is_live(&self, state: StateID) -> bool {
        self.live.contains(&state)
    }

    pub fn is_accepting(&self, state: StateID) -> bool {
        self.dfa.is_match_state(self.dfa.next_eoi_state(state))
    }

    /// Bytes that keep `state` live.
    pub fn live_bytes(&self, state: StateID) -> Vec<u8> {
        (0..=255u8).filter(|&b| self.is_live(self.step(state, b))).collect()
    }

    /// A random full match over `alphabet` continuing from `state` (`choose(n)` picks in `0..n`), stopping at
    /// an accepting state with probability about 1/3 and after at most `max_len` bytes when a
    /// stop is possible there.
    pub fn random_completion(
        &self,
        mut state: StateID,
        max_len: usize,
        alphabet: &[u8],
        choose: &mut dyn FnMut(usize) -> usize,
    ) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..max_len * 4 {
            if self.is_accepting(state) && (out.len() >= max_len || choose(3) == 0) {
                return Some(out);
            }
            let mut options = self.live_bytes(state);
            options.retain(|b| alphabet.contains(b));
            if options.is_empty() {
                return None;
            }
            let byte = options[choose(options.len())];
            out.push(byte);
            state = self.step(state, byte);
        }
        self.is_accepting(state).then_some(out)
    }
}

/// A vocabulary over `tokens` (ids in order) plus one EOS token at the end.
pub fn vocab_with_eos(tokens: &[Vec<u8>]) -> (Arc<Vocabulary>, u32) {
    let mut all: Vec<Option<Vec<u8>>> = tokens.iter().cloned().map(Some).collect();
    all.push(None);
    let eos = tokens.len() as u32;
    (Arc::new(Vocabulary::new(all, vec![eos]).unwrap()), eos)
}

/// Allowed token ids according to a bitmask row.
pub fn mask_ids(words: &[i32]) -> Vec<u32> {
    let mut ids = Vec::new();
    for (w, &word) in words.iter().enumerate() {
        for bit in 0..32 {
            if (word as u32) & (1 << bit) != 0 {
                ids.push(w as u32 * 32 + bit);
            }
        }
    }
    ids
}

/// Regexes that stress the two classic regex-automata pitfalls, UTF-8 and repetition.
pub const EDGE_PATTERNS: &[&str] = &[
    "a|ab",
    "ab|a",
    "a(bc)?",
    "a+?",
    "a(b)??",
    "(a|b)*c",
    r"[1-9][0-9]*(\.[0-9]+)?",
    r"[-+]?[0-9]+",
    "[\u{1F608}-\u{1F60D}]+",
    "[\u{4E00}-\u{4E2F}]{1,3}x",
    r"\d{1,4}?",
    "x{0,12}",
    "",
    "(ab|cd)*",
    "caf\u{e9}|cafe",
    r#"\{"a": "[^"]{0,3}", "b": (true|false)\}"#,
    "(?i)hello",
    "[^a]{2}b",
    ".{1,3}",
    r#""(?:[^"\\]|\\["\\n]|\\u[0-9a-f]{4})*", "[^"\x00-\x1F]*""#,
    r#"\[(?:"[^"]*"(?:, "[^"]*")*)?\]"#,
    r#""[^"]+""#,
    r#"\{(?:"name"|"nam[^"]*"|"[^"]*"): 1\}"#,
];

/// A seeded choice of an index below `n` (0 for `n` = 0), for random walks the tests repeat.
pub fn chooser(seed: u64) -> impl FnMut(usize) -> usize {
    let mut rng = seed;
    move |n: usize| {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((rng >> 33) as usize) % n.max(1)
    }
}
