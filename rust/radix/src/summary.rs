//! A bounded summary of the tree for observers (the server's dashboard): the nodes that hold the
//! most reused KV, as a tree of at most `max_nodes` entries whatever the tree's size.
//!
//! Cost: one pass over the live nodes (subtree sizes) plus `max_nodes` heap operations; the tree
//! is only read (no split, no LRU touch), so watching it never changes what gets evicted.

use std::collections::BinaryHeap;

use crate::ids::{Namespace, TokenId};
use crate::tree::RadixTree;

/// How much a summary may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryLimits {
    /// Nodes in the summary, at most.
    pub max_nodes: usize,
    /// Deepest node (in nodes below a namespace root; 1 = a child of the root).
    pub max_depth: usize,
    /// Leading tokens of each node's edge kept (`head_tokens`).
    pub max_head_tokens: usize,
}

/// One summarized node. Parents come before their children in [`PrefixSummary::nodes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryNode {
    /// Position of the parent in `nodes`; `None` for a child of a namespace root.
    pub parent: Option<usize>,
    pub namespace: Option<Namespace>,
    /// Nodes from the root (1 = a child of the root).
    pub depth: usize,
    /// Tokens from the root to this node's end (the cached prefix it completes).
    pub prefix_len: usize,
    /// Tokens on this node's edge.
    pub num_tokens: usize,
    /// Tokens in this node and every node below it.
    pub num_subtree_tokens: usize,
    /// Locks taken through this node (a request sharing it locks at admission and once cached).
    pub num_hits: u64,
    pub lock_ref: u32,
    /// Tree operations (matches, inserts) since it was last used.
    pub idle_ticks: u64,
    /// The first `max_head_tokens` tokens of its edge.
    pub head_tokens: Vec<TokenId>,
}

/// The summary: chosen nodes plus totals of the whole tree.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrefixSummary {
    pub nodes: Vec<SummaryNode>,
    pub num_nodes: usize,
    pub num_tokens: usize,
}

/// Heap entry: highest score first; ties by arena index for a deterministic order.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    score: u128,
    index: std::cmp::Reverse<u32>,
    parent: Option<usize>,
    depth: usize,
    prefix_start: usize,
}

impl RadixTree {
    /// The `limits.max_nodes` nodes with the most reused KV (subtree tokens x (hits + 1)),
    /// chosen best first from the roots down, so every chosen node's parent is chosen too.
    pub fn summarize(&self, limits: SummaryLimits) -> PrefixSummary {
        let subtree = self.subtree_tokens();
        let mut summary = PrefixSummary { nodes: Vec::new(), num_nodes: 0, num_tokens: self.total_size() };
        summary.num_nodes = self.nodes.iter().filter(|n| n.is_alive && !n.is_root).count();
        let mut heap = BinaryHeap::new();
        let mut namespaces: Vec<(Option<Namespace>, u32)> =
            self.roots.iter().map(|(&ns, &r)| (ns, r)).collect();
        namespaces.sort_unstable();
        let namespace_of = |root: u32| namespaces.iter().find(|(_, r)| *r == root).and_then(|(ns, _)| *ns);
        for &(_, root) in &namespaces {
            self.push_children(&mut heap, &subtree, root, None, 1, 0, limits.max_depth);
        }
        while summary.nodes.len() < limits.max_nodes {
            let Some(best) = heap.pop() else { break };
            let index = best.index.0;
            let entry = &self.nodes[index as usize];
            let mut root = index;
            while let Some(parent) = self.nodes[root as usize].parent {
                root = parent;
            }
            let prefix_len = best.prefix_start + entry.tokens.len();
            summary.nodes.push(SummaryNode {
                parent: best.parent,
                namespace: namespace_of(root),
                depth: best.depth,
                prefix_len,
                num_tokens: entry.tokens.len(),
                num_subtree_tokens: subtree[index as usize],
                num_hits: entry.num_hits,
                lock_ref: entry.lock_ref,
                idle_ticks: self.clock.saturating_sub(entry.last_access),
                head_tokens: entry.tokens[..entry.tokens.len().min(limits.max_head_tokens)].to_vec(),
            });
            let position = summary.nodes.len() - 1;
            self.push_children(
                &mut heap,
                &subtree,
                index,
                Some(position),
                best.depth + 1,
                prefix_len,
                limits.max_depth,
            );
        }
        summary
    }

    #[allow(clippy::too_many_arguments)]
    fn push_children(
        &self,
        heap: &mut BinaryHeap<Candidate>,
        subtree: &[usize],
        index: u32,
        parent: Option<usize>,
        depth: usize,
        prefix_start: usize,
        max_depth: usize,
    ) {
        if depth > max_depth {
            return;
        }
        for &child in self.nodes[index as usize].children.values() {
            let entry = &self.nodes[child as usize];
            let score = subtree[child as usize] as u128 * (u128::from(entry.num_hits) + 1);
            heap.push(Candidate { score, index: std::cmp::Reverse(child), parent, depth, prefix_start });
        }
    }

    /// Tokens at and below each arena entry (0 for dead entries), in one depth-first pass.
    fn subtree_tokens(&self) -> Vec<usize> {
        let mut sizes = vec![0usize; self.nodes.len()];
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut stack: Vec<u32> = self.roots.values().copied().collect();
        while let Some(index) = stack.pop() {
            order.push(index);
            stack.extend(self.nodes[index as usize].children.values().copied());
        }
        // Children come after their parent in `order`, so a reverse pass sees them first.
        for &index in order.iter().rev() {
            let entry = &self.nodes[index as usize];
            sizes[index as usize] += entry.tokens.len();
            if let Some(parent) = entry.parent {
                sizes[parent as usize] += sizes[index as usize];
            }
        }
        sizes
    }
}
