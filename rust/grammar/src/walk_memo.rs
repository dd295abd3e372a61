//! Memo of the boundary walk (`mask/boundary_walk.rs`): the tokens that end a lexeme part-way and
//! go on in the grammar, by parse *context*.
//!
//! That walk reads the last Earley set and, through completions, only the sets its items'
//! origins reach (and theirs, transitively). Two charts whose reachable sets are the same items
//! with the set numbers renamed (the third string value of an array of objects and the first;
//! the same field in the next request) give the same tokens, so the walk is keyed by that
//! sub-chart written with canonical set numbers (the last set 0, the others in order of first
//! reference). Keys are compared whole, never by hash alone: a collision could otherwise hand one
//! context another's tokens.

use std::sync::{Arc, Mutex, PoisonError};

use rustc_hash::FxHashMap;

use crate::earley::Item;

/// Longest key kept (u32 words): past it the context is walked every time, so writing the key
/// never costs much next to the walk it saves. Long keys come from contexts that never repeat
/// anyway: each element of an array with `maxItems` sits one unrolled tail deeper than the last,
/// and its key grows with the count (at 16k words such masks cost twice the walk alone).
const MAX_KEY_WORDS: usize = 1 << 11;

/// Bytes of keys and token lists one matcher keeps; past it, new contexts are walked and not kept.
const MAX_MEMO_BYTES: usize = 2 << 20;

/// Marks the start of a set in a key (no rule number reaches it).
const SET_MARK: u32 = u32::MAX - 1;

/// The boundary-walk tokens of each context seen, for every request using the grammar.
#[derive(Debug, Default)]
pub(crate) struct BoundaryWalkMemo {
    inner: Mutex<Memo>,
}

#[derive(Debug, Default)]
struct Memo {
    walks: FxHashMap<Vec<u32>, Arc<[u32]>>,
    num_bytes: usize,
    num_hits: usize,
}

/// The context key of `sets` (a chart, the last set current) under a vocabulary: `None` when it
/// would pass `MAX_KEY_WORDS`.
pub(crate) fn context_key(sets: &[Arc<[Item]>], vocabulary_fingerprint: u64) -> Option<Vec<u32>> {
    let last = sets.len() - 1;
    let mut key = vec![vocabulary_fingerprint as u32, (vocabulary_fingerprint >> 32) as u32];
    // `order[c]`: the chart set given canonical number c.
    let mut order = vec![last as u32];
    let mut canonical: FxHashMap<u32, u32> = FxHashMap::default();
    canonical.insert(last as u32, 0);
    let mut next = 0;
    while next < order.len() {
        let set = &sets[order[next] as usize];
        next += 1;
        if key.len() + 2 + set.len() * 4 > MAX_KEY_WORDS {
            return None;
        }
        key.extend([SET_MARK, set.len() as u32]);
        for item in set.iter() {
            let origin = *canonical.entry(item.origin).or_insert_with(|| {
                order.push(item.origin);
                order.len() as u32 - 1
            });
            key.extend([item.rule, item.dot, origin, item.lex]);
        }
    }
    Some(key)
}

impl BoundaryWalkMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, Memo> {
        // NOTE: a panic while holding the lock cannot leave the map half-updated.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, key: &[u32]) -> Option<Arc<[u32]>> {
        let mut memo = self.lock();
        let found = memo.walks.get(key).cloned();
        memo.num_hits += usize::from(found.is_some());
        found
    }

    pub fn insert(&self, key: Vec<u32>, token_ids: Vec<u32>) {
        let mut memo = self.lock();
        let num_bytes = (key.len() + token_ids.len()) * 4;
        if memo.num_bytes + num_bytes <= MAX_MEMO_BYTES && !memo.walks.contains_key(&key) {
            memo.num_bytes += num_bytes;
            memo.walks.insert(key, token_ids.into());
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.lock().num_bytes
    }

    /// (contexts kept, lookups answered from the memo).
    pub fn counts(&self) -> (usize, usize) {
        let memo = self.lock();
        (memo.walks.len(), memo.num_hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(rule: u32, origin: u32) -> Item {
        Item { rule, dot: 0, origin, lex: 0 }
    }

    fn chart(sets: Vec<Vec<Item>>) -> Vec<Arc<[Item]>> {
        sets.into_iter().map(Into::into).collect()
    }

    #[test]
    fn renamed_sets_give_the_same_key_and_unreached_sets_do_not_matter() {
        // Set 3 waits on set 1, which waits on set 0; set 2 is never reached.
        let first = chart(vec![vec![item(0, 0)], vec![item(1, 0)], vec![item(9, 2)], vec![item(2, 1)]]);
        // The same context two sets later, with a different unreached set in between.
        let later = chart(vec![
            vec![item(7, 0)],
            vec![item(7, 0)],
            vec![item(0, 2)],
            vec![item(1, 2)],
            vec![item(8, 4)],
            vec![item(2, 3)],
        ]);
        assert_eq!(context_key(&first, 5), context_key(&later, 5));
        // Another vocabulary, or a different reached item, is another context.
        assert_ne!(context_key(&first, 5), context_key(&first, 6));
        let other = chart(vec![vec![item(0, 0)], vec![item(1, 0)], vec![item(2, 1)], vec![item(3, 1)]]);
        assert_ne!(context_key(&first, 5), context_key(&other, 5));
    }

    #[test]
    fn memory_stays_bounded() {
        let memo = BoundaryWalkMemo::default();
        for n in 0..10_000u32 {
            memo.insert(vec![n; 16], vec![n; 64]);
        }
        assert!(memo.memory_bytes() <= MAX_MEMO_BYTES);
        assert!(memo.get(&[0; 16]).is_some());
        assert_eq!(memo.counts().1, 1);
    }
}
