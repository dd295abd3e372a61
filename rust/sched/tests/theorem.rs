//! Theorem 3.1 of the SGLang paper, on the real radix tree: for an offline batch whose
//! requests form a prefix tree, with a cache at least as large as the longest request,
//! longest-prefix-match order computes every edge of that tree exactly once (the optimum),
//! whereas arrival order on shuffled input generally does not.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use proptest::prelude::*;
use sglr_radix::{RadixTree, TokenId};
use sglr_sched::{NewRequest, Policy, SchedConfig, Scheduler, StepInput};

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// A random prefix tree (node `i` hangs below a random earlier node by an edge of 1-6 tokens
/// unique to it) and requests ending at random nodes. Each request ends with a token of its
/// own, so no request is a prefix of another (a prompt always prefills its last token).
fn offline_batch(seed: u64) -> Vec<Vec<TokenId>> {
    let mut rng = Rng(seed);
    let num_nodes = 1 + rng.below(16) as usize;
    let mut paths: Vec<Vec<TokenId>> = vec![Vec::new()];
    for node in 1..=num_nodes {
        let mut path = paths[rng.below(node as u64) as usize].clone();
        let edge_len = 1 + rng.below(6) as TokenId;
        path.extend((0..edge_len).map(|k| node as TokenId * 100 + k));
        paths.push(path);
    }
    let mut requests = Vec::new();
    for path in &paths[1..] {
        for _ in 0..rng.below(3) {
            let mut tokens = path.clone();
            tokens.push(900_000 + requests.len() as TokenId);
            requests.push(tokens);
        }
    }
    if requests.is_empty() {
        requests.push(vec![1, 2]);
    }
    // Arrival order: a random permutation.
    for i in (1..requests.len()).rev() {
        requests.swap(i, rng.below(i as u64 + 1) as usize);
    }
    requests
}

/// The optimum: each distinct prefix (each token position of the requests' tree) once.
fn sum_of_edge_lengths(requests: &[Vec<TokenId>]) -> usize {
    let prefixes: HashSet<&[TokenId]> =
        requests.iter().flat_map(|tokens| (1..=tokens.len()).map(move |len| &tokens[..len])).collect();
    prefixes.len()
}

/// Runs the batch one request at a time through scheduler + tree with a pool of exactly the
/// longest request's size; returns the number of prefilled tokens.
fn computed_tokens(requests: &[Vec<TokenId>], policy: Policy) -> usize {
    let capacity = requests.iter().map(Vec::len).max().unwrap();
    let mut tree = RadixTree::new();
    let mut pool: Vec<u32> = (0..capacity as u32).collect();
    let mut sched: Scheduler<_> = Scheduler::new(SchedConfig {
        policy,
        max_running_requests: 1,
        max_prefill_tokens: capacity,
        starvation_guard: None,
        ..SchedConfig::default()
    })
    .unwrap();
    for (rid, tokens) in requests.iter().enumerate() {
        sched
            .add(NewRequest {
                rid: rid as u64,
                tokens: Arc::from(tokens.clone()),
                max_new_tokens: 0,
                namespace: None,
                arrival_s: 0.0,
                max_prefix_len: None,
                priority_key: 0,
            })
            .unwrap();
    }
    let mut computed = 0;
    while !sched.is_empty() {
        let input = StepInput { num_free_slots: pool.len(), running_tokens_left: &[], now_s: 0.0 };
        let decision = sched.select(&mut tree, &input).unwrap();
        sched.check_invariants().unwrap();
        pool.extend(tree.evict(decision.num_tokens_to_evict));
        assert_eq!(decision.admissions.len(), 1, "one request per step");
        let admission = &decision.admissions[0];
        assert!(admission.is_prompt_done);
        let tokens = &requests[admission.rid as usize];
        let mut slots = decision.slots_of(0).to_vec();
        slots.extend(pool.split_off(pool.len() - admission.extend_len));
        computed += admission.extend_len;
        // The request ran: cache all of it, then release its lock.
        let inserted = tree.insert(None, tokens, &slots).unwrap();
        assert_eq!(inserted.num_cached, admission.prefix_len);
        tree.unlock(admission.node.unwrap()).unwrap();
        tree.check_invariants().unwrap();
        assert_eq!(pool.len() + tree.total_size(), capacity, "slot accounting");
    }
    computed
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn lpm_computes_exactly_the_sum_of_edge_lengths(seed in any::<u64>()) {
        let requests = offline_batch(seed);
        prop_assert_eq!(computed_tokens(&requests, Policy::Lpm), sum_of_edge_lengths(&requests));
    }

    #[test]
    fn dfs_weight_is_optimal_too(seed in any::<u64>()) {
        let requests = offline_batch(seed);
        prop_assert_eq!(
            computed_tokens(&requests, Policy::DfsWeight),
            sum_of_edge_lengths(&requests)
        );
    }
}

#[test]
fn fcfs_on_shuffled_input_is_never_better_and_often_worse() {
    let mut num_worse = 0;
    let num_cases = 300;
    for seed in 0..num_cases {
        let requests = offline_batch(seed);
        let optimum = sum_of_edge_lengths(&requests);
        let fcfs = computed_tokens(&requests, Policy::Fcfs);
        assert!(fcfs >= optimum, "seed {seed}: fcfs {fcfs} beat the optimum {optimum}");
        num_worse += usize::from(fcfs > optimum);
    }
    assert!(
        num_worse * 5 >= num_cases as usize,
        "fcfs was worse than optimal in only {num_worse} of {num_cases} cases"
    );
}
