//! `RadixTree::summarize`: bounded, parents before children, ranked by reused KV, read-only.

use proptest::prelude::*;
use sglr_radix::{RadixTree, SummaryLimits};

const WIDE: SummaryLimits = SummaryLimits { max_nodes: 1000, max_depth: 64, max_head_tokens: 4 };

fn insert(tree: &mut RadixTree, tokens: &[u32], first_slot: u32) -> sglr_radix::NodeId {
    let slots: Vec<u32> = (first_slot..first_slot + tokens.len() as u32).collect();
    tree.insert(None, tokens, &slots).unwrap().node
}

#[test]
fn a_shared_prefix_is_one_node_with_the_hits_of_every_request_that_used_it() {
    let mut tree = RadixTree::new();
    let system: Vec<u32> = (100..140).collect();
    for (i, tail) in [[1u32, 2], [3, 4], [5, 6]].iter().enumerate() {
        let tokens: Vec<u32> = system.iter().chain(tail).copied().collect();
        let node = insert(&mut tree, &tokens, 1000 * i as u32);
        tree.lock(node).unwrap();
        tree.unlock(node).unwrap();
    }
    let summary = tree.summarize(WIDE);
    assert_eq!(summary.num_tokens, 46);
    assert_eq!(summary.num_nodes, 4);
    let top = &summary.nodes[0];
    assert_eq!((top.parent, top.depth, top.num_tokens, top.prefix_len), (None, 1, 40, 40));
    assert_eq!((top.num_subtree_tokens, top.num_hits, top.lock_ref), (46, 3, 0));
    assert_eq!(top.head_tokens, vec![100, 101, 102, 103]);
    let leaves: Vec<_> = summary.nodes[1..].iter().map(|n| (n.parent, n.prefix_len, n.num_hits)).collect();
    assert_eq!(leaves, vec![(Some(0), 42, 1); 3]);
}

#[test]
fn limits_bound_the_count_and_the_depth() {
    let mut tree = RadixTree::new();
    // A chain: each insert extends the previous one by two tokens, so depth grows by one.
    for depth in 1..=20u32 {
        let tokens: Vec<u32> = (0..2 * depth).collect();
        insert(&mut tree, &tokens, 100 * depth);
    }
    let shallow = tree.summarize(SummaryLimits { max_nodes: 1000, max_depth: 5, max_head_tokens: 0 });
    assert_eq!(shallow.nodes.len(), 5);
    assert!(shallow.nodes.iter().all(|n| n.depth <= 5 && n.head_tokens.is_empty()));
    let few = tree.summarize(SummaryLimits { max_nodes: 3, ..WIDE });
    assert_eq!(few.nodes.len(), 3);
    assert_eq!(few.num_nodes, 20);
}

#[test]
fn summarizing_changes_nothing_the_tree_evicts_by() {
    let mut tree = RadixTree::new();
    insert(&mut tree, &[1, 2, 3], 0);
    insert(&mut tree, &[7, 8], 10);
    let before = tree.dump(None);
    let idle_before: Vec<u64> = tree.summarize(WIDE).nodes.iter().map(|n| n.idle_ticks).collect();
    let idle_after: Vec<u64> = tree.summarize(WIDE).nodes.iter().map(|n| n.idle_ticks).collect();
    assert_eq!(idle_before, idle_after);
    assert_eq!(tree.dump(None), before);
    // The older prefix is still the LRU victim.
    assert_eq!(tree.evict(1), vec![0, 1, 2]);
}

proptest! {
    #[test]
    fn every_summary_is_bounded_ordered_and_consistent(
        seqs in prop::collection::vec(prop::collection::vec(0u32..4, 1..12), 1..30),
        max_nodes in 1usize..20,
        max_depth in 1usize..6,
    ) {
        let mut tree = RadixTree::new();
        let mut next_slot = 0;
        for tokens in &seqs {
            let node = insert(&mut tree, tokens, next_slot);
            next_slot += tokens.len() as u32;
            tree.lock(node).unwrap();
            tree.unlock(node).unwrap();
        }
        let summary = tree.summarize(SummaryLimits { max_nodes, max_depth, max_head_tokens: 2 });
        prop_assert!(summary.nodes.len() <= max_nodes.min(summary.num_nodes));
        prop_assert_eq!(summary.num_tokens, tree.total_size());
        for (position, node) in summary.nodes.iter().enumerate() {
            prop_assert!(node.depth <= max_depth && node.head_tokens.len() <= 2);
            prop_assert!(node.num_subtree_tokens >= node.num_tokens);
            match node.parent {
                None => prop_assert_eq!(node.depth, 1),
                Some(parent) => {
                    prop_assert!(parent < position);
                    let up = &summary.nodes[parent];
                    prop_assert_eq!(up.depth + 1, node.depth);
                    prop_assert_eq!(up.prefix_len + node.num_tokens, node.prefix_len);
                    prop_assert!(up.num_hits >= node.num_hits);
                    prop_assert!(up.num_subtree_tokens > node.num_subtree_tokens);
                }
            }
        }
        tree.check_invariants().unwrap();
    }
}
