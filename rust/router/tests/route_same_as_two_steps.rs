//! `PrefixForest::route` (one call: match all, choose, insert from the match) against the
//! router's former two steps (`best_match`, the policy's choice written out as in
//! `sglr.router.policy`, then `insert`): the same replica, the same match length, and trees
//! that stay alike (key counts, match lengths, eviction) on random keys, loads and thresholds.

use proptest::prelude::*;
use sglr_router::{CacheAwareRule, PrefixForest, ReplicaLoad, RouterTreeError};

/// The policy's choice as the router made it in Python, from the forest's answers.
fn choose_in_two_steps(
    forest: &PrefixForest,
    key: &[u32],
    loads: &[ReplicaLoad],
    rule: &CacheAwareRule,
) -> u32 {
    let mut sorted = loads.to_vec();
    sorted.sort_by_key(|load| load.replica);
    let (most, least) = (
        loads.iter().map(|load| load.num_in_flight).max().unwrap(),
        loads.iter().map(|load| load.num_in_flight).min().unwrap(),
    );
    if most - least > rule.balance_abs_threshold && most as f64 > rule.balance_rel_threshold * least as f64 {
        return sorted.iter().min_by_key(|load| (load.num_in_flight, load.replica)).unwrap().replica;
    }
    let best = forest.best_match(key).unwrap();
    if !key.is_empty() && best.matched_len as f64 / key.len() as f64 >= rule.cache_threshold {
        return best.replica;
    }
    sorted
        .iter()
        .min_by_key(|load| (forest.num_keys(load.replica).unwrap(), load.num_in_flight, load.replica))
        .unwrap()
        .replica
}

fn key() -> impl Strategy<Value = Vec<u32>> {
    let token = prop_oneof![10 => 0u32..3, 1 => Just(70_000u32)];
    prop::collection::vec(token, 0..16)
}

fn rule() -> impl Strategy<Value = CacheAwareRule> {
    (
        0u64..4,
        prop_oneof![Just(1.0f64), Just(1.5), Just(3.0)],
        prop_oneof![Just(0.0f64), Just(0.5), Just(0.75), Just(1.0)],
    )
        .prop_map(|(abs, rel, cache)| CacheAwareRule {
            balance_abs_threshold: abs,
            balance_rel_threshold: rel,
            cache_threshold: cache,
        })
}

proptest! {
    #[test]
    fn routes_like_the_two_steps(
        requests in prop::collection::vec((key(), prop::collection::vec(0u64..8, 3)), 1..80),
        rule in rule(),
        max_keys in prop_oneof![1usize..30, Just(1000)],
    ) {
        let replicas = [2u32, 0, 5];
        let (mut one_call, mut two_steps) = (PrefixForest::new(max_keys).unwrap(), PrefixForest::new(max_keys).unwrap());
        for replica in replicas {
            one_call.add_replica(replica).unwrap();
            two_steps.add_replica(replica).unwrap();
        }
        for (step, (key, in_flight)) in requests.iter().enumerate() {
            let loads: Vec<ReplicaLoad> = replicas
                .iter()
                .zip(in_flight)
                .map(|(&replica, &num_in_flight)| ReplicaLoad { replica, num_in_flight })
                .collect();
            let expected = choose_in_two_steps(&two_steps, key, &loads, &rule);
            let expected_len = two_steps.match_len(expected, key).unwrap();
            two_steps.insert(expected, key).unwrap();
            let routed = one_call.route(key, &loads, &rule).unwrap();
            prop_assert_eq!((routed.replica, routed.matched_len), (expected, expected_len));
            one_call.check_invariants().unwrap();
            for replica in replicas {
                prop_assert_eq!(one_call.num_keys(replica).unwrap(), two_steps.num_keys(replica).unwrap());
                for probe in &requests[..=step] {
                    prop_assert_eq!(
                        one_call.match_len(replica, &probe.0).unwrap(),
                        two_steps.match_len(replica, &probe.0).unwrap()
                    );
                }
            }
        }
    }
}

#[test]
fn refuses_no_loads_and_unknown_replicas() {
    let mut forest = PrefixForest::new(10).unwrap();
    forest.add_replica(1).unwrap();
    let rule = CacheAwareRule { balance_abs_threshold: 0, balance_rel_threshold: 1.0, cache_threshold: 0.5 };
    assert_eq!(forest.route(&[1], &[], &rule), Err(RouterTreeError::NoReplicas));
    let loads = [ReplicaLoad { replica: 1, num_in_flight: 0 }, ReplicaLoad { replica: 4, num_in_flight: 0 }];
    assert_eq!(forest.route(&[1], &loads, &rule), Err(RouterTreeError::UnknownReplica(4)));
    // Nothing was inserted by the refused calls.
    assert_eq!(forest.num_keys(1).unwrap(), 0);
}

#[test]
fn an_imbalanced_load_sends_a_cached_prefix_to_the_shortest_queue() {
    let mut forest = PrefixForest::new(100).unwrap();
    forest.add_replica(0).unwrap();
    forest.add_replica(1).unwrap();
    let rule = CacheAwareRule { balance_abs_threshold: 2, balance_rel_threshold: 1.5, cache_threshold: 0.5 };
    let balanced =
        [ReplicaLoad { replica: 0, num_in_flight: 0 }, ReplicaLoad { replica: 1, num_in_flight: 0 }];
    assert_eq!(forest.route(&[7, 7, 7, 1], &balanced, &rule).unwrap().replica, 0);
    let cached = forest.route(&[7, 7, 7, 2], &balanced, &rule).unwrap();
    assert_eq!((cached.replica, cached.matched_len), (0, 3));
    let skewed = [ReplicaLoad { replica: 0, num_in_flight: 5 }, ReplicaLoad { replica: 1, num_in_flight: 1 }];
    let spread = forest.route(&[7, 7, 7, 3], &skewed, &rule).unwrap();
    assert_eq!((spread.replica, spread.matched_len), (1, 0));
}
