//! The starvation guard: under a stream of hot arrivals that keeps a cold request waiting
//! forever under plain `lpm`, no request is passed over more than the bound.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::tokens_with_prefix;
use proptest::prelude::*;
use sglr_radix::{RadixTree, TokenId};
use sglr_sched::{NewRequest, Policy, SchedConfig, Scheduler, StarvationGuard, StepInput};

#[derive(Debug, Clone)]
struct Stream {
    /// Admissions per step (the running cap; everything admitted finishes within the step).
    per_step: usize,
    /// Guard bound in steps.
    bound: u64,
    num_steps: usize,
    /// Steps at which a cold request (no cached prefix) arrives.
    cold_arrivals: Vec<usize>,
    /// Hot prompt length above the shared prefix, per arrival.
    hot_tails: Vec<usize>,
    /// Requests already waiting at the start, every third one cold (an overload).
    backlog: usize,
}

/// `per_step` hot arrivals every step, which under plain `lpm` always outrank a cold request,
/// plus at most `bound` cold arrivals at distinct steps: a load the guard can keep within the
/// bound, since each admitted cold request delays one hot request by a step.
fn stream() -> impl Strategy<Value = Stream> {
    (1usize..4, 1u64..6, 10usize..40).prop_flat_map(|(per_step, bound, num_steps)| {
        (
            prop::collection::btree_set(0..num_steps, 1..=bound as usize),
            prop::collection::vec(1usize..20, per_step * num_steps),
        )
            .prop_map(move |(cold_arrivals, hot_tails)| Stream {
                per_step,
                bound,
                num_steps,
                cold_arrivals: cold_arrivals.into_iter().collect(),
                hot_tails,
                backlog: 0,
            })
    })
}

/// The same, starting overloaded with a backlog of waiting requests.
fn overloaded_stream() -> impl Strategy<Value = Stream> {
    (stream(), 1usize..30).prop_map(|(stream, backlog)| Stream { backlog, ..stream })
}

#[derive(Clone, Copy)]
enum Bound {
    Steps,
    Seconds,
    Off,
}

/// Runs the stream; returns the most selections any request was passed over (including
/// requests still waiting at the end) and the longest queue any selection saw.
fn longest_wait(stream: &Stream, bound: Bound) -> (u64, usize) {
    const STEP_S: f64 = 0.05;
    let guard = match bound {
        Bound::Steps => Some(StarvationGuard { max_wait_steps: Some(stream.bound), max_wait_s: None }),
        // Half a step of slack keeps float rounding away from the boundary.
        Bound::Seconds => Some(StarvationGuard {
            max_wait_steps: None,
            max_wait_s: Some((stream.bound as f64 - 0.5) * STEP_S),
        }),
        Bound::Off => None,
    };
    let mut sched = Scheduler::new(SchedConfig {
        policy: Policy::Lpm,
        max_running_requests: stream.per_step,
        starvation_guard: guard,
        ..SchedConfig::default()
    })
    .unwrap();
    let hot: Vec<TokenId> = (1..=64).collect();
    let mut tree = RadixTree::new();
    tree.insert(None, &hot, &(0..64).collect::<Vec<_>>()).unwrap();
    let mut arrival_step: HashMap<u64, u64> = HashMap::new();
    let mut next_rid = 0u64;
    let mut longest = 0;
    let mut longest_queue = 0;
    for i in 0..stream.backlog {
        let tokens = if i % 3 == 0 {
            tokens_with_prefix(&[], next_rid, 10)
        } else {
            tokens_with_prefix(&hot, next_rid, hot.len() + 1 + i % 7)
        };
        sched
            .add(NewRequest {
                rid: next_rid,
                tokens: Arc::from(tokens),
                max_new_tokens: 8,
                namespace: None,
                arrival_s: 0.0,
                max_prefix_len: None,
                priority_key: 0,
            })
            .unwrap();
        arrival_step.insert(next_rid, 0);
        next_rid += 1;
    }
    for step in 0..stream.num_steps {
        // Exactly `per_step` hot arrivals: under plain lpm they always outrank a cold one.
        let mut arrivals: Vec<(u64, Vec<TokenId>)> = Vec::new();
        for i in 0..stream.per_step {
            let tail = stream.hot_tails[step * stream.per_step + i];
            arrivals.push((next_rid, tokens_with_prefix(&hot, next_rid, hot.len() + tail)));
            next_rid += 1;
        }
        for _ in stream.cold_arrivals.iter().filter(|&&at| at == step) {
            arrivals.push((next_rid, tokens_with_prefix(&[], next_rid, 10)));
            next_rid += 1;
        }
        for (rid, tokens) in arrivals {
            sched
                .add(NewRequest {
                    rid,
                    tokens: Arc::from(tokens),
                    max_new_tokens: 8,
                    namespace: None,
                    arrival_s: step as f64 * STEP_S,
                    max_prefix_len: None,
                    priority_key: 0,
                })
                .unwrap();
            arrival_step.insert(rid, step as u64);
        }
        let input =
            StepInput { num_free_slots: 1 << 20, running_tokens_left: &[], now_s: step as f64 * STEP_S };
        longest_queue = longest_queue.max(sched.len());
        let decision = sched.select(&mut tree, &input).unwrap();
        sched.check_invariants().unwrap();
        for admission in &decision.admissions {
            let waited = step as u64 - arrival_step.remove(&admission.rid).unwrap();
            assert_eq!(waited, admission.waited_steps);
            longest = longest.max(waited);
            // The request finishes at once: nothing stays locked.
            tree.unlock(admission.node.unwrap()).unwrap();
        }
    }
    let still_waiting =
        arrival_step.values().map(|&arrived| stream.num_steps as u64 - arrived).max().unwrap_or(0);
    (longest.max(still_waiting), longest_queue)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn guard_bounds_every_wait(stream in stream()) {
        prop_assert!(longest_wait(&stream, Bound::Steps).0 <= stream.bound);
        prop_assert!(longest_wait(&stream, Bound::Seconds).0 <= stream.bound);
    }

    #[test]
    fn plain_lpm_starves_the_cold_request(stream in stream()) {
        let first_cold = stream.cold_arrivals[0];
        // A cold request that arrived early enough waits until the end without the guard.
        prop_assume!(stream.num_steps - first_cold > stream.bound as usize);
        prop_assert!(longest_wait(&stream, Bound::Off).0 > stream.bound);
    }

    /// Overloaded, no order can meet a fixed bound; the guard still serves every request
    /// that reached it ahead of all younger ones, so it waits at most the bound plus the
    /// time to drain the queue ahead of it first-come-first-served.
    #[test]
    fn overloaded_waits_exceed_the_bound_by_at_most_the_queueing_delay(
        stream in overloaded_stream(),
    ) {
        let (longest, longest_queue) = longest_wait(&stream, Bound::Steps);
        let queueing = longest_queue.div_ceil(stream.per_step) as u64;
        prop_assert!(longest < stream.bound + queueing, "{} >= {} + {}", longest, stream.bound, queueing);
    }
}
