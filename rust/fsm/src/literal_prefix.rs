//! The DFA of fixed bytes followed by another DFA's language, built directly: a declared JSON
//! key and its colon (`"name"[ ]?:[ ]?`) is a chain of the key's bytes in front of one shared
//! small automaton, where a regex build (parse, Thompson NFA, subset construction) cost about
//! 15 µs a key, paid by the first mask of every object.

use crate::dfa::classes::classes_refined;
use crate::dfa::{ByteDfa, DEAD};
use crate::error::FsmError;

impl ByteDfa {
    /// The language of `prefix` followed by any string `rest` accepts. States `0..prefix.len()`
    /// are the chain (one byte of `prefix` read per state), then `rest`'s, renumbered.
    pub fn literal_then(prefix: &[u8], rest: &ByteDfa) -> Result<ByteDfa, FsmError> {
        if prefix.is_empty() {
            return Ok(rest.clone());
        }
        // Classes: `rest`'s, with each byte of `prefix` in a class of its own (numbered in order
        // of first byte).
        let mut in_prefix = [false; 256];
        for &byte in prefix {
            in_prefix[byte as usize] = true;
        }
        let (classes, num_classes, class_len, class_byte) =
            classes_refined(rest, |byte| in_prefix[byte as usize]);
        let offset = prefix.len() as u32;
        let num_states = prefix.len() + rest.num_states();
        let mut trans = vec![DEAD; prefix.len() * num_classes];
        for (state, &byte) in prefix.iter().enumerate() {
            let next = if state + 1 == prefix.len() { rest.start() + offset } else { state as u32 + 1 };
            trans[state * num_classes + classes[byte as usize] as usize] = next;
        }
        trans.reserve(rest.num_states() * num_classes);
        let mut accepting = vec![false; prefix.len()];
        for state in 0..rest.num_states() as u32 {
            trans.extend(class_byte.iter().map(|&byte| match rest.next(state, byte) {
                DEAD => DEAD,
                next => next + offset,
            }));
            accepting.push(rest.is_accepting(state));
        }
        debug_assert_eq!(trans.len(), num_states * num_classes);
        // NOTE: every chain state leads to `rest`'s start, which is live (a `ByteDfa` holds
        // only live states), so the whole table is live.
        ByteDfa::from_live_table(classes, num_classes, class_len, class_byte, trans, accepting)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::dfa::CompileLimits;

    fn matches(dfa: &ByteDfa, text: &[u8]) -> bool {
        dfa.matches(text)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The same language as the regex of the escaped prefix followed by the rest.
        #[test]
        fn agrees_with_the_regex(
            prefix in proptest::collection::vec(prop::sample::select(b"\"ab: \\".to_vec()), 0..6),
            rest in prop::sample::select(vec!["(?:[ ]?):(?:[ ]?)", "a*", "[ab]+:", ""]),
            texts in proptest::collection::vec(proptest::collection::vec(prop::sample::select(b"\"ab: \\".to_vec()), 0..9), 0..12),
        ) {
            let limits = CompileLimits::default();
            let rest_dfa = ByteDfa::build(rest, &limits).unwrap();
            let direct = ByteDfa::literal_then(&prefix, &rest_dfa).unwrap();
            let prefix_text = std::str::from_utf8(&prefix).unwrap();
            let expected = ByteDfa::build(&format!("{}{rest}", regex_syntax::escape(prefix_text)), &limits).unwrap();
            prop_assert!(crate::dfa::every_state_is_live(&direct));
            for text in texts.iter().chain([prefix.clone()].iter()) {
                let mut full = prefix.clone();
                full.extend_from_slice(text);
                for candidate in [text, &full] {
                    prop_assert_eq!(matches(&direct, candidate), matches(&expected, candidate), "{:?}", candidate);
                    let (a, b) = (direct.walk(direct.start(), candidate), expected.walk(expected.start(), candidate));
                    prop_assert_eq!(a == DEAD, b == DEAD, "{:?}", candidate);
                }
            }
        }
    }
}
