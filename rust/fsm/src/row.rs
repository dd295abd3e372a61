//! Storage of one state's allowed-token set: a sorted id list when that is smaller than a
//! bitmask, else a bitmask shared between every state with the same set.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

/// The allowed ordinary tokens of one state (EOS is added at fill time from `is_accepting`).
#[derive(Debug, Clone)]
pub(crate) enum Row {
    /// Sorted token ids.
    Sparse(Box<[u32]>),
    /// `ceil(V / 32)` words; bit t of word t / 32 set = token t allowed.
    Dense(Arc<[u32]>),
}

impl Row {
    /// Writes the row into `out` (exactly the vocabulary's word count).
    #[inline]
    pub fn write(&self, out: &mut [u32]) {
        match self {
            Row::Dense(words) => out.copy_from_slice(words),
            Row::Sparse(ids) => {
                out.fill(0);
                for &token in ids.iter() {
                    out[token as usize >> 5] |= 1 << (token & 31);
                }
            }
        }
    }

    pub fn token_ids(&self) -> Vec<u32> {
        match self {
            Row::Sparse(ids) => ids.to_vec(),
            Row::Dense(words) => bits_to_ids(words),
        }
    }
}

/// How many bits of a token bitmask are set. With the CPU's population count where it has
/// one (every x86-64 CPU since 2008, told at run time): the portable count is a dozen
/// instructions a word, and a mask is counted once or twice per step (about a quarter of a
/// cached step at 100k tokens, measured with `mask_profile`).
pub fn count_bits(words: &[u32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has the instruction (detected just above).
            return unsafe { count_bits_popcnt(words) };
        }
    }
    words.iter().map(|w| w.count_ones() as usize).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn count_bits_popcnt(words: &[u32]) -> usize {
    let pairs = words.chunks_exact(2);
    let rest: usize = pairs.remainder().iter().map(|w| w.count_ones() as usize).sum();
    rest + pairs
        .map(|pair| (u64::from(pair[0]) | u64::from(pair[1]) << 32).count_ones() as usize)
        .sum::<usize>()
}

/// The ids of the set bits of a token bitmask (bit t of word t / 32), ascending.
pub fn bits_to_ids(words: &[u32]) -> Vec<u32> {
    let mut ids = Vec::new();
    for (index, &word) in words.iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            ids.push(index as u32 * 32 + rest.trailing_zeros());
            rest &= rest - 1;
        }
    }
    ids
}

/// Interns dense rows so states with identical sets share one bitmask, and counts the bytes
/// that all rows hold.
#[derive(Debug, Default)]
pub(crate) struct RowStore {
    dense: Mutex<FxHashMap<u64, Vec<Arc<[u32]>>>>,
    bytes: Mutex<usize>,
}

impl RowStore {
    /// Turns a freshly walked bitmask into a row, choosing the smaller representation.
    pub fn make_row(&self, mask: Vec<u32>, num_allowed: usize) -> Row {
        if num_allowed < mask.len() {
            let ids: Box<[u32]> = bits_to_ids(&mask).into_boxed_slice();
            self.add_bytes(ids.len() * 4);
            return Row::Sparse(ids);
        }
        let hash = hash_words(&mask);
        let mut dense = self.dense.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = dense.entry(hash).or_default();
        if let Some(shared) = bucket.iter().find(|row| row[..] == mask[..]) {
            return Row::Dense(shared.clone());
        }
        let row: Arc<[u32]> = mask.into();
        bucket.push(row.clone());
        drop(dense);
        self.add_bytes(row.len() * 4);
        Row::Dense(row)
    }

    fn add_bytes(&self, num_bytes: usize) {
        *self.bytes.lock().unwrap_or_else(|p| p.into_inner()) += num_bytes;
    }

    /// Bytes held by rows (a shared dense row counts once).
    pub fn memory_bytes(&self) -> usize {
        *self.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of distinct dense bitmasks.
    pub fn num_dense(&self) -> usize {
        let dense = self.dense.lock().unwrap_or_else(|p| p.into_inner());
        dense.values().map(Vec::len).sum()
    }
}

fn hash_words(words: &[u32]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = rustc_hash::FxHasher::default();
    words.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod count_tests {
    use super::*;

    #[test]
    fn count_bits_counts_every_set_bit() {
        for len in [0usize, 1, 2, 3, 7, 3134] {
            let words: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(2654435761) ^ (i << 7)).collect();
            let expected: usize = words.iter().map(|w| w.count_ones() as usize).sum();
            assert_eq!(count_bits(&words), expected, "{len} words");
            assert_eq!(count_bits(&words), bits_to_ids(&words).len());
        }
    }
}
