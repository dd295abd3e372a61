//! A DFA state's residual automaton written out canonically: two states (of one DFA or of
//! two) with equal signatures accept the same continuations, so whatever is computed from one
//! (its live tokens, its lexeme boundaries) holds for the other. Lexemes of different
//! schemas often end in the same residual (a free key's body, a string value's body), and a
//! result kept under this signature is computed once per vocabulary, not once per lexeme.

use crate::dfa::{ByteDfa, DEAD};

impl ByteDfa {
    /// The automaton reachable from `state`, its states numbered in breadth-first order (bytes
    /// ascending), each written as its accepting flag and its transitions as runs of bytes
    /// with one target; `None` when more than `max_states` states are reachable (the
    /// signature would cost more than what it saves).
    pub fn residual_signature(&self, state: u32, max_states: usize) -> Option<Vec<u8>> {
        let mut numbers: rustc_hash::FxHashMap<u32, u32> = rustc_hash::FxHashMap::default();
        let mut order = vec![state];
        numbers.insert(state, 0);
        let mut signature = Vec::new();
        // The byte ranges of equal class, in byte order: a state's target is constant on each,
        // so a state costs one step per range, not per byte.
        let mut class_runs: Vec<(u8, u8)> = Vec::new();
        for byte in 0..=255u8 {
            let class = self.classes[byte as usize];
            if class_runs.last().is_none_or(|&(_, last)| last != class) {
                class_runs.push((byte, class));
            }
        }
        let mut next_index = 0;
        while next_index < order.len() {
            let current = order[next_index];
            next_index += 1;
            let mut runs: Vec<(u8, u32)> = Vec::new();
            // Neighbouring ranges often share a target: its number is looked up once per run.
            let mut last_target = None;
            let mut last_number = None;
            let row = &self.trans[current as usize * self.num_classes..][..self.num_classes];
            for &(byte, class) in &class_runs {
                let target = row[class as usize];
                if last_target == Some(target) {
                    continue;
                }
                last_target = Some(target);
                let number = if target == DEAD {
                    u32::MAX
                } else {
                    let fresh = order.len() as u32;
                    let number = *numbers.entry(target).or_insert(fresh);
                    if number == fresh {
                        if order.len() == max_states {
                            return None;
                        }
                        order.push(target);
                    }
                    number
                };
                if last_number != Some(number) {
                    runs.push((byte, number));
                    last_number = Some(number);
                }
            }
            // One state: accepting flag, number of runs, then each run's first byte and target.
            signature.push(u8::from(self.is_accepting(current)));
            signature.extend_from_slice(&(runs.len() as u16).to_le_bytes());
            for (byte, number) in runs {
                signature.push(byte);
                signature.extend_from_slice(&number.to_le_bytes());
            }
        }
        Some(signature)
    }
}

#[cfg(test)]
mod tests {
    use crate::dfa::{ByteDfa, CompileLimits};

    fn dfa(pattern: &str) -> ByteDfa {
        ByteDfa::build(pattern, &CompileLimits::default()).unwrap()
    }

    #[test]
    fn equal_continuations_have_equal_signatures() {
        // The string body after a key prefix and after a value's opening quote.
        let key = dfa(r#""[^"\\]*""#);
        let value = dfa(r#"x: "[^"\\]*""#);
        let in_key = key.walk(key.start(), b"\"ab");
        let in_value = value.walk(value.start(), b"x: \"");
        assert_eq!(key.residual_signature(in_key, 64), value.residual_signature(in_value, 64));
        assert!(key.residual_signature(in_key, 64).is_some());
    }

    #[test]
    fn different_continuations_have_different_signatures() {
        let a = dfa(r#""[^"\\]*""#);
        let b = dfa(r#""[^"\\]*",?"#);
        let c = dfa(r#""[^"\\x]*""#);
        let in_a = a.walk(a.start(), b"\"");
        let in_b = b.walk(b.start(), b"\"");
        let in_c = c.walk(c.start(), b"\"");
        let sig = |d: &ByteDfa, s| d.residual_signature(s, 64).unwrap();
        assert_ne!(sig(&a, in_a), sig(&b, in_b));
        assert_ne!(sig(&a, in_a), sig(&c, in_c));
        assert_ne!(sig(&a, in_a), sig(&a, a.start()));
    }

    #[test]
    fn too_many_states_give_no_signature() {
        let digits = dfa("[0-9]{40}");
        assert!(digits.residual_signature(digits.start(), 16).is_none());
        assert!(digits.residual_signature(digits.start(), 64).is_some());
        let last = digits.walk(digits.start(), &[b'1'; 39]);
        assert!(digits.residual_signature(last, 3).is_some());
    }

    /// The signature as defined, byte by byte (the method steps once per range of equal
    /// class): both must write the same bytes for every state, whatever the class partition.
    fn signature_byte_by_byte(dfa: &ByteDfa, state: u32) -> Vec<u8> {
        let mut numbers = std::collections::HashMap::from([(state, 0u32)]);
        let mut order = vec![state];
        let mut signature = Vec::new();
        let mut next_index = 0;
        while next_index < order.len() {
            let current = order[next_index];
            next_index += 1;
            let mut runs: Vec<(u8, u32)> = Vec::new();
            for byte in 0..=255u8 {
                let target = dfa.next(current, byte);
                let number = if target == crate::dfa::DEAD {
                    u32::MAX
                } else {
                    let fresh = order.len() as u32;
                    *numbers.entry(target).or_insert_with(|| {
                        order.push(target);
                        fresh
                    })
                };
                if runs.last().is_none_or(|&(_, last)| last != number) {
                    runs.push((byte, number));
                }
            }
            signature.push(u8::from(dfa.is_accepting(current)));
            signature.extend_from_slice(&(runs.len() as u16).to_le_bytes());
            for (byte, number) in runs {
                signature.push(byte);
                signature.extend_from_slice(&number.to_le_bytes());
            }
        }
        signature
    }

    #[test]
    fn signatures_follow_the_definition() {
        let patterns = [
            r#""(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*""#,
            r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
            r#"\{"(?:name|nickname|id)": (?:true|false|null|[a-z]{1,5})\}"#,
            "[^x]y|x[0-9]z|é+",
        ];
        for pattern in patterns {
            let d = dfa(pattern);
            for state in 0..d.num_states() as u32 {
                assert_eq!(
                    d.residual_signature(state, usize::MAX).unwrap(),
                    signature_byte_by_byte(&d, state),
                    "{pattern} state {state}"
                );
            }
        }
    }
}
