//! A byte trie over the vocabulary, flattened in depth-first order.
//!
//! One walk over the trie per DFA state gives that state's allowed tokens: tokens sharing a
//! prefix share the DFA steps for it, and a subtree whose prefix is already dead is skipped
//! with one jump (`subtree_end`). Nodes are 12 bytes; a 100k vocabulary has about 250k nodes.

/// One trie node. Node `i`'s children follow it directly; its subtree is `i..subtree_end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrieNode {
    /// One past the last node of this node's subtree.
    pub subtree_end: u32,
    /// Tokens ending at this node are `token_ids[token_start..next.token_start]`.
    pub token_start: u32,
    /// Length of the byte path from the root to this node (0 for the root).
    pub depth: u16,
    /// The byte on the edge into this node (unused for the root).
    pub byte: u8,
    /// Bytes on the longest path below this node (0 for a leaf), capped at 255: a walk that
    /// needs more bytes than that to reach something skips the subtree.
    pub height: u8,
}

#[derive(Debug, Clone, Default)]
pub struct TokenTrie {
    /// Root at 0, then every node in depth-first order, then one sentinel (never walked) that
    /// bounds the token range of the last real node.
    pub nodes: Vec<TrieNode>,
    /// Each node's parent (the root's and the sentinel's: 0), so a node's path is read upwards
    /// in depth steps instead of a walk from the root past every sibling subtree.
    pub parents: Vec<u32>,
    /// Each node's children (ascending, so by byte) at `child_nodes[child_start[n]..child_start[n + 1]]`:
    /// a walk that follows a few bytes (a declared name inside a free key) finds their children
    /// by search instead of stepping past every sibling (a wide node has hundreds).
    child_start: Vec<u32>,
    child_nodes: Vec<u32>,
    pub token_ids: Vec<u32>,
    pub max_depth: usize,
    /// One more than the largest token id (0 when empty): masks must cover it.
    pub id_bound: usize,
}

impl TokenTrie {
    /// Builds the trie from `(token id, bytes)` pairs; tokens with equal bytes share a node.
    pub fn build<'a>(tokens: impl Iterator<Item = (u32, &'a [u8])>) -> Self {
        let mut sorted: Vec<(u32, &[u8])> = tokens.filter(|(_, b)| !b.is_empty()).collect();
        sorted.sort_unstable_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(&b.0)));

        let mut nodes = vec![TrieNode { subtree_end: 0, token_start: 0, depth: 0, byte: 0, height: 0 }];
        let mut parents = vec![0u32];
        let mut token_ids = Vec::with_capacity(sorted.len());
        // `path[d]` is the node at depth d on the path to the previous token.
        let mut path: Vec<u32> = vec![0];
        let mut previous: &[u8] = &[];
        let mut max_depth = 0;
        for &(token_id, bytes) in &sorted {
            let shared = previous.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > shared + 1 {
                let closed = path.pop().expect("path is never empty") as usize;
                nodes[closed].subtree_end = nodes.len() as u32;
            }
            for (offset, &byte) in bytes[shared..].iter().enumerate() {
                parents.push(*path.last().expect("path is never empty"));
                path.push(nodes.len() as u32);
                nodes.push(TrieNode {
                    subtree_end: 0,
                    token_start: token_ids.len() as u32,
                    depth: (shared + offset + 1) as u16,
                    byte,
                    height: 0,
                });
            }
            // NOTE: sorting puts a token before every longer token it prefixes, so the node it
            // ends at is always the last one created and its token range stays contiguous.
            token_ids.push(token_id);
            max_depth = max_depth.max(bytes.len());
            previous = bytes;
        }
        while let Some(closed) = path.pop() {
            nodes[closed as usize].subtree_end = nodes.len() as u32;
        }
        nodes.push(TrieNode {
            subtree_end: nodes.len() as u32 + 1,
            token_start: token_ids.len() as u32,
            depth: 0,
            byte: 0,
            height: 0,
        });
        parents.push(0);
        set_heights(&mut nodes);
        // Children in node order: a node's children are the later nodes whose parent it is.
        let mut child_start = vec![0u32; nodes.len() + 1];
        for &parent in &parents[1..nodes.len() - 1] {
            child_start[parent as usize + 1] += 1;
        }
        for index in 0..nodes.len() {
            child_start[index + 1] += child_start[index];
        }
        let mut fill = child_start.clone();
        let mut child_nodes = vec![0u32; nodes.len().saturating_sub(2)];
        for (child, &parent) in parents.iter().enumerate().take(nodes.len() - 1).skip(1) {
            child_nodes[fill[parent as usize] as usize] = child as u32;
            fill[parent as usize] += 1;
        }
        let id_bound = token_ids.iter().max().map_or(0, |&t| t as usize + 1);
        Self { nodes, parents, child_start, child_nodes, token_ids, max_depth, id_bound }
    }

    /// Number of real nodes (root included, sentinel excluded).
    #[cfg(test)]
    pub fn num_nodes(&self) -> usize {
        self.nodes.len() - 1
    }

    /// Tokens whose bytes end exactly at node `index`.
    #[cfg(test)]
    pub fn tokens_at(&self, index: usize) -> &[u32] {
        let start = self.nodes[index].token_start as usize;
        let end = self.nodes[index + 1].token_start as usize;
        &self.token_ids[start..end]
    }

    /// The bytes from the root to node `index`.
    pub fn path_bytes(&self, index: usize) -> Vec<u8> {
        let mut path = vec![0u8; self.nodes[index].depth as usize];
        let mut node = index;
        for byte in path.iter_mut().rev() {
            *byte = self.nodes[node].byte;
            node = self.parents[node] as usize;
        }
        path
    }

    /// The child of node `index` on `byte`, if any.
    pub fn child(&self, index: usize, byte: u8) -> Option<usize> {
        let children =
            &self.child_nodes[self.child_start[index] as usize..self.child_start[index + 1] as usize];
        children
            .binary_search_by_key(&byte, |&child| self.nodes[child as usize].byte)
            .ok()
            .map(|at| children[at] as usize)
    }

    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<TrieNode>()
            + (self.parents.len() + self.child_start.len() + self.child_nodes.len() + self.token_ids.len())
                * 4
    }
}

/// Fills `height` bottom-up: a node's children are the chain of subtrees after it.
fn set_heights(nodes: &mut [TrieNode]) {
    let real = nodes.len() - 1;
    for index in (0..real).rev() {
        let end = nodes[index].subtree_end as usize;
        let mut height = 0u8;
        let mut child = index + 1;
        while child < end {
            height = height.max(nodes[child].height.saturating_add(1));
            child = nodes[child].subtree_end as usize;
        }
        nodes[index].height = height;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect_paths(trie: &TokenTrie) -> Vec<(Vec<u8>, Vec<u32>)> {
        let mut out = Vec::new();
        let mut path: Vec<u8> = Vec::new();
        for index in 1..trie.num_nodes() {
            let node = trie.nodes[index];
            path.truncate(node.depth as usize - 1);
            path.push(node.byte);
            if !trie.tokens_at(index).is_empty() {
                out.push((path.clone(), trie.tokens_at(index).to_vec()));
            }
        }
        out
    }

    #[test]
    fn dfs_order_spells_every_token_once() {
        let tokens: Vec<(u32, &[u8])> =
            vec![(0, b"ab"), (1, b"a"), (2, b"abc"), (3, b"b"), (4, b"ab"), (5, b""), (6, b"\xff\x00")];
        let trie = TokenTrie::build(tokens.into_iter());
        let paths = collect_paths(&trie);
        assert_eq!(
            paths,
            vec![
                (b"a".to_vec(), vec![1]),
                (b"ab".to_vec(), vec![0, 4]),
                (b"abc".to_vec(), vec![2]),
                (b"b".to_vec(), vec![3]),
                (b"\xff\x00".to_vec(), vec![6]),
            ]
        );
        assert_eq!(trie.max_depth, 3);
        // Subtree of "a" is a, ab, abc; the root spans everything.
        assert_eq!(trie.nodes[1].subtree_end, 4);
        assert_eq!(trie.nodes[0].subtree_end as usize, trie.num_nodes());
        // Heights: root 3 (abc), a 2, ab 1, abc 0, b 0, \xff 1.
        let heights: Vec<u8> = trie.nodes[..trie.num_nodes()].iter().map(|n| n.height).collect();
        assert_eq!(heights, vec![3, 2, 1, 0, 0, 1, 0]);
        // Read upwards through the parents, every node's path is the one the walk spells.
        let mut path: Vec<u8> = Vec::new();
        for index in 1..trie.num_nodes() {
            let node = trie.nodes[index];
            path.truncate(node.depth as usize - 1);
            path.push(node.byte);
            assert_eq!(trie.path_bytes(index), path, "node {index}");
        }
        assert!(trie.path_bytes(0).is_empty());
        // Every node is found from its parent by its byte, and no other byte finds a child.
        for index in 1..trie.num_nodes() {
            let node = trie.nodes[index];
            assert_eq!(trie.child(trie.parents[index] as usize, node.byte), Some(index), "node {index}");
        }
        assert_eq!(trie.child(0, b'z'), None);
        assert_eq!(trie.child(3, b'a'), None);
    }

    #[test]
    fn heights_cap_at_255() {
        let long = vec![b'x'; 300];
        let trie = TokenTrie::build(std::iter::once((0, long.as_slice())));
        assert_eq!(trie.nodes[0].height, 255);
        assert_eq!(trie.nodes[299].height, 1);
        assert_eq!(trie.nodes[300].height, 0);
    }
}
