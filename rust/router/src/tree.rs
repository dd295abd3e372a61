//! One replica's tree: the KV cache's radix tree (`sglr-radix`) used as a plain prefix set.
//!
//! Keys go in as token runs on compressed edges, matched without touching the tree
//! (`peek_match_len`: matching every replica must not refresh the LRU order of the replicas
//! that do not get the request), and pruned by the radix tree's own LRU leaf eviction. The
//! radix tree wants a distinct slot id per stored token; the ids here carry no meaning and are
//! recycled from what eviction returns, so they stay below `max_keys` + one key.

use sglr_radix::{RadixTree, SlotId};

use crate::error::RouterTreeError;

#[derive(Debug)]
pub struct ReplicaTree {
    tree: RadixTree,
    max_keys: usize,
    free_slot_ids: Vec<SlotId>,
    next_slot_id: SlotId,
}

impl ReplicaTree {
    pub fn new(max_keys: usize) -> Self {
        Self { tree: RadixTree::new(), max_keys, free_slot_ids: Vec::new(), next_slot_id: 0 }
    }

    pub fn num_keys(&self) -> usize {
        self.tree.total_size()
    }

    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Length of the longest stored prefix of `key`.
    pub fn match_len(&self, key: &[u32]) -> usize {
        self.tree.peek_match_len(None, key)
    }

    /// Stores `key` (at most `max_keys` of it: a longer one could never fit) as the most
    /// recently used path, then evicts least-recently-used leaves down to the bound. The new
    /// path is never evicted: every other leaf is older, and the path alone fits.
    pub fn insert(&mut self, key: &[u32]) {
        let key = &key[..key.len().min(self.max_keys)];
        let num_stored = self.tree.peek_match_len(None, key);
        // The stored span's slots are ignored by the radix tree (it keeps its own).
        let mut slots = Vec::with_capacity(key.len());
        slots.resize(num_stored, 0);
        self.alloc_slot_ids(key.len() - num_stored, &mut slots);
        self.tree.insert(None, key, &slots).expect("one slot per token");
        let num_keys = self.tree.total_size();
        if num_keys > self.max_keys {
            let freed = self.tree.evict(num_keys - self.max_keys);
            self.free_slot_ids.extend(freed);
        }
    }

    /// Appends `count` unused slot ids to `out`: recycled ones first, most recently freed
    /// first (as repeated `pop`s would give them), then never used ones in order. Done in bulk,
    /// since a key brings thousands of new tokens.
    fn alloc_slot_ids(&mut self, count: usize, out: &mut Vec<SlotId>) {
        let num_recycled = count.min(self.free_slot_ids.len());
        let keep = self.free_slot_ids.len() - num_recycled;
        out.extend(self.free_slot_ids.drain(keep..).rev());
        let first_fresh = self.next_slot_id;
        self.next_slot_id += (count - num_recycled) as SlotId;
        out.extend(first_fresh..self.next_slot_id);
    }

    pub fn check_invariants(&self) -> Result<(), RouterTreeError> {
        let fail = |message: String| Err(RouterTreeError::Invariant(message));
        self.tree.check_invariants().or_else(|error| fail(error.to_string()))?;
        let num_keys = self.num_keys();
        if num_keys > self.max_keys {
            return fail(format!("{num_keys} keys stored, bound {}", self.max_keys));
        }
        if self.tree.protected_size() != 0 {
            return fail("the router never locks a prefix".into());
        }
        // Every slot id handed out is either in the tree or free, never both or neither.
        if num_keys + self.free_slot_ids.len() != self.next_slot_id as usize {
            return fail(format!(
                "{num_keys} stored + {} free slot ids, {} handed out",
                self.free_slot_ids.len(),
                self.next_slot_id
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ReplicaTree;

    #[test]
    fn slot_ids_come_from_the_free_list_back_first_then_fresh() {
        let mut tree = ReplicaTree::new(100);
        tree.free_slot_ids = vec![3, 7, 9];
        tree.next_slot_id = 10;
        let mut out = vec![0];
        tree.alloc_slot_ids(2, &mut out);
        assert_eq!(out, [0, 9, 7]);
        tree.alloc_slot_ids(3, &mut out);
        assert_eq!(out, [0, 9, 7, 3, 10, 11]);
        assert!(tree.free_slot_ids.is_empty());
        assert_eq!(tree.next_slot_id, 12);
    }
}
