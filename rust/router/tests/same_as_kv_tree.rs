//! The router's tree against the KV cache's radix tree used as a prefix set (what the router
//! used before it had its own tree): after every insert both hold the same number of keys and
//! give the same match length for every key seen, so eviction picks the same leaves.

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

fn key() -> impl Strategy<Value = Vec<u32>> {
    // A tiny alphabet so keys share prefixes often and splits happen inside edges.
    prop::collection::vec(0u32..3, 0..14)
}

proptest! {
    #[test]
    fn evicts_and_matches_like_the_kv_tree(
        keys in prop::collection::vec(key(), 1..120),
        max_keys in 1usize..40,
    ) {
        let mut tree = ReplicaTree::new(max_keys);
        let mut reference = KvTreeAsPrefixSet { tree: RadixTree::new(), next_slot: 0, max_keys };
        for (step, key) in keys.iter().enumerate() {
            tree.insert(key);
            reference.insert(key);
            tree.check_invariants().unwrap();
            prop_assert_eq!(tree.num_keys(), reference.tree.total_size());
            for probe in &keys[..=step] {
                prop_assert_eq!(tree.match_len(probe), reference.tree.peek_match_len(None, probe));
            }
        }
    }
}
