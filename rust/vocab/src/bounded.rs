//! A byte-bounded map that forgets its least recently used entries when full: a vocabulary's
//! shared walks and masks are worth most when they stay (a string body's mask is asked for by
//! almost every schema), so overflowing the bound drops the entries unused the longest, down
//! to three quarters of it, instead of starting over empty.

use std::hash::Hash;

use rustc_hash::FxHashMap;

#[derive(Debug)]
pub(crate) struct BoundedCache<K, V> {
    /// Value, its size in bytes, and the clock at its last use.
    entries: FxHashMap<K, (V, usize, u64)>,
    num_bytes: usize,
    max_bytes: usize,
    clock: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> BoundedCache<K, V> {
    pub fn new(max_bytes: usize) -> Self {
        Self { entries: FxHashMap::default(), num_bytes: 0, max_bytes, clock: 0 }
    }

    pub fn get<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|(value, _, last_use)| {
            *last_use = clock;
            value.clone()
        })
    }

    /// Keeps `value` (replacing what `key` held), then forgets the least recently used entries
    /// while the total passes the bound. Returns the value kept under `key` now.
    pub fn insert(&mut self, key: K, value: V, num_bytes: usize) -> V {
        self.clock += 1;
        if let Some((_, replaced, _)) = self.entries.insert(key, (value.clone(), num_bytes, self.clock)) {
            self.num_bytes -= replaced;
        }
        self.num_bytes += num_bytes;
        if self.num_bytes > self.max_bytes {
            let mut by_use: Vec<(u64, K)> =
                self.entries.iter().map(|(k, (_, _, used))| (*used, k.clone())).collect();
            by_use.sort_unstable_by_key(|(used, _)| *used);
            let target = self.max_bytes / 4 * 3;
            for (_, key) in by_use {
                if self.num_bytes <= target {
                    break;
                }
                if let Some((_, size, _)) = self.entries.remove(&key) {
                    self.num_bytes -= size;
                }
            }
        }
        value
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn num_bytes(&self) -> usize {
        self.num_bytes
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.num_bytes = 0;
    }

    /// The byte total equals the entries' sizes, and stays within the bound after an insert of
    /// entries no larger than it.
    #[cfg(test)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let total: usize = self.entries.values().map(|(_, size, _)| size).sum();
        if total != self.num_bytes {
            return Err(format!("byte total {} but entries hold {total}", self.num_bytes));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn overflow_forgets_the_least_recently_used() {
        let mut cache = BoundedCache::new(40);
        for key in 0..4u32 {
            cache.insert(key, key, 10);
        }
        // Key 0 is used again, so key 1 is the oldest when the bound is passed.
        assert_eq!(cache.get(&0), Some(0));
        cache.insert(4, 4, 10);
        assert_eq!(cache.get(&1), None, "the least recently used entry is forgotten");
        assert_eq!(cache.get(&0), Some(0), "a recently used entry stays");
        assert_eq!(cache.get(&4), Some(4));
        assert!(cache.num_bytes() <= 30);
        cache.check_invariants().unwrap();
    }

    proptest! {
        #[test]
        fn stays_within_its_bound(ops in prop::collection::vec((0u8..16, 1usize..20, any::<bool>()), 1..200)) {
            let mut cache = BoundedCache::new(64);
            for (key, size, read) in ops {
                if read {
                    let _ = cache.get(&key);
                } else {
                    prop_assert_eq!(cache.insert(key, size, size), size);
                    prop_assert_eq!(cache.get(&key), Some(size), "the entry just kept is there");
                    prop_assert!(cache.num_bytes() <= 64);
                }
                cache.check_invariants().map_err(TestCaseError::fail)?;
            }
        }
    }
}
