//! All replicas' trees, by replica id.

use rustc_hash::FxHashMap;

use crate::error::RouterTreeError;
use crate::tree::ReplicaTree;

pub type ReplicaId = u32;

/// The replica holding the longest stored prefix of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaMatch {
    pub replica: ReplicaId,
    pub matched_len: usize,
}

#[derive(Debug)]
pub struct PrefixForest {
    pub(crate) trees: FxHashMap<ReplicaId, ReplicaTree>,
    max_keys_per_tree: usize,
}

impl PrefixForest {
    pub fn new(max_keys_per_tree: usize) -> Result<Self, RouterTreeError> {
        if max_keys_per_tree == 0 {
            return Err(RouterTreeError::ZeroCapacity);
        }
        Ok(Self { trees: FxHashMap::default(), max_keys_per_tree })
    }

    pub fn add_replica(&mut self, replica: ReplicaId) -> Result<(), RouterTreeError> {
        if self.trees.contains_key(&replica) {
            return Err(RouterTreeError::DuplicateReplica(replica));
        }
        self.trees.insert(replica, ReplicaTree::new(self.max_keys_per_tree));
        Ok(())
    }

    pub fn remove_replica(&mut self, replica: ReplicaId) -> Result<(), RouterTreeError> {
        self.trees.remove(&replica).map(|_| ()).ok_or(RouterTreeError::UnknownReplica(replica))
    }

    /// Replica ids in ascending order.
    pub fn replica_ids(&self) -> Vec<ReplicaId> {
        let mut ids: Vec<_> = self.trees.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub fn num_keys(&self, replica: ReplicaId) -> Result<usize, RouterTreeError> {
        self.tree(replica).map(ReplicaTree::num_keys)
    }

    pub fn match_len(&self, replica: ReplicaId, key: &[u32]) -> Result<usize, RouterTreeError> {
        self.tree(replica).map(|tree| tree.match_len(key))
    }

    /// The replica with the longest stored prefix of `key`; ties go to the lowest id so the
    /// answer does not depend on hash order. `None` only when there are no replicas.
    pub fn best_match(&self, key: &[u32]) -> Option<ReplicaMatch> {
        let mut best: Option<ReplicaMatch> = None;
        for (&replica, tree) in &self.trees {
            let candidate = ReplicaMatch { replica, matched_len: tree.match_len(key) };
            best = match best {
                Some(current)
                    if current.matched_len > candidate.matched_len
                        || (current.matched_len == candidate.matched_len
                            && current.replica < candidate.replica) =>
                {
                    Some(current)
                }
                _ => Some(candidate),
            };
        }
        best
    }

    pub fn insert(&mut self, replica: ReplicaId, key: &[u32]) -> Result<(), RouterTreeError> {
        self.trees.get_mut(&replica).ok_or(RouterTreeError::UnknownReplica(replica))?.insert(key);
        Ok(())
    }

    pub fn check_invariants(&self) -> Result<(), RouterTreeError> {
        self.trees.values().try_for_each(ReplicaTree::check_invariants)
    }

    fn tree(&self, replica: ReplicaId) -> Result<&ReplicaTree, RouterTreeError> {
        self.trees.get(&replica).ok_or(RouterTreeError::UnknownReplica(replica))
    }
}
