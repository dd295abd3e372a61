//! Rows borrowed from a loop state: when most first bytes take state s to one state L that
//! loops on those same bytes (a key-name prefix inside a free-text key, the first character of
//! a `[a-z]+` run), every token starting with such a byte is allowed from s exactly when it is
//! allowed from L. More generally, any first byte b with next(s, b) = next(L, b) leaves both in
//! the same state (a UTF-8 lead byte inside a key that has left every declared name, the closing
//! quote), so its tokens too are allowed from s exactly when from L. The row of s is then L's
//! row restricted to those first bytes, plus short walks under the remaining first bytes,
//! instead of a whole-vocabulary walk.

use crate::dfa::{ByteDfa, DEAD};
use crate::vocab::Vocabulary;
use crate::walk::{allow_tokens_at, walk_below};

/// Fewest first bytes worth delegating.
const MIN_DELEGATED_BYTES: usize = 48;

/// A state's donor, and the first bytes it hands over: from the state, each such byte leads to
/// the state the donor's does, so every token starting with one behaves from the state exactly
/// as from the donor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delegation {
    pub donor: u32,
    /// Bit b set: first byte b is delegated.
    pub bytes: [u64; 4],
}

impl Delegation {
    /// Whether first byte `byte` is handed to the donor.
    pub fn contains(&self, byte: u16) -> bool {
        byte < 256 && self.bytes[byte as usize >> 6] & (1 << (byte & 63)) != 0
    }
}

/// The state most bytes lead to from `state`, if any (ties: lowest id).
fn main_target(dfa: &ByteDfa, state: u32) -> Option<(u32, usize)> {
    let mut targets: Vec<u32> = (0..=255u8).map(|b| dfa.next(state, b)).filter(|&t| t != DEAD).collect();
    targets.sort_unstable();
    let mut best: Option<(u32, usize)> = None;
    for run in targets.chunk_by(|a, b| a == b) {
        if best.is_none_or(|(_, count)| run.len() > count) {
            best = Some((run[0], run.len()));
        }
    }
    best
}

/// A donor for `state`: a state L (not `state`) whose own main target is itself, reached from
/// `state` by at least `MIN_DELEGATED_BYTES` bytes on which L loops. Donors never delegate
/// themselves, so rows never wait on each other in a cycle. Handed over: every live first byte
/// that takes `state` where it takes L (the loop bytes among them).
pub(crate) fn delegation(dfa: &ByteDfa, state: u32) -> Option<Delegation> {
    let (donor, _) = main_target(dfa, state)?;
    if donor == state || main_target(dfa, donor).map(|(t, _)| t) != Some(donor) {
        return None;
    }
    let mut bytes = [0u64; 4];
    let mut num_loop_bytes = 0;
    for byte in 0..=255u8 {
        let target = dfa.next(state, byte);
        // NOTE: a byte dead from both needs no walk either way; it stays with the state so
        // that the delegated set is what the donor's row is read for.
        if target != DEAD && target == dfa.next(donor, byte) {
            bytes[byte as usize >> 6] |= 1 << (byte & 63);
            num_loop_bytes += usize::from(target == donor);
        }
    }
    (num_loop_bytes >= MIN_DELEGATED_BYTES).then_some(Delegation { donor, bytes })
}

/// Whether `state` would delegate (donor rows are computed directly, never delegated).
pub(crate) fn is_donor(dfa: &ByteDfa, state: u32) -> bool {
    main_target(dfa, state).map(|(t, _)| t) == Some(state)
}

/// The row of `state` from the donor's `donor_words` (its full bitmask): donor bits of tokens
/// whose first byte is delegated, plus walks under every other first byte.
pub(crate) fn delegated_row(
    dfa: &ByteDfa,
    vocab: &Vocabulary,
    state: u32,
    delegation: &Delegation,
    donor_words: &[u32],
    mask: &mut [u32],
) -> usize {
    // NOTE: the donor's row, less every token under a first byte that is not delegated (few
    // bytes, so clearing their tokens costs far less than testing each of the donor's bits).
    mask.copy_from_slice(donor_words);
    let trie = &vocab.trie;
    let end = trie.nodes[0].subtree_end as usize;
    let mut child = 1;
    while child < end {
        let node = trie.nodes[child];
        if !delegation.contains(node.byte as u16) {
            let start = node.token_start as usize;
            let stop = trie.nodes[node.subtree_end as usize].token_start as usize;
            for &token in &trie.token_ids[start..stop] {
                mask[token as usize >> 5] &= !(1 << (token & 31));
            }
        }
        child = node.subtree_end as usize;
    }
    let mut num_allowed: usize = mask.iter().map(|w| w.count_ones() as usize).sum();
    let mut stack = vec![DEAD; trie.max_depth + 1];
    let mut child = 1;
    while child < end {
        let node = trie.nodes[child];
        let next_child = node.subtree_end as usize;
        if !delegation.contains(node.byte as u16) {
            let target = dfa.next(state, node.byte);
            if target != DEAD {
                num_allowed += allow_tokens_at(trie, child, mask);
                num_allowed += walk_below(dfa, trie, child, target, mask, &mut stack, None);
            }
        }
        child = next_child;
    }
    num_allowed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::CompileLimits;

    #[test]
    fn a_plus_run_start_delegates_to_its_loop() {
        let dfa = ByteDfa::build(r#""[^"]+""#, &CompileLimits::default()).unwrap();
        let first = dfa.walk(dfa.start(), b"\"");
        let body = dfa.walk(first, b"x");
        assert!(is_donor(&dfa, body));
        let found = delegation(&dfa, first).expect("the first character delegates");
        assert_eq!(found.donor, body);
        assert!(found.contains(b'x' as u16) && !found.contains(b'"' as u16));
        assert!(delegation(&dfa, body).is_none());
        // A state without a dominant loop target does not delegate.
        let digits = ByteDfa::build("[0-9]{3}", &CompileLimits::default()).unwrap();
        assert!(delegation(&digits, digits.start()).is_none());
    }

    /// Inside a key spelling part of a declared name, UTF-8 lead bytes and the closing quote
    /// lead where they lead from the free body: they are handed over too, and every state's
    /// delegated row equals a plain walk over a vocabulary with multi-byte tokens.
    #[test]
    fn bytes_that_meet_the_donor_state_are_delegated() {
        let texts =
            ["\"", "a", "ab", "abc", "\":", "b\"", "é", "éa", "日本", "\\", "\\n", "\\u00e9", "x", "ca", " "];
        let mut tokens: Vec<Option<Vec<u8>>> = texts.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
        tokens.push(None);
        let vocab = Vocabulary::new(tokens, vec![texts.len() as u32]).unwrap();
        let dfa = crate::schema::undeclared_key_dfa(&["abc", "é"], 1 << 16).unwrap();
        let inside_name = dfa.walk(dfa.start(), b"\"ab");
        let found = delegation(&dfa, inside_name).expect("a declared name's prefix delegates");
        assert!(found.contains(0xE6) && found.contains(u16::from(b'"')), "lead byte and quote handed over");
        assert!(!found.contains(u16::from(b'c')), "the name's next byte is walked");
        let mut delegating = 0;
        for state in 0..dfa.num_states() as u32 {
            if is_donor(&dfa, state) {
                continue;
            }
            let Some(found) = delegation(&dfa, state) else { continue };
            delegating += 1;
            let mut plain = vec![0u32; vocab.num_mask_words()];
            crate::walk::walk_allowed(&dfa, &vocab.trie, state, &mut plain, None);
            let mut donor_words = vec![0u32; vocab.num_mask_words()];
            crate::walk::walk_allowed(&dfa, &vocab.trie, found.donor, &mut donor_words, None);
            let mut mask = vec![u32::MAX; vocab.num_mask_words()];
            let counted = delegated_row(&dfa, &vocab, state, &found, &donor_words, &mut mask);
            assert_eq!(mask, plain, "state {state}");
            assert_eq!(counted, plain.iter().map(|w| w.count_ones() as usize).sum::<usize>());
        }
        assert!(delegating > 1);
    }
}
