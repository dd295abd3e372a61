//! Random operation sequences against a naive model (every key ever routed, per replica):
//! invariants and the memory bound hold after every operation; the trees never claim a
//! prefix that was not routed there; without pruning they match the model exactly.

use proptest::prelude::*;
use sglr_router::{PrefixForest, RouterTreeError};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum Op {
    Insert { replica: u32, key: Vec<u32> },
    Match { key: Vec<u32> },
    Remove { replica: u32 },
    Add { replica: u32 },
}

fn small_key() -> impl Strategy<Value = Vec<u32>> {
    // A tiny alphabet so keys share prefixes often.
    prop::collection::vec(0u32..3, 0..12)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u32..4, small_key()).prop_map(|(replica, key)| Op::Insert { replica, key }),
        3 => small_key().prop_map(|key| Op::Match { key }),
        1 => (0u32..4).prop_map(|replica| Op::Remove { replica }),
        1 => (0u32..4).prop_map(|replica| Op::Add { replica }),
    ]
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn model_match(routed: &[Vec<u32>], key: &[u32]) -> usize {
    routed.iter().map(|stored| common_prefix(stored, key)).max().unwrap_or(0)
}

fn run(ops: Vec<Op>, max_keys: usize) {
    let mut forest = PrefixForest::new(max_keys).unwrap();
    let mut model: BTreeMap<u32, Vec<Vec<u32>>> = BTreeMap::new();
    for replica in 0..2 {
        forest.add_replica(replica).unwrap();
        model.insert(replica, Vec::new());
    }
    let exact = max_keys >= 1000;
    for op in ops {
        match op {
            Op::Insert { replica, key } => {
                let outcome = forest.insert(replica, &key);
                match model.get_mut(&replica) {
                    Some(routed) => {
                        outcome.unwrap();
                        let kept = key.len().min(max_keys);
                        // The route just made is remembered in full (up to the bound).
                        assert_eq!(forest.match_len(replica, &key).unwrap(), kept);
                        routed.push(key);
                    }
                    None => assert_eq!(outcome, Err(RouterTreeError::UnknownReplica(replica))),
                }
            }
            Op::Match { key } => {
                let best = forest.best_match(&key);
                assert_eq!(best.is_none(), model.is_empty());
                for (&replica, routed) in &model {
                    let stored = forest.match_len(replica, &key).unwrap();
                    let ideal = model_match(routed, &key);
                    assert!(stored <= ideal, "tree invents a prefix");
                    if exact {
                        assert_eq!(stored, ideal);
                    }
                }
                if let Some(best) = best {
                    let best_len =
                        model.keys().map(|&replica| forest.match_len(replica, &key).unwrap()).max().unwrap();
                    assert_eq!(best.matched_len, best_len);
                    assert!(model.contains_key(&best.replica));
                }
            }
            Op::Remove { replica } => {
                let outcome = forest.remove_replica(replica);
                assert_eq!(outcome.is_ok(), model.remove(&replica).is_some());
            }
            Op::Add { replica } => {
                let outcome = forest.add_replica(replica);
                assert_eq!(outcome.is_ok(), !model.contains_key(&replica));
                model.entry(replica).or_default();
            }
        }
        forest.check_invariants().unwrap();
        for &replica in model.keys() {
            assert!(forest.num_keys(replica).unwrap() <= max_keys);
        }
        assert_eq!(forest.replica_ids(), model.keys().copied().collect::<Vec<_>>());
    }
}

proptest! {
    #[test]
    fn bounded_trees_stay_consistent(ops in prop::collection::vec(op(), 1..80), max_keys in 1usize..20) {
        run(ops, max_keys);
    }

    #[test]
    fn unbounded_trees_match_the_model(ops in prop::collection::vec(op(), 1..80)) {
        run(ops, 1000);
    }
}

#[test]
fn pruning_drops_the_least_recently_routed_prefix() {
    let mut forest = PrefixForest::new(6).unwrap();
    forest.add_replica(0).unwrap();
    forest.insert(0, &[1, 2, 3]).unwrap();
    forest.insert(0, &[4, 5, 6]).unwrap();
    forest.insert(0, &[1, 2, 3]).unwrap(); // refreshes the first prefix
    forest.insert(0, &[7, 8]).unwrap(); // over the bound by two: [4,5,6], a whole leaf, goes
    forest.check_invariants().unwrap();
    assert_eq!(forest.num_keys(0).unwrap(), 5);
    assert_eq!(forest.match_len(0, &[1, 2, 3]).unwrap(), 3);
    assert_eq!(forest.match_len(0, &[4, 5, 6]).unwrap(), 0);
    assert_eq!(forest.match_len(0, &[7, 8]).unwrap(), 2);
}

#[test]
fn matching_does_not_refresh_a_prefix() {
    let mut forest = PrefixForest::new(6).unwrap();
    forest.add_replica(0).unwrap();
    forest.insert(0, &[1, 2, 3]).unwrap();
    forest.insert(0, &[4, 5, 6]).unwrap();
    // Looking [1,2,3] up (as routing does for every replica) keeps it the oldest.
    assert_eq!(forest.best_match(&[1, 2, 3]).unwrap().matched_len, 3);
    forest.insert(0, &[7]).unwrap();
    assert_eq!(forest.match_len(0, &[1, 2, 3]).unwrap(), 0);
    assert_eq!(forest.match_len(0, &[4, 5, 6]).unwrap(), 3);
    forest.check_invariants().unwrap();
}

#[test]
fn best_match_prefers_the_longest_then_the_lowest_id() {
    let mut forest = PrefixForest::new(100).unwrap();
    for replica in [3, 1, 2] {
        forest.add_replica(replica).unwrap();
    }
    forest.insert(2, &[9, 9, 9]).unwrap();
    forest.insert(3, &[9, 9]).unwrap();
    let best = forest.best_match(&[9, 9, 9, 1]).unwrap();
    assert_eq!((best.replica, best.matched_len), (2, 3));
    let best = forest.best_match(&[5]).unwrap();
    assert_eq!((best.replica, best.matched_len), (1, 0));
    forest.remove_replica(2).unwrap();
    assert_eq!(forest.best_match(&[9, 9, 9]).unwrap().replica, 3);
}
