//! A tree's token arena: every edge label is a range of it.
//!
//! The router's trees are memory-traffic bound (comparing a request against an edge, appending
//! its new tokens), so the arena stores two bytes per token while every id it has been given
//! fits in 16 bits, and widens to four bytes (all at once, offsets unchanged) the first time
//! one does not. Keys stay `u32`; a narrow edge is compared against them widened on the fly,
//! so match lengths are the same in either form.

use sglr_radix::common_prefix_len;

/// Tokens compared per step of the narrow comparison: one step is a few vector instructions,
/// and a mismatch costs at most one step's worth of scalar rescan.
const COMPARE_CHUNK: usize = 32;

#[derive(Debug)]
pub(crate) enum TokenArena {
    /// Every token stored so far is below 2^16.
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl TokenArena {
    /// Room for `capacity` tokens reserved (address space; pages are touched as tokens come).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self::Narrow(Vec::with_capacity(capacity))
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Narrow(tokens) => tokens.len(),
            Self::Wide(tokens) => tokens.len(),
        }
    }

    /// Bytes per stored token (2 or 4).
    pub(crate) fn token_width(&self) -> usize {
        match self {
            Self::Narrow(_) => 2,
            Self::Wide(_) => 4,
        }
    }

    pub(crate) fn get(&self, index: usize) -> u32 {
        match self {
            Self::Narrow(tokens) => u32::from(tokens[index]),
            Self::Wide(tokens) => tokens[index],
        }
    }

    /// The tokens of `start..end`, widened.
    #[cfg(test)]
    pub(crate) fn to_vec(&self, start: usize, end: usize) -> Vec<u32> {
        (start..end).map(|index| self.get(index)).collect()
    }

    /// Length of the common prefix of `self[start..end]` and `key`.
    pub(crate) fn common_prefix_len(&self, start: usize, end: usize, key: &[u32]) -> usize {
        match self {
            Self::Narrow(tokens) => narrow_common_prefix_len(&tokens[start..end], key),
            Self::Wide(tokens) => common_prefix_len(&tokens[start..end], key),
        }
    }

    /// Appends `tokens`, widening the arena first if one of them needs 32 bits.
    pub(crate) fn extend(&mut self, tokens: &[u32]) {
        if let Self::Narrow(narrow) = self {
            // An OR over the slice vectorizes; the slice is read again right after, from cache.
            if tokens.iter().fold(0, |bits, &token| bits | token) <= u32::from(u16::MAX) {
                narrow.extend(tokens.iter().map(|&token| token as u16));
                return;
            }
            self.widen();
        }
        if let Self::Wide(wide) = self {
            wide.extend_from_slice(tokens);
        }
    }

    pub(crate) fn copy_within(&mut self, source: std::ops::Range<usize>, dest: usize) {
        match self {
            Self::Narrow(tokens) => tokens.copy_within(source, dest),
            Self::Wide(tokens) => tokens.copy_within(source, dest),
        }
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        match self {
            Self::Narrow(tokens) => tokens.truncate(len),
            Self::Wide(tokens) => tokens.truncate(len),
        }
    }

    /// Narrow to wide, same offsets and the same reserved capacity. Once per tree at most.
    fn widen(&mut self) {
        if let Self::Narrow(narrow) = self {
            let mut wide = Vec::with_capacity(narrow.capacity());
            wide.extend(narrow.iter().map(|&token| u32::from(token)));
            *self = Self::Wide(wide);
        }
    }
}

/// `common_prefix_len` of a narrow edge and a key: whole chunks compared branch-free (the
/// inner loop vectorizes), then the mismatching chunk or the tail token by token.
fn narrow_common_prefix_len(edge: &[u16], key: &[u32]) -> usize {
    let limit = edge.len().min(key.len());
    let (edge, key) = (&edge[..limit], &key[..limit]);
    let mut start = 0;
    for (edge_chunk, key_chunk) in edge.chunks_exact(COMPARE_CHUNK).zip(key.chunks_exact(COMPARE_CHUNK)) {
        let differing_bits = edge_chunk
            .iter()
            .zip(key_chunk)
            .fold(0, |bits, (&stored, &token)| bits | (u32::from(stored) ^ token));
        if differing_bits != 0 {
            break;
        }
        start += COMPARE_CHUNK;
    }
    while start < limit && u32::from(edge[start]) == key[start] {
        start += 1;
    }
    start
}

#[cfg(test)]
mod tests {
    use super::{narrow_common_prefix_len, TokenArena, COMPARE_CHUNK};

    #[test]
    fn narrow_comparison_agrees_with_a_naive_scan_at_every_split_point() {
        for total in [0usize, 1, COMPARE_CHUNK - 1, COMPARE_CHUNK, COMPARE_CHUNK + 1, 3 * COMPARE_CHUNK + 7] {
            let edge: Vec<u16> = (0..total as u16).map(|i| i.wrapping_mul(7919)).collect();
            let base: Vec<u32> = edge.iter().map(|&t| u32::from(t)).collect();
            assert_eq!(narrow_common_prefix_len(&edge, &base), total);
            for split in 0..total {
                // A differing low half, and a key id that agrees in its low 16 bits only.
                for replacement in [base[split] ^ 1, base[split] | 0x1_0000] {
                    let mut key = base.clone();
                    key[split] = replacement;
                    assert_eq!(narrow_common_prefix_len(&edge, &key), split);
                }
                assert_eq!(narrow_common_prefix_len(&edge, &base[..split]), split);
            }
        }
    }

    #[test]
    fn widens_once_an_id_needs_more_than_16_bits_and_keeps_every_token() {
        let mut arena = TokenArena::with_capacity(8);
        arena.extend(&[1, 65_535]);
        assert_eq!(arena.token_width(), 2);
        arena.extend(&[7, 65_536, 2]);
        assert_eq!(arena.token_width(), 4);
        arena.extend(&[3]);
        assert_eq!(arena.to_vec(0, arena.len()), [1, 65_535, 7, 65_536, 2, 3]);
        assert_eq!(arena.common_prefix_len(2, 5, &[7, 65_536, 9]), 2);
    }
}
