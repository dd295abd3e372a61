//! One replica's trie: one node per key (uncompressed, so "stored keys" == live nodes and the
//! memory bound is exact), a set of leaves ordered by last access for LRU pruning.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use crate::error::RouterTreeError;

const ROOT: u32 = 0;

#[derive(Debug, Clone)]
struct Node {
    key: u32,
    parent: u32,
    children: FxHashMap<u32, u32>,
    last_access: u64,
    live: bool,
}

impl Node {
    fn new(key: u32, parent: u32, last_access: u64) -> Self {
        Self { key, parent, children: FxHashMap::default(), last_access, live: true }
    }
}

#[derive(Debug, Clone)]
pub struct ReplicaTree {
    nodes: Vec<Node>,
    free_node_ids: Vec<u32>,
    num_keys: usize,
    max_keys: usize,
    /// Non-root nodes without children, by (last_access, node id): the pruning order.
    leaves_by_age: BTreeSet<(u64, u32)>,
}

impl ReplicaTree {
    pub fn new(max_keys: usize) -> Self {
        Self {
            nodes: vec![Node::new(0, ROOT, 0)],
            free_node_ids: Vec::new(),
            num_keys: 0,
            max_keys,
            leaves_by_age: BTreeSet::new(),
        }
    }

    pub fn num_keys(&self) -> usize {
        self.num_keys
    }

    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Length of the longest stored prefix of `key`.
    pub fn match_len(&self, key: &[u32]) -> usize {
        let mut node = ROOT;
        for (depth, token) in key.iter().enumerate() {
            match self.nodes[node as usize].children.get(token) {
                Some(&child) => node = child,
                None => return depth,
            }
        }
        key.len()
    }

    /// Stores `key` (at most `max_keys` of it: a longer one could never fit), stamping its
    /// whole path with `now`, then prunes old leaves down to the bound.
    pub fn insert(&mut self, key: &[u32], now: u64) {
        let key = &key[..key.len().min(self.max_keys)];
        let mut node = ROOT;
        for &token in key {
            let next = match self.nodes[node as usize].children.get(&token) {
                Some(&child) => child,
                None => self.add_child(node, token, now),
            };
            self.touch(next, now);
            node = next;
        }
        self.prune(node);
    }

    fn add_child(&mut self, parent: u32, key: u32, now: u64) -> u32 {
        if parent != ROOT && self.nodes[parent as usize].children.is_empty() {
            let stamp = self.nodes[parent as usize].last_access;
            self.leaves_by_age.remove(&(stamp, parent));
        }
        let child = Node::new(key, parent, now);
        let id = match self.free_node_ids.pop() {
            Some(id) => {
                self.nodes[id as usize] = child;
                id
            }
            None => {
                self.nodes.push(child);
                (self.nodes.len() - 1) as u32
            }
        };
        self.nodes[parent as usize].children.insert(key, id);
        self.leaves_by_age.insert((now, id));
        self.num_keys += 1;
        id
    }

    fn touch(&mut self, id: u32, now: u64) {
        let node = &mut self.nodes[id as usize];
        let old = node.last_access;
        node.last_access = now;
        if node.children.is_empty() {
            self.leaves_by_age.remove(&(old, id));
            self.leaves_by_age.insert((now, id));
        }
    }

    /// Removes least-recently-used leaves until the bound holds. `keep` (the end of the key
    /// just inserted) goes last: the newest route is the one most worth remembering.
    fn prune(&mut self, keep: u32) {
        while self.num_keys > self.max_keys {
            let victim = self
                .leaves_by_age
                .iter()
                .find(|&&(_, id)| id != keep)
                .or_else(|| self.leaves_by_age.iter().next())
                .copied();
            let Some((stamp, id)) = victim else { return };
            self.leaves_by_age.remove(&(stamp, id));
            let parent = self.nodes[id as usize].parent;
            let key = self.nodes[id as usize].key;
            self.nodes[parent as usize].children.remove(&key);
            self.nodes[id as usize].live = false;
            self.nodes[id as usize].children = FxHashMap::default();
            self.free_node_ids.push(id);
            self.num_keys -= 1;
            if parent != ROOT && self.nodes[parent as usize].children.is_empty() {
                let parent_stamp = self.nodes[parent as usize].last_access;
                self.leaves_by_age.insert((parent_stamp, parent));
            }
        }
    }

    pub fn check_invariants(&self) -> Result<(), RouterTreeError> {
        let fail = |message: String| Err(RouterTreeError::Invariant(message));
        if self.num_keys > self.max_keys {
            return fail(format!("{} keys stored, bound {}", self.num_keys, self.max_keys));
        }
        let num_live = self.nodes.iter().skip(1).filter(|node| node.live).count();
        if num_live != self.num_keys {
            return fail(format!("{num_live} live nodes, num_keys {}", self.num_keys));
        }
        if num_live + self.free_node_ids.len() + 1 != self.nodes.len() {
            return fail("live + free nodes do not cover the arena".into());
        }
        let mut expected_leaves = BTreeSet::new();
        for (id, node) in self.nodes.iter().enumerate().skip(1) {
            if !node.live {
                continue;
            }
            let parent = &self.nodes[node.parent as usize];
            if !parent.live || parent.children.get(&node.key) != Some(&(id as u32)) {
                return fail(format!("node {id} is not its parent's child"));
            }
            if node.parent != ROOT && parent.last_access < node.last_access {
                return fail(format!("node {id} was accessed after its parent"));
            }
            if node.children.is_empty() {
                expected_leaves.insert((node.last_access, id as u32));
            }
        }
        if expected_leaves != self.leaves_by_age {
            return fail("leaf index differs from the tree's leaves".into());
        }
        Ok(())
    }
}
