//! `ReplicaTree::check_invariants`: a full O(size) audit, for tests and debugging.

use std::collections::BTreeSet;

use crate::error::RouterTreeError;
use crate::node::{child_key, ROOT};
use crate::tree::ReplicaTree;

impl ReplicaTree {
    pub fn check_invariants(&self) -> Result<(), RouterTreeError> {
        let fail = |message: String| Err(RouterTreeError::Invariant(message));
        let root = &self.nodes[ROOT as usize];
        if !root.is_alive || root.len != 0 {
            return fail("the root is alive and has an empty edge".into());
        }
        let mut num_children = vec![0u32; self.nodes.len()];
        let mut leaves = BTreeSet::new();
        let mut ranges = Vec::new();
        let mut num_keys = 0;
        for (index, node) in self.nodes.iter().enumerate().skip(1) {
            if !node.is_alive {
                continue;
            }
            let index = index as u32;
            let parent = self.nodes.get(node.parent as usize).filter(|parent| parent.is_alive);
            let Some(parent) = parent else {
                return fail(format!("node {index} has no live parent"));
            };
            if node.len == 0 || node.end() > self.arena.len() {
                return fail(format!(
                    "node {index}'s edge {}..{} is empty or past the arena",
                    node.start,
                    node.end()
                ));
            }
            if self.children.get(&child_key(node.parent, self.arena.get(node.start))) != Some(&index) {
                return fail(format!("node {index} is not its parent's child by its first token"));
            }
            if node.parent != ROOT && node.last_access > parent.last_access {
                return fail(format!("node {index} was used after its parent"));
            }
            num_children[node.parent as usize] += 1;
            if node.num_children == 0 {
                leaves.insert((node.last_access, index));
            }
            ranges.push((node.start, node.end()));
            num_keys += node.len;
        }
        let num_alive = ranges.len();
        if self.children.len() != num_alive {
            return fail(format!("{} child entries for {num_alive} non-root nodes", self.children.len()));
        }
        for (index, node) in self.nodes.iter().enumerate() {
            if node.is_alive && node.num_children != num_children[index] {
                return fail(format!(
                    "node {index} counts {} children, has {}",
                    node.num_children, num_children[index]
                ));
            }
        }
        if leaves != self.lru {
            return fail("the LRU set is not the set of leaves".into());
        }
        let mut free = self.free_nodes.clone();
        free.sort_unstable();
        free.dedup();
        if free.len() != self.free_nodes.len()
            || free.iter().any(|&index| self.nodes[index as usize].is_alive)
            || free.len() + num_alive + 1 != self.nodes.len()
        {
            return fail("the free list is not exactly the dead nodes".into());
        }
        ranges.sort_unstable();
        if ranges.windows(2).any(|pair| pair[0].1 > pair[1].0) {
            return fail("two edges overlap in the arena".into());
        }
        if num_keys != self.num_keys || num_keys > self.max_keys {
            return fail(format!(
                "{num_keys} keys stored, {} counted, bound {}",
                self.num_keys, self.max_keys
            ));
        }
        // Memory: garbage is compacted once it exceeds the bound, so the arena stays under
        // twice the bound; every live non-root node holds a token, and an insert adds at most
        // a split and a leaf before evicting.
        if self.arena.len() != num_keys + self.dead_tokens || self.dead_tokens > self.max_keys {
            return fail(format!(
                "arena of {} tokens: {num_keys} live, {} dead",
                self.arena.len(),
                self.dead_tokens
            ));
        }
        if self.nodes.len() > self.max_keys + 3 {
            return fail(format!("{} node entries for a bound of {} keys", self.nodes.len(), self.max_keys));
        }
        Ok(())
    }
}
