//! Each policy's order, in-batch prefix sharing and requeue-at-head, on the fake index.

mod common;

use common::*;
use sglr_sched::{NewRequest, Policy, SchedConfig, StarvationGuard, StopReason};

fn with_policy(policy: Policy) -> SchedConfig {
    SchedConfig { policy, in_batch_share_min_len: None, ..config() }
}

/// Cached: [1..=8]. Requests 10 (no match), 11 (3 tokens), 12 (6 tokens), 13 (3 tokens).
fn matched_queue(policy: Policy) -> (FakeIndex, sglr_sched::Scheduler<FakeNode>) {
    let mut index = FakeIndex::default();
    index.cache(&[1, 2, 3, 4, 5, 6, 7, 8], 100);
    let mut sched = scheduler(with_policy(policy));
    sched.add(request(10, &[50, 51, 52, 53], 4)).unwrap();
    sched.add(request(11, &[1, 2, 3, 60, 61], 1)).unwrap();
    sched.add(request(12, &[1, 2, 3, 4, 5, 6, 70], 9)).unwrap();
    sched.add(request(13, &[1, 2, 3, 80, 81], 2)).unwrap();
    (index, sched)
}

#[test]
fn lpm_admits_longest_match_first_ties_by_arrival() {
    let (mut index, mut sched) = matched_queue(Policy::Lpm);
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(rids(&decision), vec![12, 11, 13, 10]);
    let prefix_lens: Vec<usize> = decision.admissions.iter().map(|a| a.prefix_len).collect();
    assert_eq!(prefix_lens, vec![6, 3, 3, 0]);
    assert_eq!(decision.slots_of(0), &[100, 101, 102, 103, 104, 105]);
    assert!(decision.slots_of(3).is_empty());
    assert_eq!(decision.stop, StopReason::QueueExhausted);
    assert!(sched.is_empty());
}

#[test]
fn fcfs_admits_in_arrival_order() {
    let (mut index, mut sched) = matched_queue(Policy::Fcfs);
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(rids(&decision), vec![10, 11, 12, 13]);
}

#[test]
fn lof_admits_longest_output_first() {
    let (mut index, mut sched) = matched_queue(Policy::Lof);
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(rids(&decision), vec![12, 10, 13, 11]);
}

#[test]
fn random_is_a_seeded_permutation() {
    let order = |seed: u64| {
        let mut index = FakeIndex::default();
        let mut sched = scheduler(SchedConfig { seed, ..with_policy(Policy::Random) });
        for rid in 0..20 {
            sched.add(request(rid, &[rid as u32 + 1, 0], 1)).unwrap();
        }
        rids(&select(&mut sched, &mut index, step(1000)))
    };
    let first = order(7);
    assert_eq!(first, order(7), "same seed, same order");
    assert_ne!(first, order(8), "another seed, another order");
    let mut sorted = first.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..20).collect::<Vec<_>>());
    assert_ne!(first, sorted, "not arrival order");
}

#[test]
fn dfs_weight_groups_shared_prefixes_heaviest_first() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(with_policy(Policy::DfsWeight));
    let group_a = [5, 5, 5];
    let group_b = [7, 7];
    // Interleaved arrivals: a lone request, then two groups.
    sched.add(request(1, &[9, 1], 1)).unwrap();
    sched.add(request(2, &tokens_with_prefix(&group_b, 2, 5), 1)).unwrap();
    sched.add(request(3, &tokens_with_prefix(&group_a, 3, 5), 1)).unwrap();
    sched.add(request(4, &tokens_with_prefix(&group_b, 4, 5), 1)).unwrap();
    sched.add(request(5, &tokens_with_prefix(&group_a, 5, 5), 1)).unwrap();
    sched.add(request(6, &tokens_with_prefix(&group_a, 6, 5), 1)).unwrap();
    let decision = select(&mut sched, &mut index, step(1000));
    let order = rids(&decision);
    assert_eq!(&order[..3], &[3, 5, 6], "heaviest group first: {order:?}");
    assert_eq!(&order[3..5], &[2, 4]);
    assert_eq!(order[5], 1);
}

#[test]
fn in_batch_sharing_defers_followers_behind_other_work() {
    let shared: Vec<u32> = (500..540).collect(); // 40 uncached tokens
    let setup = |max_prefill_tokens: usize| {
        let mut sched = scheduler(SchedConfig {
            policy: Policy::Fcfs,
            in_batch_share_min_len: Some(32),
            max_prefill_tokens,
            ..config()
        });
        sched.add(request(1, &tokens_with_prefix(&shared, 1, 50), 1)).unwrap();
        sched.add(request(2, &tokens_with_prefix(&shared, 2, 50), 1)).unwrap();
        sched.add(request(3, &[9; 20], 1)).unwrap();
        sched.add(request(4, &tokens_with_prefix(&shared, 4, 50), 1)).unwrap();
        sched
    };
    // Whatever the budget, the leader and the unrelated request go first; followers wait one
    // step and then hit the leader's cached prefix.
    for budget in [1000, 70] {
        let mut index = FakeIndex::default();
        let mut sched = setup(budget);
        let decision = select(&mut sched, &mut index, step(1000));
        assert_eq!(rids(&decision), vec![1, 3]);
        index.cache(&tokens_with_prefix(&shared, 1, 50), 0);
        let decision = select(&mut sched, &mut index, step(1000));
        assert_eq!(rids(&decision), vec![2, 4]);
        assert!(decision.admissions.iter().all(|a| a.prefix_len == 40));
    }
}

#[test]
fn deferred_followers_run_at_once_when_nothing_else_can() {
    let shared: Vec<u32> = (500..540).collect();
    let mut sched =
        scheduler(SchedConfig { policy: Policy::Fcfs, in_batch_share_min_len: Some(32), ..config() });
    sched.add(request(1, &tokens_with_prefix(&shared, 1, 50), 1)).unwrap();
    let mut index = FakeIndex::default();
    assert_eq!(rids(&select(&mut sched, &mut index, step(1000))), vec![1]);
    // The leader is running (not yet cached); a lone follower is not held back for it.
    sched.add(request(2, &tokens_with_prefix(&shared, 2, 50), 1)).unwrap();
    assert_eq!(rids(&select(&mut sched, &mut index, step(1000))), vec![2]);
}

#[test]
fn sharing_below_the_threshold_or_already_cached_is_not_deferred() {
    let mut index = FakeIndex::default();
    let cached: Vec<u32> = (600..640).collect();
    index.cache(&cached, 0);
    let mut sched =
        scheduler(SchedConfig { policy: Policy::Fcfs, in_batch_share_min_len: Some(8), ..config() });
    // 1 and 2 share 40 cached tokens plus 4 uncached ones (< 8): no deferral.
    let mut a = cached.clone();
    a.extend([1, 2, 3, 4, 5]);
    let mut b = cached.clone();
    b.extend([1, 2, 3, 4, 6]);
    sched.add(request(1, &a, 1)).unwrap();
    sched.add(request(9, &[7; 30], 1)).unwrap();
    sched.add(request(2, &b, 1)).unwrap();
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(rids(&decision), vec![1, 9, 2]);
}

#[test]
fn requeued_requests_go_first_in_requeue_order() {
    let (mut index, mut sched) = matched_queue(Policy::Lpm);
    sched.requeue(request(20, &[42, 43], 5)).unwrap();
    sched.requeue(request(21, &[44, 45], 5)).unwrap();
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(rids(&decision), vec![20, 21, 12, 11, 13, 10]);
    assert!(decision.admissions[0].is_urgent && !decision.admissions[2].is_urgent);
    assert_eq!(sched.num_starved_admissions(), 0, "requeues are not starvation");
}

#[test]
fn guard_moves_a_starving_request_ahead_after_max_wait_steps() {
    let hot: Vec<u32> = (1..=32).collect();
    let run = |guard: Option<StarvationGuard>| {
        let mut index = FakeIndex::default();
        index.cache(&hot, 0);
        let mut sched = scheduler(SchedConfig {
            max_running_requests: 1,
            starvation_guard: guard,
            ..with_policy(Policy::Lpm)
        });
        sched.add(request(0, &[900, 901], 1)).unwrap();
        let mut admitted = Vec::new();
        for rid in 1..=5u64 {
            sched.add(request(rid, &tokens_with_prefix(&hot, rid, 40), 1)).unwrap();
            let decision = select(&mut sched, &mut index, step(1000));
            admitted.push(decision.admissions[0].clone());
            for admission in &decision.admissions {
                sglr_sched::PrefixIndex::unlock(&mut index, admission.node.unwrap()).unwrap();
            }
        }
        (admitted, sched.num_starved_admissions())
    };
    let (guarded, num_starved) = run(Some(StarvationGuard { max_wait_steps: Some(2), max_wait_s: None }));
    let cold = guarded.iter().position(|a| a.rid == 0).expect("admitted");
    assert_eq!(cold, 2, "passed over exactly twice");
    assert!(guarded[cold].is_urgent && guarded[cold].waited_steps == 2);
    assert_eq!(num_starved, 1);
    let (plain, _) = run(None);
    assert!(plain.iter().all(|a| a.rid != 0), "plain lpm starves it");
}

#[test]
fn namespaces_do_not_share_cached_prefixes() {
    let mut index = FakeIndex::default();
    index.cache_in(Some(3), &[1, 2, 3, 4], 0);
    let mut sched = scheduler(with_policy(Policy::Lpm));
    let mut other = request(1, &[1, 2, 3, 4, 5], 1);
    other.namespace = Some(4);
    let mut same = request(2, &[1, 2, 3, 4, 5], 1);
    same.namespace = Some(3);
    sched.add(other).unwrap();
    sched.add(same).unwrap();
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(rids(&decision), vec![2, 1]);
    assert_eq!(decision.admissions[0].prefix_len, 4);
    assert_eq!(decision.admissions[1].prefix_len, 0);
}

#[test]
fn starving_followers_still_wait_one_step_for_their_leaders_prefix() {
    let shared: Vec<u32> = (500..540).collect(); // 40 uncached tokens
    let mut sched = scheduler(SchedConfig {
        policy: Policy::Lpm,
        in_batch_share_min_len: Some(32),
        // Every request counts as starving at once: urgency must not undo prefix sharing.
        starvation_guard: Some(StarvationGuard { max_wait_steps: Some(0), max_wait_s: None }),
        ..config()
    });
    for rid in 1..=3 {
        sched.add(request(rid, &tokens_with_prefix(&shared, rid, 50), 1)).unwrap();
    }
    let mut index = FakeIndex::default();
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(decision.admissions.len(), 1, "one leader computes the shared prefix");
    let leader = decision.admissions[0].rid;
    index.cache(&tokens_with_prefix(&shared, leader, 50), 0);
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(decision.admissions.len(), 2);
    assert!(decision.admissions.iter().all(|a| a.prefix_len == 40 && a.is_urgent));
}

#[test]
fn priority_keys_order_levels_and_keep_the_policy_within_a_level() {
    let mut index = FakeIndex::default();
    index.cache(&[1, 2, 3, 4, 5, 6, 7, 8], 100);
    let mut sched = scheduler(with_policy(Policy::Lpm));
    let with_key = |rid, tokens: &[u32], key| NewRequest { priority_key: key, ..request(rid, tokens, 1) };
    sched.add(with_key(10, &[50, 51, 52, 53], -1)).unwrap();
    sched.add(with_key(11, &[1, 2, 3, 60, 61], 0)).unwrap();
    sched.add(with_key(12, &[1, 2, 3, 4, 5, 6, 70], 0)).unwrap();
    sched.add(with_key(13, &[1, 2, 3, 80, 81], -1)).unwrap();
    // A requeued request leads its own level only.
    sched.requeue(with_key(14, &[90, 91], 0)).unwrap();
    let decision = select(&mut sched, &mut index, step(1000));
    assert_eq!(rids(&decision), vec![13, 10, 14, 12, 11]);
}
