use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use crate::compare::common_prefix_len;
use crate::error::RadixError;
use crate::ids::{Namespace, NodeId, SlotId, TokenId};
use crate::node::Node;

/// Result of [`RadixTree::match_prefix`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchOutcome {
    /// Slots of the longest cached prefix, in token order.
    pub slots: Vec<SlotId>,
    /// The node at which the matched prefix ends (the namespace root when nothing matched).
    /// Lock it to keep the prefix from being evicted while a request uses it.
    pub node: NodeId,
}

/// Result of [`RadixTree::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InsertOutcome {
    /// Leading tokens that were already cached. The caller's slots for that span duplicate the
    /// tree's and are the caller's to free; the rest now belong to the tree.
    pub num_cached: usize,
    /// The node at which the inserted sequence ends.
    pub node: NodeId,
}

/// Token-prefix index over KV slots with LRU leaf eviction and lock counts.
///
/// Sizes: `evictable_size` counts tokens in unlocked nodes, `protected_size` tokens in locked
/// nodes; together they are every cached token.
#[derive(Debug, Default)]
pub struct RadixTree {
    pub(crate) nodes: Vec<Node>,
    free_indices: Vec<u32>,
    pub(crate) roots: FxHashMap<Option<Namespace>, u32>,
    /// Evictable leaves ordered by (last access, arena index): the first is the LRU victim.
    lru: BTreeSet<(u64, u32)>,
    pub(crate) clock: u64,
    evictable_size: usize,
    protected_size: usize,
}

impl RadixTree {
    pub fn new() -> Self {
        Self::default()
    }

    /// Tokens in unlocked nodes (reclaimable by `evict`, possibly after their children).
    pub fn evictable_size(&self) -> usize {
        self.evictable_size
    }

    /// Tokens in nodes that some running request has locked.
    pub fn protected_size(&self) -> usize {
        self.protected_size
    }

    /// Every cached token.
    pub fn total_size(&self) -> usize {
        self.evictable_size + self.protected_size
    }

    /// Live non-root nodes.
    pub fn num_nodes(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_alive && !n.is_root).count()
    }

    /// Finds the longest cached prefix of `tokens` in `namespace`.
    ///
    /// Mutates the tree: a match that ends inside an edge splits that node so the returned
    /// node ends exactly at the match, and every node on the path is marked as just used.
    pub fn match_prefix(&mut self, namespace: Option<Namespace>, tokens: &[TokenId]) -> MatchOutcome {
        // Sized for a full hit up front: growing by doubling costs more than the slack.
        let mut slots = Vec::with_capacity(tokens.len());
        let node = self.match_prefix_into(namespace, tokens, &mut slots);
        MatchOutcome { slots, node }
    }

    /// Like [`RadixTree::match_prefix`] but appends the matched slots to `out` (so a batch of
    /// matches can fill one buffer) and returns the node.
    pub fn match_prefix_into(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        out: &mut Vec<SlotId>,
    ) -> NodeId {
        let (node, _) = self.walk(namespace, tokens, |matched| out.extend_from_slice(matched));
        self.handle(node)
    }

    /// Like [`RadixTree::match_prefix`] but returns only the matched length and node, without
    /// copying slot ids (what a scheduler needs to rank requests).
    pub fn match_prefix_len(&mut self, namespace: Option<Namespace>, tokens: &[TokenId]) -> (usize, NodeId) {
        let mut matched_len = 0;
        let node = self.walk(namespace, tokens, |matched| matched_len += matched.len());
        (matched_len, self.handle(node.0))
    }

    /// Length of the longest cached prefix of `tokens` in `namespace`, leaving the tree as it
    /// is: no split, no LRU touch. For observers that must not change what gets evicted.
    pub fn peek_match_len(&self, namespace: Option<Namespace>, tokens: &[TokenId]) -> usize {
        let Some(&root) = self.roots.get(&namespace) else {
            return 0;
        };
        let (mut node, mut pos) = (root, 0);
        while pos < tokens.len() {
            let Some(&child) = self.nodes[node as usize].children.get(&tokens[pos]) else {
                break;
            };
            let edge = &self.nodes[child as usize].tokens;
            let shared = common_prefix_len(edge, &tokens[pos..]);
            pos += shared;
            if shared < edge.len() {
                break;
            }
            node = child;
        }
        pos
    }

    /// Caches `tokens` with their KV `slots`.
    ///
    /// Only the part past the longest cached prefix is added (as one new leaf); the caller
    /// keeps ownership of its slots for the already-cached span and should free them.
    pub fn insert(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        slots: &[SlotId],
    ) -> Result<InsertOutcome, RadixError> {
        if tokens.len() != slots.len() {
            return Err(RadixError::LengthMismatch { num_tokens: tokens.len(), num_slots: slots.len() });
        }
        let mut num_cached = 0;
        let (mut node, rest_start) = self.walk(namespace, tokens, |matched| num_cached += matched.len());
        debug_assert_eq!(num_cached, rest_start);
        if rest_start < tokens.len() {
            let now = self.clock;
            let leaf = self.alloc(Node::new(
                Some(node),
                tokens[rest_start..].to_vec(),
                slots[rest_start..].to_vec(),
                now,
            ));
            // The parent stops being a leaf; the new leaf is unlocked, hence evictable.
            self.lru_remove(node);
            self.nodes[node as usize].children.insert(tokens[rest_start], leaf);
            self.evictable_size += tokens.len() - rest_start;
            self.lru_sync(leaf);
            node = leaf;
        }
        Ok(InsertOutcome { num_cached, node: self.handle(node) })
    }

    /// Adds one lock reference to `node` and each ancestor, moving newly locked tokens from
    /// evictable to protected. Locking a root is a no-op.
    pub fn lock(&mut self, node: NodeId) -> Result<(), RadixError> {
        let mut index = self.resolve(node)?;
        while !self.nodes[index as usize].is_root {
            let entry = &mut self.nodes[index as usize];
            if entry.lock_ref == 0 {
                self.evictable_size -= entry.tokens.len();
                self.protected_size += entry.tokens.len();
            }
            entry.lock_ref += 1;
            entry.num_hits += 1;
            let parent = entry.parent.expect("non-root nodes have parents");
            self.lru_sync(index);
            index = parent;
        }
        Ok(())
    }

    /// Removes one lock reference from `node` and each ancestor (the inverse of `lock`).
    /// Fails without changing anything if `node` is not locked.
    pub fn unlock(&mut self, node: NodeId) -> Result<(), RadixError> {
        let mut index = self.resolve(node)?;
        let start = &self.nodes[index as usize];
        if !start.is_root && start.lock_ref == 0 {
            return Err(RadixError::UnlockBelowZero(node));
        }
        while !self.nodes[index as usize].is_root {
            let entry = &mut self.nodes[index as usize];
            entry.lock_ref -= 1;
            if entry.lock_ref == 0 {
                self.protected_size -= entry.tokens.len();
                self.evictable_size += entry.tokens.len();
            }
            let parent = entry.parent.expect("non-root nodes have parents");
            self.lru_sync(index);
            index = parent;
        }
        Ok(())
    }

    /// Current lock count of `node` (0 for roots).
    pub fn lock_ref(&self, node: NodeId) -> Result<u32, RadixError> {
        let index = self.resolve(node)?;
        Ok(self.nodes[index as usize].lock_ref)
    }

    /// Evicts least-recently-used unlocked leaves until at least `num_tokens` tokens are freed
    /// or nothing evictable is left; a parent becomes a candidate once its children are gone.
    /// Whole nodes are evicted, so the result may exceed `num_tokens` by less than one node.
    /// Returns the freed slot ids for the KV pool to take back.
    pub fn evict(&mut self, num_tokens: usize) -> Vec<SlotId> {
        let mut freed = Vec::new();
        while freed.len() < num_tokens {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            let entry = &mut self.nodes[victim as usize];
            entry.in_lru = false;
            freed.append(&mut entry.slots);
            let first_token = entry.tokens[0];
            let num_victim_tokens = entry.tokens.len();
            let parent = entry.parent.expect("evictable nodes are not roots");
            self.evictable_size -= num_victim_tokens;
            self.nodes[parent as usize].children.remove(&first_token);
            self.release(victim);
            self.lru_sync(parent);
        }
        freed
    }

    /// Drops every node; outstanding handles become stale. The caller must already have taken
    /// back all cached slots (the tree frees nothing).
    pub fn reset(&mut self) {
        for index in 0..self.nodes.len() as u32 {
            if self.nodes[index as usize].is_alive {
                self.release(index);
            }
        }
        self.roots.clear();
        self.lru.clear();
        self.evictable_size = 0;
        self.protected_size = 0;
    }

    /// Walks from the namespace root along `tokens`, splitting the last node when the match
    /// ends inside its edge and touching every node on the path. Calls `on_match` with the
    /// slots of each matched node. Returns the last node and the matched length.
    fn walk(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        on_match: impl FnMut(&[SlotId]),
    ) -> (u32, usize) {
        self.clock += 1;
        let now = self.clock;
        let root = self.root(namespace);
        self.touch(root, now);
        self.descend(root, 0, tokens, now, on_match)
    }

    /// The downward part of `walk`: continues from `node`, which ends after `tokens[..pos]`.
    fn descend(
        &mut self,
        mut node: u32,
        mut pos: usize,
        tokens: &[TokenId],
        now: u64,
        mut on_match: impl FnMut(&[SlotId]),
    ) -> (u32, usize) {
        while pos < tokens.len() {
            let Some(&child) = self.nodes[node as usize].children.get(&tokens[pos]) else {
                break;
            };
            let edge_len = self.nodes[child as usize].tokens.len();
            let shared = common_prefix_len(&self.nodes[child as usize].tokens, &tokens[pos..]);
            let child = if shared < edge_len { self.split(child, shared) } else { child };
            self.touch(child, now);
            on_match(&self.nodes[child as usize].slots);
            pos += shared;
            node = child;
            if shared < edge_len {
                break;
            }
        }
        (node, pos)
    }

    /// Continues an earlier [`RadixTree::match_prefix_len`] of the same `tokens` in the same
    /// `namespace` that ended at `node` after `matched_len` tokens, walking only what has been
    /// cached below `node` since. The result and the LRU touches equal a fresh
    /// `match_prefix_len`: the tree evicts only leaves, so while `node` lives its whole path is
    /// still cached (splits keep the handle on the lower part, so the depth is unchanged).
    ///
    /// Cost: the node's depth in nodes plus the newly matched tokens, instead of a compare of
    /// every token. A `matched_len` or `namespace` that does not fit `node` falls back to a full
    /// walk; a stale or unknown `node` is an error (the caller matches from the root).
    pub fn extend_match_len(
        &mut self,
        namespace: Option<Namespace>,
        node: NodeId,
        matched_len: usize,
        tokens: &[TokenId],
    ) -> Result<(usize, NodeId), RadixError> {
        let start = self.resolve(node)?;
        let mut depth = 0;
        let mut top = start;
        while let Some(parent) = self.nodes[top as usize].parent {
            depth += self.nodes[top as usize].tokens.len();
            top = parent;
        }
        if depth != matched_len || matched_len > tokens.len() || self.roots.get(&namespace) != Some(&top) {
            return Ok(self.match_prefix_len(namespace, tokens));
        }
        self.clock += 1;
        let now = self.clock;
        let mut index = Some(start);
        while let Some(current) = index {
            self.touch(current, now);
            index = self.nodes[current as usize].parent;
        }
        let (end, matched_len) = self.descend(start, matched_len, tokens, now, |_| {});
        Ok((matched_len, self.handle(end)))
    }

    /// Splits `child` after `prefix_len` tokens: a new node takes the prefix and becomes the
    /// parent of `child`, which keeps the suffix (and its handle). Returns the new node.
    fn split(&mut self, child: u32, prefix_len: usize) -> u32 {
        debug_assert!(prefix_len > 0 && prefix_len < self.nodes[child as usize].tokens.len());
        let entry = &mut self.nodes[child as usize];
        let suffix_tokens = entry.tokens.split_off(prefix_len);
        let suffix_slots = entry.slots.split_off(prefix_len);
        let prefix_tokens = std::mem::replace(&mut entry.tokens, suffix_tokens);
        let prefix_slots = std::mem::replace(&mut entry.slots, suffix_slots);
        let parent = entry.parent.expect("split nodes are not roots");
        let (lock_ref, last_access, suffix_first) = (entry.lock_ref, entry.last_access, entry.tokens[0]);
        let num_hits = entry.num_hits;

        let mut upper = Node::new(Some(parent), prefix_tokens, prefix_slots, last_access);
        upper.lock_ref = lock_ref;
        upper.num_hits = num_hits;
        upper.children.insert(suffix_first, child);
        let prefix_first = upper.tokens[0];
        let upper = self.alloc(upper);
        self.nodes[child as usize].parent = Some(upper);
        self.nodes[parent as usize].children.insert(prefix_first, upper);
        // Lock counts are copied, so evictable/protected sizes are unchanged.
        upper
    }

    fn root(&mut self, namespace: Option<Namespace>) -> u32 {
        if let Some(&root) = self.roots.get(&namespace) {
            return root;
        }
        let root = self.alloc(Node::new(None, Vec::new(), Vec::new(), self.clock));
        self.roots.insert(namespace, root);
        root
    }

    fn touch(&mut self, index: u32, now: u64) {
        if self.nodes[index as usize].last_access == now {
            return;
        }
        self.lru_remove(index);
        self.nodes[index as usize].last_access = now;
        self.lru_sync(index);
    }

    /// Puts `index` in or out of the LRU set according to `can_evict`.
    fn lru_sync(&mut self, index: u32) {
        let entry = &mut self.nodes[index as usize];
        let should_be_in = entry.can_evict();
        if should_be_in != entry.in_lru {
            entry.in_lru = should_be_in;
            let key = (entry.last_access, index);
            if should_be_in {
                self.lru.insert(key);
            } else {
                self.lru.remove(&key);
            }
        }
    }

    fn lru_remove(&mut self, index: u32) {
        let entry = &mut self.nodes[index as usize];
        if entry.in_lru {
            entry.in_lru = false;
            self.lru.remove(&(entry.last_access, index));
        }
    }

    fn alloc(&mut self, mut node: Node) -> u32 {
        match self.free_indices.pop() {
            Some(index) => {
                node.generation = self.nodes[index as usize].generation;
                self.nodes[index as usize] = node;
                index
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Frees an arena entry; bumping the generation makes old handles stale.
    fn release(&mut self, index: u32) {
        let entry = &mut self.nodes[index as usize];
        entry.is_alive = false;
        entry.in_lru = false;
        entry.generation = entry.generation.wrapping_add(1);
        entry.children = FxHashMap::default();
        entry.tokens = Vec::new();
        entry.slots = Vec::new();
        self.free_indices.push(index);
    }

    pub(crate) fn handle(&self, index: u32) -> NodeId {
        NodeId { index, generation: self.nodes[index as usize].generation }
    }

    pub(crate) fn resolve(&self, node: NodeId) -> Result<u32, RadixError> {
        let entry = self.nodes.get(node.index as usize).ok_or(RadixError::UnknownNode(node))?;
        if node.generation < entry.generation {
            return Err(RadixError::StaleNode(node));
        }
        if node.generation > entry.generation || !entry.is_alive {
            return Err(RadixError::UnknownNode(node));
        }
        Ok(node.index)
    }

    /// The LRU set, for the invariant checker.
    pub(crate) fn lru_entries(&self) -> &BTreeSet<(u64, u32)> {
        &self.lru
    }
}
