//! The router's tree against the KV cache's radix tree used as a prefix set (what the router
//! used before it had its own tree): after every insert both hold the same number of keys and
//! give the same match length for every key seen, so eviction picks the same leaves. Keys mix
//! ids below and above 2^16, so trees are tested narrow, wide, and across the widening.

use proptest::prelude::*;
use sglr_radix::RadixTree;
use sglr_router::ReplicaTree;

/// The KV tree with a distinct (meaningless) slot per token, inserted and pruned as the
/// router's tree is: the key cut to the bound, then LRU leaves evicted down to it.
struct KvTreeAsPrefixSet {
    tree: RadixTree,
    next_slot: u32,
    max_keys: usize,
}

impl KvTreeAsPrefixSet {
    fn insert(&mut self, key: &[u32]) {
        let key = &key[..key.len().min(self.max_keys)];
        let slots: Vec<u32> = (self.next_slot..self.next_slot + key.len() as u32).collect();
        self.next_slot += key.len() as u32;
        self.tree.insert(None, key, &slots).unwrap();
        let num_keys = self.tree.total_size();
        if num_keys > self.max_keys {
            self.tree.evict(num_keys - self.max_keys);
        }
    }
}

/// A tiny alphabet so keys share prefixes often and splits happen inside edges; the wide
/// ids agree with narrow ones in their low 16 bits (65,536 + 1 vs 1), so a comparison that
/// dropped the high bits would match too far.
fn token(wide_weight: u32) -> impl Strategy<Value = u32> {
    prop_oneof![
        8 => 0u32..3,
        wide_weight => prop_oneof![Just(65_535u32), Just(65_536 + 1), Just(u32::MAX)],
    ]
}

fn key(wide_weight: u32) -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(token(wide_weight), 0..14)
}

/// Mostly narrow keys with the odd wide one, or (weight 0) all narrow.
fn keys() -> impl Strategy<Value = Vec<Vec<u32>>> {
    (0u32..3).prop_flat_map(|wide_weight| prop::collection::vec(key(wide_weight), 1..120))
}

/// Long keys over a tiny alphabet: edges longer than the comparison's 32-token chunks.
fn long_keys() -> impl Strategy<Value = Vec<Vec<u32>>> {
    let long_key = (prop::collection::vec(0u32..2, 0..80), token(1), prop::collection::vec(0u32..2, 0..80))
        .prop_map(|(head, middle, tail)| [head, vec![middle], tail].concat());
    prop::collection::vec(long_key, 1..40)
}

fn check_same(keys: &[Vec<u32>], max_keys: usize) -> Result<(), TestCaseError> {
    let mut tree = ReplicaTree::new(max_keys);
    let mut reference = KvTreeAsPrefixSet { tree: RadixTree::new(), next_slot: 0, max_keys };
    // Whether the tree was ever given an id of 2^16 or more to store (only the unmatched
    // part of a key, cut to the bound, is stored).
    let mut stored_wide = false;
    for (step, key) in keys.iter().enumerate() {
        let cut = &key[..key.len().min(max_keys)];
        stored_wide |= cut[tree.match_len(cut)..].iter().any(|&id| id > u32::from(u16::MAX));
        tree.insert(key);
        reference.insert(key);
        tree.check_invariants().unwrap();
        prop_assert_eq!(tree.num_keys(), reference.tree.total_size());
        prop_assert_eq!(tree.bytes_per_token(), if stored_wide { 4 } else { 2 });
        for probe in &keys[..=step] {
            prop_assert_eq!(tree.match_len(probe), reference.tree.peek_match_len(None, probe));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn evicts_and_matches_like_the_kv_tree(keys in keys(), max_keys in 1usize..40) {
        check_same(&keys, max_keys)?;
    }

    #[test]
    fn long_edges_match_like_the_kv_tree(keys in long_keys(), max_keys in 1usize..400) {
        check_same(&keys, max_keys)?;
    }
}
