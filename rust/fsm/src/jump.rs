//! Compressed edges for jump-forward decoding.

use crate::dfa::ByteDfa;
use crate::StateId;

/// A forced continuation: every output in the language continues from the state with
/// `bytes`, after which the automaton is in `state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpForward {
    pub bytes: Vec<u8>,
    pub state: StateId,
}

/// Follows single-byte chains from `state`. Stops at an accepting state (EOS is then a second
/// way forward, so jumping past it would forbid stopping there) and at any state with two or
/// more live bytes; then drops a trailing partial UTF-8 character, so the caller can always
/// decode and re-tokenize the jumped text.
pub(crate) fn forced_continuation(dfa: &ByteDfa, state: StateId) -> JumpForward {
    let mut bytes = Vec::new();
    let mut states = vec![state];
    let mut current = state;
    while !dfa.is_accepting(current) {
        let Some(byte) = dfa.forced_byte(current) else {
            break;
        };
        bytes.push(byte);
        current = dfa.next(current, byte);
        states.push(current);
    }
    let keep = complete_utf8_len(&bytes);
    bytes.truncate(keep);
    JumpForward { bytes, state: states[keep] }
}

/// Length of the longest prefix of `bytes` that does not end inside a multi-byte character
/// begun within `bytes` (leading continuation bytes finish a character begun earlier).
pub(crate) fn complete_utf8_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let byte = bytes[len - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let char_len = match byte {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        return if back < char_len { len - back } else { len };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_cut_points() {
        assert_eq!(complete_utf8_len(b"abc"), 3);
        assert_eq!(complete_utf8_len("a\u{e9}".as_bytes()), 3);
        assert_eq!(complete_utf8_len(&"a\u{e9}".as_bytes()[..2]), 1);
        assert_eq!(complete_utf8_len(&"\u{1F608}".as_bytes()[..3]), 0);
        // Continuation bytes only: they complete a character begun before the jump.
        assert_eq!(complete_utf8_len(&[0x80, 0x81]), 2);
        assert_eq!(complete_utf8_len(&[0x98, b'x']), 2);
    }
}
