//! The prefix tree of the *waiting* requests (not of the cache). It orders `dfs-weight`
//! (heavier subtrees first) and detects in-batch sharing: two requests share exactly the
//! tokens down to their lowest common node, so "does this request share a not-yet-cached
//! prefix with one admitted this step" is a walk up a few nodes, not a token compare.
//!
//! Maintained incrementally: a request is inserted once when it arrives (one pass over its
//! tokens) and removed when it leaves. Nodes are path-compressed: every non-root node has a
//! request ending at it or at least two children.

use std::cmp::Reverse;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use sglr_radix::{Namespace, TokenId};

const NONE: u32 = u32::MAX;

#[derive(Debug)]
struct TrieNode {
    parent: u32,
    /// Tokens of some request through this node; `path[..depth]` is the node's prefix and the
    /// edge from the parent is `path[parent.depth..depth]`. Shared, never copied.
    path: Arc<[TokenId]>,
    depth: usize,
    children: FxHashMap<TokenId, u32>,
    /// Keys of the requests whose tokens end exactly here, in arrival order.
    ending: Vec<u32>,
    /// Requests ending at or below this node.
    num_below: u32,
    /// Epoch of the last `claim` that reached this node.
    claim: u64,
    is_alive: bool,
}

impl TrieNode {
    fn new(parent: u32, path: Arc<[TokenId]>, depth: usize) -> Self {
        Self {
            parent,
            path,
            depth,
            children: FxHashMap::default(),
            ending: Vec::new(),
            num_below: 0,
            claim: 0,
            is_alive: true,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct WaitingTrie {
    nodes: Vec<TrieNode>,
    free_indices: Vec<u32>,
    roots: FxHashMap<Option<Namespace>, u32>,
}

impl WaitingTrie {
    /// Adds request `key` with `tokens`; returns the node where it ends.
    pub(crate) fn insert(&mut self, namespace: Option<Namespace>, tokens: &Arc<[TokenId]>, key: u32) -> u32 {
        let mut node = self.root(namespace);
        let mut pos = 0;
        loop {
            self.nodes[node as usize].num_below += 1;
            if pos == tokens.len() {
                self.nodes[node as usize].ending.push(key);
                return node;
            }
            let next = match self.nodes[node as usize].children.get(&tokens[pos]) {
                Some(&child) => {
                    let entry = &self.nodes[child as usize];
                    let shared = common_prefix_len(&entry.path[pos..entry.depth], &tokens[pos..]);
                    if pos + shared < entry.depth {
                        self.split(child, pos + shared)
                    } else {
                        child
                    }
                }
                None => {
                    let leaf = self.alloc(TrieNode::new(node, Arc::clone(tokens), tokens.len()));
                    self.nodes[node as usize].children.insert(tokens[pos], leaf);
                    leaf
                }
            };
            pos = self.nodes[next as usize].depth;
            node = next;
        }
    }

    /// Removes request `key`, which ends at `node`.
    pub(crate) fn remove(&mut self, node: u32, key: u32) {
        let ending = &mut self.nodes[node as usize].ending;
        let position =
            ending.iter().position(|&k| k == key).expect("a request is removed from the node it ends at");
        ending.remove(position);
        // Drop the count along the path; delete nodes left without requests.
        let mut current = node;
        let mut lowest_survivor = NONE;
        while current != NONE {
            let entry = &mut self.nodes[current as usize];
            entry.num_below -= 1;
            let (parent, is_empty) = (entry.parent, entry.num_below == 0);
            if is_empty && parent != NONE {
                let first = self.nodes[current as usize].path[self.nodes[parent as usize].depth];
                self.nodes[parent as usize].children.remove(&first);
                self.release(current);
            } else if lowest_survivor == NONE {
                lowest_survivor = current;
            }
            current = parent;
        }
        // Only the node that lost a request or a child can have become a pass-through.
        if lowest_survivor != NONE {
            self.merge_if_pass_through(lowest_survivor);
        }
    }

    /// Marks the path from `node` to its root with `epoch`.
    pub(crate) fn claim(&mut self, node: u32, epoch: u64) {
        let mut current = node;
        while current != NONE && self.nodes[current as usize].claim != epoch {
            self.nodes[current as usize].claim = epoch;
            current = self.nodes[current as usize].parent;
        }
    }

    /// Length of the longest prefix that the request ending at `node` shares with a request
    /// whose path was claimed with `epoch` (0 if none).
    pub(crate) fn claimed_depth(&self, node: u32, epoch: u64) -> usize {
        let mut current = node;
        while current != NONE {
            let entry = &self.nodes[current as usize];
            if entry.claim == epoch {
                return entry.depth;
            }
            current = entry.parent;
        }
        0
    }

    /// Depth-first order of the requests `score` accepts (`Some(cached match length)`).
    ///
    /// At each node, the requests ending there and the child subtrees are visited by: highest
    /// score first (a subtree scores its best request), then most accepted requests, then
    /// requests before subtrees in arrival order, subtrees by first token. The first request
    /// is therefore always one with the longest cached match (an `lpm` choice, so the offline
    /// optimum still holds) and the rest follow the prefix tree, biggest groups first, so
    /// requests sharing an uncached prefix are admitted together and cold groups start with
    /// the largest. Namespaces are visited in ascending order. O(nodes) plus sorting.
    pub(crate) fn dfs_by_weight(&self, score: impl Fn(u32) -> Option<usize>, mut emit: impl FnMut(u32)) {
        let mut roots: Vec<(Option<Namespace>, u32)> =
            self.roots.iter().map(|(&ns, &root)| (ns, root)).collect();
        roots.sort_unstable();
        // Pre-order, then aggregate (best score, accepted count) bottom-up.
        let mut preorder: Vec<u32> = Vec::new();
        let mut stack: Vec<u32> = roots.iter().map(|&(_, root)| root).collect();
        while let Some(node) = stack.pop() {
            preorder.push(node);
            stack.extend(self.nodes[node as usize].children.values().copied());
        }
        let mut best: Vec<Option<(usize, u32)>> = vec![None; self.nodes.len()];
        for &node in preorder.iter().rev() {
            let entry = &self.nodes[node as usize];
            let mut acc: Option<(usize, u32)> = None;
            let mut add = |item: Option<(usize, u32)>| {
                if let Some((item_score, item_count)) = item {
                    acc = Some(match acc {
                        Some((s, c)) => (s.max(item_score), c + item_count),
                        None => (item_score, item_count),
                    });
                }
            };
            entry.ending.iter().for_each(|&key| add(score(key).map(|s| (s, 1))));
            entry.children.values().for_each(|&child| add(best[child as usize]));
            best[node as usize] = acc;
        }
        // Visit: items are requests (key) or subtrees (node), sorted at each node.
        enum Item {
            Request(u32),
            Subtree(u32),
        }
        let mut stack: Vec<Item> = roots.iter().rev().map(|&(_, root)| Item::Subtree(root)).collect();
        // (best score, count, requests before subtrees, position or first token)
        type VisitOrder = (Reverse<usize>, Reverse<u32>, u8, u64);
        let mut items: Vec<(VisitOrder, Item)> = Vec::new();
        while let Some(item) = stack.pop() {
            let node = match item {
                Item::Request(key) => {
                    emit(key);
                    continue;
                }
                Item::Subtree(node) => node,
            };
            let entry = &self.nodes[node as usize];
            items.clear();
            for (position, &key) in entry.ending.iter().enumerate() {
                if let Some(s) = score(key) {
                    items.push(((Reverse(s), Reverse(1), 0, position as u64), Item::Request(key)));
                }
            }
            for (&first, &child) in &entry.children {
                if let Some((s, count)) = best[child as usize] {
                    let order = (Reverse(s), Reverse(count), 1, u64::from(first));
                    items.push((order, Item::Subtree(child)));
                }
            }
            items.sort_unstable_by_key(|(order, _)| *order);
            stack.extend(items.drain(..).rev().map(|(_, item)| item));
        }
    }

    pub(crate) fn num_requests(&self) -> usize {
        self.roots.values().map(|&root| self.nodes[root as usize].num_below as usize).sum()
    }

    /// The tokens of the path ending at `node` (for invariant checks).
    pub(crate) fn path(&self, node: u32) -> &[TokenId] {
        let entry = &self.nodes[node as usize];
        &entry.path[..entry.depth]
    }

    pub(crate) fn is_live_ending(&self, node: u32, key: u32) -> bool {
        self.nodes.get(node as usize).is_some_and(|entry| entry.is_alive && entry.ending.contains(&key))
    }

    /// Structural checks: counts add up, edges are consistent and non-empty, the tree is
    /// path-compressed and every child's path extends its parent's.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        for (index, entry) in self.nodes.iter().enumerate() {
            if !entry.is_alive {
                continue;
            }
            let below: u32 = entry.children.values().map(|&child| self.nodes[child as usize].num_below).sum();
            if entry.num_below != below + entry.ending.len() as u32 {
                return Err(format!(
                    "trie node {index}: num_below {} != {below} + {}",
                    entry.num_below,
                    entry.ending.len()
                ));
            }
            for (&first, &child) in &entry.children {
                let c = &self.nodes[child as usize];
                if !c.is_alive || c.parent != index as u32 || c.depth <= entry.depth {
                    return Err(format!("trie node {index}: bad child {child}"));
                }
                if c.path[entry.depth] != first || c.path[..entry.depth] != entry.path[..entry.depth] {
                    return Err(format!("trie node {index}: child {child} does not extend its path"));
                }
            }
            if entry.parent == NONE {
                if entry.depth != 0 || !self.roots.values().any(|&r| r == index as u32) {
                    return Err(format!("trie node {index}: unregistered root"));
                }
            } else if entry.num_below == 0 || (entry.ending.is_empty() && entry.children.len() < 2) {
                return Err(format!("trie node {index}: empty or pass-through node"));
            }
        }
        Ok(())
    }

    fn root(&mut self, namespace: Option<Namespace>) -> u32 {
        if let Some(&root) = self.roots.get(&namespace) {
            return root;
        }
        let root = self.alloc(TrieNode::new(NONE, Arc::from(Vec::new()), 0));
        self.roots.insert(namespace, root);
        root
    }

    /// Puts a new node for `child`'s path up to `depth` between `child` and its parent.
    fn split(&mut self, child: u32, depth: usize) -> u32 {
        let entry = &self.nodes[child as usize];
        let parent = entry.parent;
        let mut upper = TrieNode::new(parent, Arc::clone(&entry.path), depth);
        upper.num_below = entry.num_below;
        upper.claim = entry.claim;
        upper.children.insert(entry.path[depth], child);
        let first = entry.path[self.nodes[parent as usize].depth];
        let upper = self.alloc(upper);
        self.nodes[child as usize].parent = upper;
        self.nodes[parent as usize].children.insert(first, upper);
        upper
    }

    /// Folds a non-root node with no requests and one child into that child.
    fn merge_if_pass_through(&mut self, node: u32) {
        let entry = &self.nodes[node as usize];
        if entry.parent == NONE || !entry.ending.is_empty() || entry.children.len() != 1 {
            return;
        }
        let child = *entry.children.values().next().expect("one child");
        let parent = entry.parent;
        let first = entry.path[self.nodes[parent as usize].depth];
        self.nodes[child as usize].parent = parent;
        self.nodes[parent as usize].children.insert(first, child);
        self.release(node);
    }

    fn alloc(&mut self, node: TrieNode) -> u32 {
        match self.free_indices.pop() {
            Some(index) => {
                self.nodes[index as usize] = node;
                index
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    fn release(&mut self, index: u32) {
        let entry = &mut self.nodes[index as usize];
        entry.is_alive = false;
        entry.children = FxHashMap::default();
        entry.ending = Vec::new();
        entry.path = Arc::from(Vec::new());
        self.free_indices.push(index);
    }
}

/// Length of the common prefix of `a` and `b` (chunked so the compiler vectorizes it).
pub(crate) fn common_prefix_len(a: &[TokenId], b: &[TokenId]) -> usize {
    const CHUNK: usize = 16;
    let limit = a.len().min(b.len());
    let mut matched = 0;
    while matched + CHUNK <= limit && a[matched..matched + CHUNK] == b[matched..matched + CHUNK] {
        matched += CHUNK;
    }
    while matched < limit && a[matched] == b[matched] {
        matched += 1;
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arc(tokens: &[TokenId]) -> Arc<[TokenId]> {
        Arc::from(tokens.to_vec())
    }

    #[test]
    fn dfs_visits_heavier_subtrees_first_and_prefixes_before_extensions() {
        let mut trie = WaitingTrie::default();
        let seqs: [&[TokenId]; 5] = [&[9, 9], &[1, 2, 3], &[1, 2], &[1, 2, 4], &[5]];
        let nodes: Vec<u32> =
            seqs.iter().enumerate().map(|(key, seq)| trie.insert(None, &arc(seq), key as u32)).collect();
        trie.check_invariants().unwrap();
        let mut order = Vec::new();
        trie.dfs_by_weight(|_| Some(0), |key| order.push(key));
        // [1,2] (3 requests) first: its own request, then [1,2,3] and [1,2,4]; then the
        // single-request subtrees by first token.
        assert_eq!(order, vec![2, 1, 3, 4, 0]);
        // A cached match outranks weight; unscored requests are left out.
        order.clear();
        let score = |key: u32| match key {
            4 => None,
            0 => Some(2),
            _ => Some(0),
        };
        trie.dfs_by_weight(score, |key| order.push(key));
        assert_eq!(order, vec![0, 2, 1, 3]);
        assert_eq!(trie.path(nodes[3]), &[1, 2, 4]);
    }

    #[test]
    fn claims_report_the_shared_depth() {
        let mut trie = WaitingTrie::default();
        let a = trie.insert(None, &arc(&[1, 2, 3, 4]), 0);
        let b = trie.insert(None, &arc(&[1, 2, 3, 5]), 1);
        let c = trie.insert(None, &arc(&[1, 7]), 2);
        let d = trie.insert(Some(1), &arc(&[1, 2, 3, 4]), 3);
        trie.claim(a, 1);
        assert_eq!(trie.claimed_depth(b, 1), 3);
        assert_eq!(trie.claimed_depth(c, 1), 1);
        assert_eq!(trie.claimed_depth(a, 1), 4);
        assert_eq!(trie.claimed_depth(d, 1), 0, "namespaces never share");
        assert_eq!(trie.claimed_depth(b, 2), 0, "claims are per epoch");
    }

    proptest! {
        /// Against a naive model: the shared depth with the claimed set is the longest common
        /// prefix with any claimed request; removal keeps the tree compressed and consistent.
        #[test]
        fn matches_naive_longest_common_prefix(
            seqs in prop::collection::vec(prop::collection::vec(0u32..3, 0..8), 1..30),
            claimed in prop::collection::vec(any::<bool>(), 30),
            removed in prop::collection::vec(any::<bool>(), 30),
        ) {
            let mut trie = WaitingTrie::default();
            let nodes: Vec<u32> = seqs
                .iter()
                .enumerate()
                .map(|(key, seq)| trie.insert(None, &arc(seq), key as u32))
                .collect();
            trie.check_invariants().unwrap();
            let mut live: Vec<usize> = Vec::new();
            for (key, &node) in nodes.iter().enumerate() {
                if removed[key] {
                    trie.remove(node, key as u32);
                    trie.check_invariants().unwrap();
                } else {
                    live.push(key);
                }
            }
            prop_assert_eq!(trie.num_requests(), live.len());
            // Handles of live requests survive the removals of others (merges fold parents
            // into children, never the other way round).
            for &key in &live {
                prop_assert!(trie.is_live_ending(nodes[key], key as u32));
                prop_assert_eq!(trie.path(nodes[key]), &seqs[key][..]);
            }
            for &key in &live {
                if claimed[key] {
                    trie.claim(nodes[key], 7);
                }
            }
            for &key in &live {
                let expected = live
                    .iter()
                    .filter(|&&other| claimed[other])
                    .map(|&other| common_prefix_len(&seqs[key], &seqs[other]))
                    .max()
                    .unwrap_or(0);
                prop_assert_eq!(trie.claimed_depth(nodes[key], 7), expected);
            }
            let mut order = Vec::new();
            trie.dfs_by_weight(|_| Some(0), |key| order.push(key as usize));
            let mut sorted = order.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, live.clone());
            // Depth-first: requests with the same first token come out contiguously.
            let firsts: Vec<Option<u32>> = order.iter().map(|&k| seqs[k].first().copied()).collect();
            let mut seen = Vec::new();
            for (i, first) in firsts.iter().enumerate() {
                if i > 0 && firsts[i - 1] != *first {
                    prop_assert!(!seen.contains(first), "first token {:?} split in {:?}", first, firsts);
                }
                seen.push(*first);
            }
        }
    }
}
