//! One replica's tree: a radix tree of the keys routed there, tokens only.
//!
//! The router needs match lengths, not KV slots, so this tree keeps nothing per token but the
//! token: every edge is a range of one token arena (a split only splits the range), nodes are
//! fixed-size records in a vector (freed ones reused), and all edges sit in one child map keyed
//! by (parent, first token). An insert allocates nothing per node beyond amortized growth of
//! those tables.
//!
//! Every insert is a match ([`ReplicaTree::find`]) then an insert from where the match ended
//! ([`ReplicaTree::insert_at`]), so a caller that has just matched a key (the forest, choosing a
//! replica) inserts it without comparing the shared prefix again.
//!
//! Matching does not touch the tree (matching every replica must not refresh the LRU order of
//! the replicas that do not get the request). Inserting marks its path as just used, and past
//! `max_keys` tokens the least-recently-used leaves are evicted whole (a parent becomes a
//! candidate once its children are gone), as the replica's cache evicts. Evicted tokens stay in
//! the arena as garbage until they outnumber `max_keys`; then the live edges slide down over it,
//! so the arena stays under twice the bound and the copying is at most one token per token
//! evicted.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use crate::arena::TokenArena;
use crate::node::{child_key, Node, NodeIndex, ROOT};

/// Most tokens reserved up front per tree (8 MiB narrow, 16 MiB wide; the router's default
/// bound is 2^21).
const ARENA_RESERVE_CAP: usize = 1 << 22;

/// Where a key's longest stored prefix ends: after `node` (wholly matched), and, when it goes
/// on into a child's edge, that child and how many of its tokens. Valid until the tree changes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MatchEnd {
    node: NodeIndex,
    pub(crate) len: usize,
    inside: Option<(NodeIndex, usize)>,
}

#[derive(Debug)]
pub struct ReplicaTree {
    pub(crate) nodes: Vec<Node>,
    pub(crate) free_nodes: Vec<NodeIndex>,
    /// `child_key(parent, first token of the edge)` -> child, for every non-root node.
    pub(crate) children: FxHashMap<u64, NodeIndex>,
    pub(crate) arena: TokenArena,
    /// Arena tokens that belong to no live node (evicted edges not yet compacted away).
    pub(crate) dead_tokens: usize,
    /// Leaves (childless non-root nodes) by (last access, index): the first is the LRU victim.
    pub(crate) lru: BTreeSet<(u64, NodeIndex)>,
    clock: u64,
    pub(crate) num_keys: usize,
    pub(crate) max_keys: usize,
}

impl ReplicaTree {
    pub fn new(max_keys: usize) -> Self {
        Self {
            nodes: vec![Node::root()],
            free_nodes: Vec::new(),
            children: FxHashMap::default(),
            // Reserved up to the bound (capped): address space only, pages are touched as
            // tokens arrive, and a growing tree never reallocates and copies its tokens.
            arena: TokenArena::with_capacity(max_keys.min(ARENA_RESERVE_CAP)),
            dead_tokens: 0,
            lru: BTreeSet::new(),
            clock: 0,
            num_keys: 0,
            max_keys,
        }
    }

    /// Tokens stored (edge tokens of live nodes).
    pub fn num_keys(&self) -> usize {
        self.num_keys
    }

    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// Bytes the arena spends per token: 2 until a key brings an id of 2^16 or more, then 4.
    pub fn bytes_per_token(&self) -> usize {
        self.arena.token_width()
    }

    /// Length of the longest stored prefix of `key`. Changes nothing.
    pub fn match_len(&self, key: &[u32]) -> usize {
        self.find(key).len
    }

    /// Where the longest stored prefix of `key` ends. Changes nothing.
    pub(crate) fn find(&self, key: &[u32]) -> MatchEnd {
        let (mut node, mut pos) = (ROOT, 0);
        while pos < key.len() {
            let Some(&child) = self.children.get(&child_key(node, key[pos])) else {
                break;
            };
            let edge = self.nodes[child as usize];
            let shared = self.arena.common_prefix_len(edge.start, edge.end(), &key[pos..]);
            pos += shared;
            if shared < edge.len {
                return MatchEnd { node, len: pos, inside: Some((child, shared)) };
            }
            node = child;
        }
        MatchEnd { node, len: pos, inside: None }
    }

    /// Stores `key` (at most `max_keys` of it: a longer one could never fit) as the most
    /// recently used path, then evicts least-recently-used leaves down to the bound. The new
    /// path is never evicted: every other leaf is older, and the path alone fits.
    pub fn insert(&mut self, key: &[u32]) {
        let key = &key[..key.len().min(self.max_keys)];
        let matched = self.find(key);
        self.insert_at(key, matched);
    }

    /// [`Self::insert`] given `matched = self.find(key)` on this tree as it is now (or on
    /// `key` before it was cut to the bound: a stored prefix is never longer than the bound,
    /// so both end in the same place). A match ending inside an edge splits it there (even
    /// when the key ends there too, so that the key's end is a node boundary); every node on
    /// the path is marked as used; the rest of the key becomes one new leaf.
    pub(crate) fn insert_at(&mut self, key: &[u32], matched: MatchEnd) {
        let key = &key[..key.len().min(self.max_keys)];
        debug_assert!(matched.len <= key.len());
        self.clock += 1;
        let now = self.clock;
        let end = match matched.inside {
            Some((child, shared)) => self.split(child, shared),
            None => matched.node,
        };
        let mut node = end;
        while node != ROOT {
            self.touch(node, now);
            node = self.nodes[node as usize].parent;
        }
        if matched.len < key.len() {
            self.add_leaf(end, &key[matched.len..], now);
        }
        if self.num_keys > self.max_keys {
            self.evict(self.num_keys - self.max_keys);
        }
    }

    fn is_leaf(&self, index: NodeIndex) -> bool {
        index != ROOT && self.nodes[index as usize].num_children == 0
    }

    fn touch(&mut self, index: NodeIndex, now: u64) {
        let is_leaf = self.is_leaf(index);
        let node = &mut self.nodes[index as usize];
        if is_leaf {
            self.lru.remove(&(node.last_access, index));
            self.lru.insert((now, index));
        }
        node.last_access = now;
    }

    /// Splits `child`'s edge after `prefix_len` tokens: a new node takes the prefix (the front
    /// of the same arena range) and becomes `child`'s parent. Returns the new node.
    fn split(&mut self, child: NodeIndex, prefix_len: usize) -> NodeIndex {
        let lower = self.nodes[child as usize];
        debug_assert!(prefix_len > 0 && prefix_len < lower.len);
        let upper = self.alloc(Node { len: prefix_len, num_children: 1, ..lower });
        self.children.insert(child_key(lower.parent, self.arena.get(lower.start)), upper);
        let lower_start = lower.start + prefix_len;
        let entry = &mut self.nodes[child as usize];
        entry.start = lower_start;
        entry.len -= prefix_len;
        entry.parent = upper;
        self.children.insert(child_key(upper, self.arena.get(lower_start)), child);
        upper
    }

    fn add_leaf(&mut self, parent: NodeIndex, tokens: &[u32], now: u64) {
        if self.is_leaf(parent) {
            self.lru.remove(&(self.nodes[parent as usize].last_access, parent));
        }
        self.nodes[parent as usize].num_children += 1;
        let start = self.arena.len();
        self.arena.extend(tokens);
        let leaf = self.alloc(Node {
            start,
            len: tokens.len(),
            parent,
            num_children: 0,
            last_access: now,
            is_alive: true,
        });
        self.children.insert(child_key(parent, tokens[0]), leaf);
        self.lru.insert((now, leaf));
        self.num_keys += tokens.len();
    }

    /// Evicts least-recently-used leaves until at least `num_tokens` tokens are freed or the
    /// tree is empty, then compacts the arena if its garbage outgrew the bound.
    fn evict(&mut self, num_tokens: usize) {
        let mut freed = 0;
        while freed < num_tokens {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            let node = self.nodes[victim as usize];
            self.children.remove(&child_key(node.parent, self.arena.get(node.start)));
            self.nodes[node.parent as usize].num_children -= 1;
            if self.is_leaf(node.parent) {
                self.lru.insert((self.nodes[node.parent as usize].last_access, node.parent));
            }
            self.nodes[victim as usize].is_alive = false;
            self.free_nodes.push(victim);
            freed += node.len;
            self.num_keys -= node.len;
            self.dead_tokens += node.len;
        }
        if self.dead_tokens > self.max_keys {
            self.compact();
        }
    }

    /// Slides the live edges down over the garbage, in arena order, within the same buffer:
    /// no fresh pages, and the buffer's capacity is kept for the tokens still to come.
    fn compact(&mut self) {
        let mut live: Vec<NodeIndex> =
            (1..self.nodes.len() as NodeIndex).filter(|&index| self.nodes[index as usize].is_alive).collect();
        live.sort_unstable_by_key(|&index| self.nodes[index as usize].start);
        let mut write = 0;
        for index in live {
            let node = &mut self.nodes[index as usize];
            self.arena.copy_within(node.start..node.end(), write);
            node.start = write;
            write += node.len;
        }
        self.arena.truncate(write);
        self.dead_tokens = 0;
    }

    fn alloc(&mut self, node: Node) -> NodeIndex {
        match self.free_nodes.pop() {
            Some(index) => {
                self.nodes[index as usize] = node;
                index
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as NodeIndex
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReplicaTree;

    #[test]
    fn a_split_shares_the_arena_range_instead_of_copying() {
        let mut tree = ReplicaTree::new(100);
        tree.insert(&[1, 2, 3, 4]);
        tree.insert(&[1, 2, 9]);
        // [1,2] and [3,4] are the first edge's range cut in two; only [9] was appended.
        assert_eq!(tree.arena.to_vec(0, tree.arena.len()), [1, 2, 3, 4, 9]);
        assert_eq!(tree.nodes.len(), 4);
        assert_eq!((tree.match_len(&[1, 2, 3, 4, 5]), tree.match_len(&[1, 2, 9])), (4, 3));
        tree.check_invariants().unwrap();
    }

    #[test]
    fn churn_keeps_the_arena_and_node_vector_bounded() {
        let max_keys = 50;
        let mut tree = ReplicaTree::new(max_keys);
        for round in 0..2_000u32 {
            let key: Vec<u32> = (0..(round % 13) + 1).map(|i| (round * 7 + i) % 40).collect();
            tree.insert(&key);
            tree.check_invariants().unwrap();
            assert!(tree.arena.len() <= 2 * max_keys);
            assert!(tree.nodes.len() <= max_keys + 3);
        }
        assert!(tree.num_keys() > 0);
    }
}
