//! `extend_match_len` must be indistinguishable from a fresh `match_prefix_len`: same length,
//! same node, same tree afterwards (including which leaf is evicted next).

use proptest::prelude::*;
use sglr_radix::{NodeId, RadixTree, TokenId};

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<TokenId>),
    Evict(usize),
    Query(usize),
    LockLast,
    UnlockAll,
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    // A 3-letter alphabet makes shared prefixes, splits and extensions common.
    let seq = prop::collection::vec(0u32..3, 1..12);
    prop_oneof![
        4 => seq.prop_map(Op::Insert),
        2 => (1usize..8).prop_map(Op::Evict),
        6 => (0usize..6).prop_map(Op::Query),
        1 => Just(Op::LockLast),
        1 => Just(Op::UnlockAll),
        1 => Just(Op::Reset),
    ]
}

/// Six fixed queries (by index) over the same alphabet.
fn queries() -> Vec<Vec<TokenId>> {
    vec![
        vec![0, 0, 0, 0, 0, 0, 0, 0],
        vec![0, 1, 2, 0, 1, 2, 0, 1],
        vec![1, 1, 0, 0, 2, 2],
        vec![2],
        vec![0, 1, 2, 2, 1, 0, 0, 1, 2, 0, 0],
        vec![],
    ]
}

proptest! {
    #[test]
    fn extend_match_equals_fresh_match(ops in prop::collection::vec(op(), 1..80)) {
        let queries = queries();
        let mut fresh = RadixTree::new();
        let mut incremental = RadixTree::new();
        let mut previous: Vec<Option<(usize, NodeId)>> = vec![None; queries.len()];
        let mut locked: Vec<NodeId> = Vec::new();
        let mut last_node: Option<NodeId> = None;
        let mut next_slot = 0u32;
        for op in ops {
            match op {
                Op::Insert(tokens) => {
                    let slots: Vec<u32> = (next_slot..next_slot + tokens.len() as u32).collect();
                    next_slot += tokens.len() as u32;
                    let a = fresh.insert(None, &tokens, &slots).unwrap();
                    let b = incremental.insert(None, &tokens, &slots).unwrap();
                    prop_assert_eq!(a, b);
                }
                Op::Evict(n) => prop_assert_eq!(fresh.evict(n), incremental.evict(n)),
                Op::Query(q) => {
                    let tokens = &queries[q];
                    let expected = fresh.match_prefix_len(None, tokens);
                    let got = match previous[q] {
                        Some((len, node)) => incremental
                            .extend_match_len(None, node, len, tokens)
                            .unwrap_or_else(|_| incremental.match_prefix_len(None, tokens)),
                        None => incremental.match_prefix_len(None, tokens),
                    };
                    prop_assert_eq!(got, expected);
                    previous[q] = Some(got);
                    last_node = Some(got.1);
                }
                Op::LockLast => {
                    if let Some(node) = last_node {
                        if fresh.lock(node).is_ok() {
                            incremental.lock(node).unwrap();
                            locked.push(node);
                        }
                    }
                }
                Op::UnlockAll => {
                    for node in locked.drain(..) {
                        fresh.unlock(node).unwrap();
                        incremental.unlock(node).unwrap();
                    }
                }
                Op::Reset => {
                    locked.clear();
                    fresh.reset();
                    incremental.reset();
                }
            }
            fresh.check_invariants().unwrap();
            incremental.check_invariants().unwrap();
            prop_assert_eq!(fresh.dump(None), incremental.dump(None));
        }
    }
}

#[test]
fn wrong_depth_or_namespace_falls_back_to_a_full_walk() {
    let mut tree = RadixTree::new();
    tree.insert(None, &[1, 2, 3, 4], &[10, 11, 12, 13]).unwrap();
    tree.insert(Some(7), &[1, 2, 3, 4], &[20, 21, 22, 23]).unwrap();
    let (len, node) = tree.match_prefix_len(None, &[1, 2, 9]);
    assert_eq!(len, 2);
    // A lie about the matched length, or the other namespace, still gives the true answer.
    assert_eq!(tree.extend_match_len(None, node, 1, &[1, 2, 3, 4]).unwrap().0, 4);
    assert_eq!(tree.extend_match_len(Some(7), node, 2, &[1, 2, 3]).unwrap().0, 3);
    tree.check_invariants().unwrap();
}

#[test]
fn evicted_node_is_reported_stale() {
    let mut tree = RadixTree::new();
    tree.insert(None, &[1, 2, 3], &[1, 2, 3]).unwrap();
    let (_, node) = tree.match_prefix_len(None, &[1, 2, 3]);
    tree.evict(3);
    assert!(tree.extend_match_len(None, node, 3, &[1, 2, 3]).is_err());
}
