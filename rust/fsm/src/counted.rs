//! Counted repetition built directly: `open unit{min,max} close` as (count, unit state) pairs.
//!
//! A regex spells `X{0,10000}` as ten thousand copies of `X` and determinization then pays for
//! each copy's states (about 6 µs a state here: a JSON string with `maxLength` 10,000 took about
//! a second). When `unit` is a prefix-free code (no word of it extends another: one JSON string
//! character, escapes and UTF-8 included), the count of units read so far and the unit's own state
//! are all a DFA needs to know, so the table is written row by row in time linear in its size.

use crate::dfa::classes::{classes_by_signature, ByteClasses};
use crate::dfa::{ByteDfa, DEAD};
use crate::error::FsmError;

impl ByteDfa {
    /// The DFA of `open`, then `min` to `max` (`None`: no upper bound) words of `unit`, then
    /// `close`. `unit` must be a prefix-free code without the empty word, and `close` must not
    /// start like a unit (so where the units end is never a choice); otherwise `UnsupportedRegex`.
    /// `AutomatonTooLarge` past `max_states` states; `EmptyLanguage` when `max < min`.
    pub fn counted(
        unit: &ByteDfa,
        min: usize,
        max: Option<usize>,
        open: &[u8],
        close: &[u8],
        max_states: usize,
    ) -> Result<ByteDfa, FsmError> {
        if max.is_some_and(|max| max < min) {
            return Err(FsmError::EmptyLanguage);
        }
        check_unit(unit, close)?;
        // Unit states inside a word (accepting ones are the word's end: the next count's start).
        let mut inner = vec![DEAD; unit.num_states()];
        let mut num_inner = 0usize;
        for state in 0..unit.num_states() as u32 {
            if !unit.is_accepting(state) {
                inner[state as usize] = num_inner as u32;
                num_inner += 1;
            }
        }
        let start = inner[unit.start() as usize] as usize;
        // Counts 0..top each hold every inner state. The top count (`max`, or `min` when there
        // is no upper bound) holds only its start: bounded, no word may begin there; unbounded,
        // a word begun there goes on like one begun a count lower (both end at the top count),
        // so it borrows that count's inner states. With neither bound (`{0,}`) count 0 loops.
        let top = max.unwrap_or(min);
        let too_large = FsmError::AutomatonTooLarge { what: "counted DFA", limit: max_states };
        let top_states = if max.is_none() && top == 0 { num_inner } else { 1 };
        let num_states =
            (top as u128) * num_inner as u128 + top_states as u128 + open.len() as u128 + close.len() as u128;
        if num_states > max_states as u128 {
            return Err(too_large);
        }
        let num_states = num_states as usize;
        let (classes, num_classes, class_len, class_byte) = refine_classes(unit, open, close);
        let body = open.len();
        let base = |count: usize| body + count * num_inner;
        let after_body = base(top) + top_states;
        // `close[..j]` read (j >= 1) is state after_body + j - 1; the last state is the final one.
        let final_state = num_states.wrapping_sub(1);
        let closed = |j: usize| if j == close.len() { final_state } else { after_body + j - 1 };
        // Each inner state's row, relative: `Ok(t)` stays in the word at inner state t,
        // `Err(true)` ends the word, `Err(false)` is dead.
        let template: Vec<Result<u32, bool>> = (0..unit.num_states() as u32)
            .filter(|&state| !unit.is_accepting(state))
            .flat_map(|state| {
                class_byte.iter().map(move |&byte| match unit.next(state, byte) {
                    DEAD => Err(false),
                    next if unit.is_accepting(next) => Err(true),
                    next => Ok(next),
                })
            })
            .map(|outcome| outcome.map(|next| inner[next as usize]))
            .collect();
        let mut trans = vec![DEAD; num_states * num_classes];
        let mut accepting = vec![false; num_states];
        let class_of = |byte: u8| classes[byte as usize] as usize;
        for (i, &byte) in open.iter().enumerate() {
            trans[i * num_classes + class_of(byte)] = (i + 1) as u32;
        }
        // Row of inner state `state` of a word begun at count `words_from` that, once ended,
        // enters count `ended` (at its start: the first state of that count's block).
        let mut fill = |row: usize, state: usize, words_from: usize, ended: usize| {
            let relative = &template[state * num_classes..][..num_classes];
            for (slot, outcome) in trans[row..row + num_classes].iter_mut().zip(relative) {
                *slot = match *outcome {
                    Ok(next) => (base(words_from) + next as usize) as u32,
                    Err(true) => base(ended) as u32,
                    Err(false) => DEAD,
                };
            }
        };
        for count in 0..top {
            for state in 0..num_inner {
                fill((base(count) + state) * num_classes, state, count, count + 1);
            }
        }
        match (max, top) {
            (Some(_), _) => {}
            (None, 0) => (0..num_inner).for_each(|state| fill((base(0) + state) * num_classes, state, 0, 0)),
            (None, _) => fill(base(top) * num_classes, start, top - 1, top),
        }
        for count in min..=top {
            let row = base(count) + start;
            match close.first() {
                Some(&byte) => trans[row * num_classes + class_of(byte)] = closed(1) as u32,
                None => accepting[row] = true,
            }
        }
        for j in 1..close.len() {
            trans[closed(j) * num_classes + class_of(close[j])] = closed(j + 1) as u32;
        }
        if !close.is_empty() {
            accepting[final_state] = true;
        }
        ByteDfa::from_live_table(classes, num_classes, class_len, class_byte, trans, accepting)
    }
}

/// A unit whose words are a prefix-free code without the empty word, and a close that cannot
/// start a word.
fn check_unit(unit: &ByteDfa, close: &[u8]) -> Result<(), FsmError> {
    if unit.is_accepting(unit.start()) {
        return Err(FsmError::UnsupportedRegex("a counted unit must not match the empty string".into()));
    }
    let extends =
        (0..unit.num_states() as u32).any(|s| unit.is_accepting(s) && unit.successors(s).next().is_some());
    if extends {
        return Err(FsmError::UnsupportedRegex("a counted unit must be a prefix-free code".into()));
    }
    if close.first().is_some_and(|&byte| unit.next(unit.start(), byte) != DEAD) {
        return Err(FsmError::UnsupportedRegex("the closing bytes must not start a counted unit".into()));
    }
    Ok(())
}

/// The unit's byte classes, with each byte of `open` and `close` in a class of its own.
fn refine_classes(unit: &ByteDfa, open: &[u8], close: &[u8]) -> ByteClasses {
    let mut special = [u16::MAX; 256];
    for (i, &byte) in open.iter().chain(close).enumerate() {
        if special[byte as usize] == u16::MAX {
            special[byte as usize] = i as u16;
        }
    }
    classes_by_signature(|byte| (unit.class_of(byte), special[byte as usize]))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::dfa::CompileLimits;

    const STRING_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;

    fn dfa(pattern: &str) -> ByteDfa {
        ByteDfa::build(pattern, &CompileLimits::default()).unwrap()
    }

    fn full_match(dfa: &ByteDfa, text: &[u8]) -> bool {
        dfa.matches(text)
    }

    fn regex_of(min: usize, max: Option<usize>) -> String {
        match max {
            Some(max) => format!("\"{STRING_CHAR}{{{min},{max}}}\""),
            None => format!("\"{STRING_CHAR}{{{min},}}\""),
        }
    }

    #[test]
    fn json_strings_by_length() {
        let unit = dfa(STRING_CHAR);
        let counted = ByteDfa::counted(&unit, 1, Some(3), b"\"", b"\"", 1 << 20).unwrap();
        for (text, expected) in [
            (&b"\"\""[..], false),
            (b"\"a\"", true),
            (b"\"abc\"", true),
            (b"\"abcd\"", false),
            (b"\"\\u00e9\\n\"", true),
            ("\"é€😀\"".as_bytes(), true),
            ("\"é€😀x\"".as_bytes(), false),
            (b"\"a\"\"", false),
            (b"\"\\x\"", false),
        ] {
            assert_eq!(full_match(&counted, text), expected, "{}", String::from_utf8_lossy(text));
        }
        // As small as the regex's own DFA, every state live (built so, not pruned).
        assert_eq!(counted.num_states(), dfa(&regex_of(1, Some(3))).num_states());
        for (min, max) in [(0, Some(0)), (0, Some(2)), (2, Some(2)), (0, None), (3, None)] {
            let counted = ByteDfa::counted(&unit, min, max, b"\"", b"\"", 1 << 20).unwrap();
            assert!(counted.accept_distances().iter().all(|&d| d != u16::MAX), "{min} {max:?}");
            assert_eq!(counted.num_states(), dfa(&regex_of(min, max)).num_states(), "{min} {max:?}");
        }
    }

    #[test]
    fn no_upper_bound_loops_at_the_lower_one() {
        let unit = dfa(STRING_CHAR);
        let counted = ByteDfa::counted(&unit, 2, None, b"\"", b"\"", 1 << 20).unwrap();
        assert!(!full_match(&counted, b"\"a\""));
        assert!(full_match(&counted, b"\"ab\""));
        assert!(full_match(&counted, "\"abcdefghijé\"".as_bytes()));
    }

    #[test]
    fn refusals_are_typed() {
        let unit = dfa(STRING_CHAR);
        assert_eq!(
            ByteDfa::counted(&unit, 3, Some(2), b"\"", b"\"", 1 << 20).unwrap_err(),
            FsmError::EmptyLanguage
        );
        assert!(matches!(
            ByteDfa::counted(&unit, 0, Some(100_000), b"\"", b"\"", 1 << 16),
            Err(FsmError::AutomatonTooLarge { .. })
        ));
        // `a|ab` is not prefix-free; `"` starts a unit of `[a"]`.
        assert!(matches!(
            ByteDfa::counted(&dfa("a|ab"), 0, Some(2), b"", b"", 1 << 20),
            Err(FsmError::UnsupportedRegex(_))
        ));
        assert!(matches!(
            ByteDfa::counted(&dfa("[a\"]"), 0, Some(2), b"", b"\"", 1 << 20),
            Err(FsmError::UnsupportedRegex(_))
        ));
        assert!(matches!(
            ByteDfa::counted(&dfa("a?"), 0, Some(2), b"", b"", 1 << 20),
            Err(FsmError::UnsupportedRegex(_))
        ));
    }

    fn json_char() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z\"\\\\/]".prop_map(|c| c.to_string()),
            Just("\\n".to_string()),
            Just("\\u00e9".to_string()),
            Just("\\u12".to_string()),
            Just("é".to_string()),
            Just("😀".to_string()),
            Just("\\".to_string()),
            Just("\u{1}".to_string()),
        ]
    }

    proptest! {
        /// The counted DFA accepts exactly what the regex `"CHAR{min,max}"` accepts.
        #[test]
        fn agrees_with_the_unrolled_regex(
            min in 0usize..5,
            extra in proptest::option::of(0usize..5),
            chars in proptest::collection::vec(json_char(), 0..8),
            quoted in any::<bool>(),
        ) {
            let max = extra.map(|extra| min + extra);
            let body: String = chars.concat();
            let text = if quoted { format!("\"{body}\"") } else { body };
            let counted = ByteDfa::counted(&dfa(STRING_CHAR), min, max, b"\"", b"\"", 1 << 20).unwrap();
            let unrolled = dfa(&regex_of(min, max));
            prop_assert_eq!(full_match(&counted, text.as_bytes()), full_match(&unrolled, text.as_bytes()));
            // The walk of any prefix agrees on liveness.
            for cut in 0..=text.len() {
                let a = counted.walk(counted.start(), &text.as_bytes()[..cut]);
                let b = unrolled.walk(unrolled.start(), &text.as_bytes()[..cut]);
                prop_assert_eq!(a == DEAD, b == DEAD);
            }
        }
    }
}
