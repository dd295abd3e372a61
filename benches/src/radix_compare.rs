//! The per-request work that `benches/radix_vs_gateway.rs` times (and `examples/radix_trace.rs`
//! runs once, for instruction counts): sglr's KV-cache tree and router forest against the
//! reconstructed gateway tree ([`crate::gateway_tree`]) on the same traces.

use std::hint::black_box;
use std::sync::Arc;

use sglr_radix::RadixTree;
use sglr_router::{CacheAwareRule, PrefixForest, ReplicaLoad};

use crate::gateway_tree::{GatewayTree, TenantId};

/// A request goes to the replica with the longest match when at least half of it matched
/// there, else to the replica holding the least: the router's cache-aware policy at its default
/// thresholds, with nothing in flight (so never imbalanced).
const ROUTER_RULE: CacheAwareRule =
    CacheAwareRule { balance_abs_threshold: 32, balance_rel_threshold: 1.5, cache_threshold: 0.5 };
const IDLE_LOADS: [ReplicaLoad; 2] =
    [ReplicaLoad { replica: 0, num_in_flight: 0 }, ReplicaLoad { replica: 1, num_in_flight: 0 }];
/// The router's default tree bound (`RouterConfig.max_keys_per_tree`).
pub const MAX_KEYS_PER_TREE: usize = 1 << 21;

fn cache_hit(matched: usize, len: usize) -> bool {
    ROUTER_RULE.is_cache_hit(matched, len)
}

/// sglr's KV-cache tree, one request as the scheduler runs it: match, lock the prefix, insert
/// the whole sequence (fresh slots for the uncached part), unlock.
pub fn radix_cycle(tree: &mut RadixTree, trace: &[Vec<u32>]) {
    let mut next_slot = 0u32;
    for request in trace {
        let matched = tree.match_prefix(None, request);
        tree.lock(matched.node).expect("fresh handle");
        let mut slots = matched.slots;
        let num_new = (request.len() - slots.len()) as u32;
        slots.extend(next_slot..next_slot + num_new);
        next_slot += num_new;
        black_box(tree.insert(None, request, &slots).expect("one slot per token"));
        tree.unlock(matched.node).expect("locked above");
    }
}

/// The gateway tree as a KV-cache index: one tenant, match then insert per request.
pub fn gateway_single_tenant(tree: &GatewayTree, texts: &[String], tenant: &TenantId) {
    for text in texts {
        black_box(tree.prefix_match_with_counts(text));
        tree.insert(text, tenant);
    }
}

/// sglr's router trees for two replicas (0 and 1), one `route` call per request as the router
/// makes it: match every replica, pick one, insert from where its match ended.
pub fn forest_route(forest: &mut PrefixForest, trace: &[Vec<u32>]) -> Vec<u32> {
    trace
        .iter()
        .map(|key| forest.route(key, &IDLE_LOADS, &ROUTER_RULE).expect("two known replicas").replica)
        .collect()
}

/// A forest with replicas 0 and 1 at the router's default bound.
pub fn two_replica_forest() -> PrefixForest {
    let mut forest = PrefixForest::new(MAX_KEYS_PER_TREE).expect("non-zero bound");
    forest.add_replica(0).expect("new replica");
    forest.add_replica(1).expect("new replica");
    forest
}

/// Two worker URLs as gateway tenants.
pub fn two_tenants() -> [TenantId; 2] {
    [Arc::from("http://worker-0:8000"), Arc::from("http://worker-1:8000")]
}

/// The gateway tree routing between two tenants with the same rule as [`forest_route`].
pub fn gateway_route(tree: &GatewayTree, texts: &[String], tenants: &[TenantId; 2]) -> Vec<u32> {
    let mut choices = Vec::with_capacity(texts.len());
    for text in texts {
        let (owner, matched, input) = tree.prefix_match_with_counts(text);
        let replica = if cache_hit(matched, input) {
            u32::from(owner == tenants[1])
        } else {
            let sizes = tenants.each_ref().map(|tenant| tree.tenant_char_count(tenant));
            u32::from(sizes[1] < sizes[0])
        };
        tree.insert(text, &tenants[replica as usize]);
        choices.push(replica);
    }
    choices
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway_tree::token_text;

    /// Both routers see the same best match length, and the gateway's tenant really holds it
    /// (ties between tenants may go either way, so routing choices can differ).
    #[test]
    fn both_routers_find_the_same_matches() {
        let trace = crate::grouped_trace(11, 6, 5, (30, 80), (10, 60));
        let choices = forest_route(&mut two_replica_forest(), &trace);
        assert!(choices.contains(&0) && choices.contains(&1), "both replicas get work");

        let mut forest = two_replica_forest();
        let gateway = GatewayTree::new();
        let tenants = two_tenants();
        for (key, &replica) in trace.iter().zip(&choices) {
            let best = forest.best_match(key).unwrap();
            let (owner, matched, input) = gateway.prefix_match_with_counts(&token_text(key));
            assert_eq!((matched, input), (best.matched_len, key.len()));
            if matched > 0 {
                let owner_id = u32::from(owner == tenants[1]);
                assert_eq!(forest.match_len(owner_id, key).unwrap(), matched);
            }
            forest.insert(replica, key).unwrap();
            gateway.insert(&token_text(key), &tenants[replica as usize]);
        }
        for (id, tenant) in tenants.iter().enumerate() {
            assert_eq!(gateway.tenant_char_count(tenant), forest.num_keys(id as u32).unwrap());
        }
    }
}
