//! Unit tests of each tree operation and its error cases.

use sglr_radix::{NodeId, RadixError, RadixTree};

fn seq(range: std::ops::Range<u32>) -> Vec<u32> {
    range.collect()
}

#[test]
fn empty_tree_matches_nothing_at_the_root() {
    let mut tree = RadixTree::new();
    let outcome = tree.match_prefix(None, &[1, 2, 3]);
    assert!(outcome.slots.is_empty());
    assert_eq!(tree.lock_ref(outcome.node), Ok(0));
    assert_eq!(tree.total_size(), 0);
    tree.check_invariants().unwrap();
}

#[test]
fn insert_reports_the_already_cached_prefix() {
    let mut tree = RadixTree::new();
    assert_eq!(tree.insert(None, &[1, 2, 3], &[10, 11, 12]).unwrap().num_cached, 0);
    assert_eq!(tree.insert(None, &[1, 2, 3, 4], &[20, 21, 22, 23]).unwrap().num_cached, 3);
    assert_eq!(tree.insert(None, &[1, 2, 9], &[30, 31, 32]).unwrap().num_cached, 2);
    assert_eq!(tree.insert(None, &[1, 2], &[40, 41]).unwrap().num_cached, 2);
    // The tree keeps its own slots for cached spans; only new suffixes are added.
    assert_eq!(tree.match_prefix(None, &[1, 2, 3, 4]).slots, vec![10, 11, 12, 23]);
    assert_eq!(tree.match_prefix(None, &[1, 2, 9]).slots, vec![10, 11, 32]);
    assert_eq!(tree.total_size(), 5);
    tree.check_invariants().unwrap();
}

#[test]
fn match_inside_an_edge_splits_and_keeps_the_deeper_handle_valid() {
    let mut tree = RadixTree::new();
    let leaf = tree.insert(None, &seq(0..8), &seq(100..108)).unwrap().node;
    let outcome = tree.match_prefix(None, &[0, 1, 2, 99]);
    assert_eq!(outcome.slots, vec![100, 101, 102]);
    assert_ne!(outcome.node, leaf);
    let views = tree.dump(None);
    assert_eq!(views.len(), 2);
    assert_eq!((views[0].depth, views[0].tokens.clone()), (1, vec![0, 1, 2]));
    assert_eq!((views[1].depth, views[1].tokens.clone()), (2, seq(3..8)));
    // The original leaf handle still names the node that ends at token 8.
    tree.lock(leaf).unwrap();
    assert_eq!(tree.protected_size(), 8);
    assert_eq!(tree.lock_ref(outcome.node), Ok(1));
    tree.check_invariants().unwrap();
}

#[test]
fn lock_moves_sizes_along_the_whole_path() {
    let mut tree = RadixTree::new();
    tree.insert(None, &seq(0..6), &seq(0..6)).unwrap();
    tree.insert(None, &[0, 1, 2, 7, 8], &[0, 1, 2, 7, 8]).unwrap();
    let node = tree.match_prefix(None, &[0, 1, 2, 7, 8]).node;
    tree.lock(node).unwrap();
    assert_eq!((tree.evictable_size(), tree.protected_size()), (3, 5));
    tree.lock(node).unwrap();
    assert_eq!((tree.evictable_size(), tree.protected_size()), (3, 5));
    tree.unlock(node).unwrap();
    tree.unlock(node).unwrap();
    assert_eq!((tree.evictable_size(), tree.protected_size()), (8, 0));
    assert_eq!(tree.unlock(node), Err(RadixError::UnlockBelowZero(node)));
    tree.check_invariants().unwrap();
}

#[test]
fn evict_takes_lru_leaves_first_then_their_parents() {
    let mut tree = RadixTree::new();
    tree.insert(None, &[1, 2, 3], &[1, 2, 3]).unwrap(); // t1
    tree.insert(None, &[1, 2, 4], &[4, 5, 6]).unwrap(); // t2: splits [1,2] | [3], [4]
    tree.insert(None, &[7, 8], &[7, 8]).unwrap(); // t3
    tree.match_prefix(None, &[1, 2, 3]); // [1,2,3] is now the most recent
                                         // LRU leaf: [4] (slot 6) from t2, then [7,8] (t3).
    assert_eq!(tree.evict(1), vec![6]);
    assert_eq!(tree.evict(1), vec![7, 8]);
    // Then the leaf [3], then its parent [1,2] becomes a leaf and goes too.
    let mut rest = tree.evict(100);
    rest.sort_unstable();
    assert_eq!(rest, vec![1, 2, 3]);
    assert_eq!(tree.total_size(), 0);
    assert_eq!(tree.num_nodes(), 0);
    tree.check_invariants().unwrap();
}

#[test]
fn evict_never_touches_locked_paths_and_may_overshoot_by_one_node() {
    let mut tree = RadixTree::new();
    let locked = tree.insert(None, &seq(0..4), &seq(0..4)).unwrap().node;
    tree.insert(None, &[0, 1, 9, 9, 9], &[10, 11, 12, 13, 14]).unwrap();
    tree.lock(locked).unwrap();
    let freed = tree.evict(1);
    assert_eq!(freed, vec![12, 13, 14]); // one whole node, more than asked
    assert!(tree.evict(100).is_empty()); // [0,1] and [2,3] are locked
    assert_eq!(tree.protected_size(), 4);
    tree.unlock(locked).unwrap();
    assert_eq!(tree.evict(100).len(), 4);
    tree.check_invariants().unwrap();
}

#[test]
fn handles_of_evicted_nodes_are_stale_and_foreign_ones_unknown() {
    let mut tree = RadixTree::new();
    let node = tree.insert(None, &[5, 6], &[1, 2]).unwrap().node;
    tree.evict(2);
    assert_eq!(tree.lock(node), Err(RadixError::StaleNode(node)));
    let reused = tree.insert(None, &[8], &[3]).unwrap().node;
    assert_eq!(tree.lock(node), Err(RadixError::StaleNode(node)));
    tree.lock(reused).unwrap();
    let foreign = NodeId::from_u64(1 << 40 | 7);
    assert_eq!(tree.lock(foreign), Err(RadixError::UnknownNode(foreign)));
    let out_of_range = NodeId::from_u64(999_999);
    assert_eq!(tree.unlock(out_of_range), Err(RadixError::UnknownNode(out_of_range)));
}

#[test]
fn length_mismatch_is_an_error_and_changes_nothing() {
    let mut tree = RadixTree::new();
    let err = tree.insert(None, &[1, 2, 3], &[1, 2]).unwrap_err();
    assert_eq!(err, RadixError::LengthMismatch { num_tokens: 3, num_slots: 2 });
    assert_eq!(tree.total_size(), 0);
    tree.check_invariants().unwrap();
}

#[test]
fn namespaces_are_disjoint_subtrees() {
    let mut tree = RadixTree::new();
    tree.insert(Some(1), &[1, 2, 3], &[1, 2, 3]).unwrap();
    tree.insert(Some(2), &[1, 2, 3], &[4, 5, 6]).unwrap();
    assert!(tree.match_prefix(None, &[1, 2, 3]).slots.is_empty());
    assert_eq!(tree.match_prefix(Some(2), &[1, 2]).slots, vec![4, 5]);
    assert_eq!(tree.insert(Some(1), &[1, 2, 3, 4], &[0, 0, 0, 7]).unwrap().num_cached, 3);
    assert_eq!(tree.total_size(), 7);
    tree.check_invariants().unwrap();
}

#[test]
fn reset_empties_and_invalidates_handles() {
    let mut tree = RadixTree::new();
    let node = tree.insert(None, &[1, 2], &[1, 2]).unwrap().node;
    tree.lock(node).unwrap();
    tree.reset();
    assert_eq!((tree.total_size(), tree.num_nodes()), (0, 0));
    assert_eq!(tree.lock(node), Err(RadixError::StaleNode(node)));
    assert!(tree.match_prefix(None, &[1, 2]).slots.is_empty());
    tree.insert(None, &[1, 2], &[3, 4]).unwrap();
    tree.check_invariants().unwrap();
}

#[test]
fn empty_inputs_are_harmless() {
    let mut tree = RadixTree::new();
    let outcome = tree.insert(None, &[], &[]).unwrap();
    assert_eq!(outcome.num_cached, 0);
    tree.lock(outcome.node).unwrap(); // the root: a no-op
    tree.unlock(outcome.node).unwrap();
    assert!(tree.evict(0).is_empty());
    assert_eq!(tree.match_prefix_len(None, &[]).0, 0);
    tree.check_invariants().unwrap();
}

#[test]
fn match_prefix_len_agrees_with_match_prefix() {
    let mut tree = RadixTree::new();
    tree.insert(None, &seq(0..50), &seq(0..50)).unwrap();
    tree.insert(None, &seq(0..20), &seq(100..120)).unwrap();
    let (len, node) = tree.match_prefix_len(None, &[0, 1, 2, 3, 4, 5, 77]);
    let outcome = tree.match_prefix(None, &[0, 1, 2, 3, 4, 5, 77]);
    assert_eq!(len, 6);
    assert_eq!(outcome.slots.len(), 6);
    assert_eq!(node, outcome.node);
}

#[test]
fn lock_all_and_unlock_all_are_all_or_nothing() {
    let mut tree = RadixTree::new();
    let a = tree.insert(None, &[1, 2], &[1, 2]).unwrap().node;
    let b = tree.insert(None, &[3], &[3]).unwrap().node;
    let stale = tree.insert(None, &[4], &[4]).unwrap().node;
    tree.match_prefix(None, &[1, 2]);
    tree.match_prefix(None, &[3]);
    assert_eq!(tree.evict(1), vec![4]);
    assert_eq!(tree.lock_all(&[a, b, stale]), Err(RadixError::StaleNode(stale)));
    assert_eq!(tree.protected_size(), 0);
    tree.lock_all(&[a, a, b]).unwrap();
    assert_eq!((tree.lock_ref(a), tree.protected_size()), (Ok(2), 3));
    assert_eq!(tree.unlock_all(&[a, b, b]), Err(RadixError::UnlockBelowZero(b)));
    assert_eq!((tree.lock_ref(a), tree.lock_ref(b)), (Ok(2), Ok(1)));
    tree.unlock_all(&[a, a, b]).unwrap();
    assert_eq!(tree.protected_size(), 0);
    tree.check_invariants().unwrap();
}
