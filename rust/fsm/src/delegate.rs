//! Rows borrowed from a loop state: when most first bytes take state s to one state L that
//! loops on those same bytes (a key-name prefix inside a free-text key, the first character of
//! a `[a-z]+` run), every token starting with such a byte is allowed from s exactly when it is
//! allowed from L. More generally, any first byte b with next(s, b) = next(L, b) leaves both in
//! the same state (a UTF-8 lead byte inside a key that has left every declared name, the closing
//! quote), so its tokens too are allowed from s exactly when from L. The row of s is then L's
//! row restricted to those first bytes, plus short walks under the remaining first bytes,
//! instead of a whole-vocabulary walk.

use crate::dfa::{ByteDfa, DEAD};
use sglr_vocab::Vocabulary;

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
    // NOTE: counted per byte class (a handful of distinct targets), not per byte: this runs
    // for every lexeme state whose mask is computed.
    let mut counts: Vec<(u32, usize)> = Vec::new();
    for (target, num_bytes) in dfa.class_targets(state) {
        if target == DEAD {
            continue;
        }
        match counts.iter_mut().find(|(t, _)| *t == target) {
            Some((_, count)) => *count += usize::from(num_bytes),
            None => counts.push((target, usize::from(num_bytes))),
        }
    }
    counts.into_iter().min_by_key(|&(target, count)| (std::cmp::Reverse(count), target))
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

/// The row of `state` from the donor's `donor_words` (its full bitmask), walking the trie in
/// lockstep from both states: below any node where the two runs meet (the same state, or both
/// dead), the donor's bits are the state's, so only the paths where they differ are walked (a
/// declared name's spelling inside a free key, not every token that starts with its letter).
/// At the first level this hands over exactly `delegation`'s bytes.
pub(crate) fn delegated_row(
    dfa: &ByteDfa,
    vocab: &Vocabulary,
    state: u32,
    delegation: &Delegation,
    donor_words: &[u32],
    mask: &mut [u32],
) -> usize {
    mask.copy_from_slice(donor_words);
    let trie = vocab.trie();
    let nodes = &trie.nodes;
    let token_ids = &trie.token_ids;
    let mut own = vec![DEAD; trie.max_depth + 1];
    let mut donor = vec![DEAD; trie.max_depth + 1];
    own[0] = state;
    donor[0] = delegation.donor;
    let end = nodes[0].subtree_end as usize;
    let mut index = 1;
    while index < end {
        let node = nodes[index];
        let depth = node.depth as usize;
        let next = dfa.next(own[depth - 1], node.byte);
        let parent = donor[depth - 1];
        let donor_next = if parent == DEAD { DEAD } else { dfa.next(parent, node.byte) };
        let subtree_end = node.subtree_end as usize;
        if next == donor_next {
            index = subtree_end;
            continue;
        }
        if next == DEAD {
            // NOTE: the donor may allow some of these tokens; none is allowed from here.
            let stop = nodes[subtree_end].token_start as usize;
            for &token in &token_ids[node.token_start as usize..stop] {
                mask[token as usize >> 5] &= !(1 << (token & 31));
            }
            index = subtree_end;
            continue;
        }
        // Live from here whatever the donor does at this node: the tokens ending here are
        // allowed; those below are decided one level down.
        let stop = nodes[index + 1].token_start as usize;
        for &token in &token_ids[node.token_start as usize..stop] {
            mask[token as usize >> 5] |= 1 << (token & 31);
        }
        own[depth] = next;
        donor[depth] = donor_next;
        index += 1;
    }
    crate::row::count_bits(mask)
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
        let texts = [
            "\"", "a", "ab", "abc", "\":", "b\"", "é", "éa", "日本", "\\", "\\n", "\\u00e9", "x", "ca", " ",
            // Runs that leave a name deeper down, or end it: the lockstep walk meets the donor
            // below the first byte.
            "abx", "abcx", "abc\"", "ab\"", "ax\"", "éab", "éé", "bc", "abc\":",
        ];
        let mut tokens: Vec<Option<Vec<u8>>> = texts.iter().map(|t| Some(t.as_bytes().to_vec())).collect();
        tokens.push(None);
        let vocab = Vocabulary::new(tokens, vec![texts.len() as u32]).unwrap();
        let dfa = crate::json::undeclared_key_dfa(&["abc", "é"], 1 << 16).unwrap();
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
            crate::walk::walk_allowed(&dfa, vocab.trie(), state, &mut plain, None);
            let mut donor_words = vec![0u32; vocab.num_mask_words()];
            crate::walk::walk_allowed(&dfa, vocab.trie(), found.donor, &mut donor_words, None);
            let mut mask = vec![u32::MAX; vocab.num_mask_words()];
            let counted = delegated_row(&dfa, &vocab, state, &found, &donor_words, &mut mask);
            assert_eq!(mask, plain, "state {state}");
            assert_eq!(counted, plain.iter().map(|w| w.count_ones() as usize).sum::<usize>());
        }
        assert!(delegating > 1);
    }
}
