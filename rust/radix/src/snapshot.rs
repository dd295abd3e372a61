//! Read-only views of the tree: a canonical dump for tests and the invariant checker.

use std::collections::HashSet;

use crate::error::RadixError;
use crate::ids::{Namespace, SlotId, TokenId};
use crate::tree::RadixTree;

/// One node in a depth-first dump of the tree (children in ascending first-token order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub depth: usize,
    pub tokens: Vec<TokenId>,
    pub slots: Vec<SlotId>,
    pub lock_ref: u32,
}

impl RadixTree {
    /// Depth-first dump of one namespace (roots excluded; depth 1 = children of the root).
    pub fn dump(&self, namespace: Option<Namespace>) -> Vec<NodeView> {
        let mut out = Vec::new();
        if let Some(&root) = self.roots.get(&namespace) {
            self.dump_below(root, 1, &mut out);
        }
        out
    }

    fn dump_below(&self, index: u32, depth: usize, out: &mut Vec<NodeView>) {
        let mut children: Vec<(u32, u32)> =
            self.nodes[index as usize].children.iter().map(|(&t, &c)| (t, c)).collect();
        children.sort_unstable();
        for (_, child) in children {
            let entry = &self.nodes[child as usize];
            out.push(NodeView {
                depth,
                tokens: entry.tokens.clone(),
                slots: entry.slots.clone(),
                lock_ref: entry.lock_ref,
            });
            self.dump_below(child, depth + 1, out);
        }
    }

    /// Verifies every structural and accounting invariant; O(size of the tree).
    ///
    /// - parent/child links agree, child keys are the first token of the child's edge;
    /// - non-root edges are non-empty and as long as their slot lists; no slot is indexed twice;
    /// - a node's lock count is at least the sum of its children's (locks walk to the root);
    /// - a parent was used no earlier than its children (so LRU order never strands a leaf);
    /// - evictable/protected sizes equal the token counts of unlocked/locked nodes;
    /// - the LRU set holds exactly the unlocked childless non-root nodes, keyed by access time.
    pub fn check_invariants(&self) -> Result<(), RadixError> {
        let fail = |msg: String| Err(RadixError::Invariant(msg));
        let mut evictable = 0usize;
        let mut protected = 0usize;
        let mut seen_slots: HashSet<SlotId> = HashSet::new();
        let mut num_lru = 0usize;
        for (index, entry) in self.nodes.iter().enumerate() {
            if !entry.is_alive {
                continue;
            }
            let index = index as u32;
            if entry.tokens.len() != entry.slots.len() {
                return fail(format!(
                    "node {index}: {} tokens but {} slots",
                    entry.tokens.len(),
                    entry.slots.len()
                ));
            }
            let mut children_locks = 0u64;
            for (&first, &child) in &entry.children {
                let c = &self.nodes[child as usize];
                if !c.is_alive || c.parent != Some(index) {
                    return fail(format!("node {index}: child {child} is dead or has another parent"));
                }
                if c.tokens.first() != Some(&first) {
                    return fail(format!("node {index}: child {child} keyed by {first} starts otherwise"));
                }
                if !entry.is_root && c.last_access > entry.last_access {
                    return fail(format!("node {index}: child {child} used later than its parent"));
                }
                children_locks += u64::from(c.lock_ref);
            }
            if entry.is_root {
                if !entry.tokens.is_empty() || entry.lock_ref != 0 || entry.parent.is_some() {
                    return fail(format!("root {index} has an edge, a lock or a parent"));
                }
                if !self.roots.values().any(|&r| r == index) {
                    return fail(format!("root {index} is not registered"));
                }
                continue;
            }
            if u64::from(entry.lock_ref) < children_locks {
                return fail(format!(
                    "node {index}: lock {} below children's {children_locks}",
                    entry.lock_ref
                ));
            }
            if entry.tokens.is_empty() {
                return fail(format!("node {index}: empty edge"));
            }
            let parent = match entry.parent {
                Some(p) if self.nodes[p as usize].is_alive => p,
                _ => return fail(format!("node {index}: missing or dead parent")),
            };
            if self.nodes[parent as usize].children.get(&entry.tokens[0]) != Some(&index) {
                return fail(format!("node {index}: parent {parent} does not point back"));
            }
            for &slot in &entry.slots {
                if !seen_slots.insert(slot) {
                    return fail(format!("slot {slot} is indexed twice"));
                }
            }
            if entry.lock_ref == 0 {
                evictable += entry.tokens.len();
            } else {
                protected += entry.tokens.len();
            }
            if entry.in_lru != entry.can_evict() {
                return fail(format!(
                    "node {index}: LRU membership {} disagrees with evictability",
                    entry.in_lru
                ));
            }
            if entry.in_lru {
                num_lru += 1;
                if !self.lru_entries().contains(&(entry.last_access, index)) {
                    return fail(format!("node {index}: LRU key is out of date"));
                }
            }
        }
        if num_lru != self.lru_entries().len() {
            return fail(format!("LRU set has {} entries, {num_lru} expected", self.lru_entries().len()));
        }
        if evictable != self.evictable_size() || protected != self.protected_size() {
            return fail(format!(
                "sizes: evictable {} (counted {evictable}), protected {} (counted {protected})",
                self.evictable_size(),
                self.protected_size()
            ));
        }
        for &root in self.roots.values() {
            if !self.nodes[root as usize].is_root || !self.nodes[root as usize].is_alive {
                return fail(format!("registered root {root} is not a live root"));
            }
        }
        Ok(())
    }
}
