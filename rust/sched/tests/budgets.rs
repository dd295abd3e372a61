//! Algorithm 1's budgets: memory (free + evictable - reservations), the per-step prefill
//! budget with chunking, the running cap, locks and eviction; plus queue bookkeeping errors.

mod common;

use common::*;
use sglr_sched::{Policy, SchedConfig, SchedError, StepInput, StopReason};

fn fcfs() -> SchedConfig {
    SchedConfig { policy: Policy::Fcfs, in_batch_share_min_len: None, ..config() }
}

#[test]
fn empty_queue_returns_an_empty_decision_and_counts_the_step() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler::<FakeNode>(fcfs());
    let decision = select(&mut sched, &mut index, step(100));
    assert!(decision.is_empty());
    assert_eq!(decision.stop, StopReason::QueueExhausted);
    assert_eq!((decision.step, sched.step()), (0, 1));
    assert_eq!(index.num_matches, 0);
}

#[test]
fn exact_fit_is_admitted_one_slot_less_is_not() {
    for (free, admitted) in [(10, true), (9, false)] {
        let mut index = FakeIndex::default();
        let mut sched = scheduler(fcfs());
        sched.add(request(1, &[5; 10], 0)).unwrap();
        let decision = select(&mut sched, &mut index, step(free));
        assert_eq!(decision.admissions.len(), usize::from(admitted), "free {free}");
        if !admitted {
            assert_eq!(decision.stop, StopReason::Memory);
            assert!(sched.contains(1));
        }
    }
}

#[test]
fn output_reserve_uses_new_token_ratio_not_max_new_tokens() {
    // 10 prompt tokens + ceil(10 * 0.7) = 17 slots.
    for (free, admitted) in [(17, true), (16, false)] {
        let mut index = FakeIndex::default();
        let mut sched = scheduler(fcfs());
        sched.add(request(1, &[5; 10], 10)).unwrap();
        let decision = select(&mut sched, &mut index, step(free));
        assert_eq!(decision.admissions.len(), usize::from(admitted), "free {free}");
    }
    // With the ratio at 1.0 the full (clipped) max_new_tokens is reserved.
    let mut index = FakeIndex::default();
    let mut sched = scheduler(SchedConfig { clip_max_new_tokens: 5, ..fcfs() });
    sched.new_token_ratio_mut().set(1.0);
    sched.add(request(1, &[5; 10], 1000)).unwrap();
    assert!(select(&mut sched, &mut index, step(14)).is_empty());
    assert_eq!(select(&mut sched, &mut index, step(15)).admissions.len(), 1);
}

#[test]
fn running_requests_reserve_their_estimated_output() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(fcfs());
    sched.new_token_ratio_mut().set(0.5);
    sched.add(request(1, &[5; 10], 0)).unwrap();
    let running = [100u32, 40];
    let input = |free| StepInput { num_free_slots: free, running_tokens_left: &running, now_s: 0.0 };
    // Running reserve: 50 + 20 = 70; the request needs 10 more.
    assert_eq!(select(&mut sched, &mut index, input(79)).stop, StopReason::Memory);
    assert_eq!(select(&mut sched, &mut index, input(80)).admissions.len(), 1);
}

#[test]
fn zero_memory_budget_admits_nothing() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(fcfs());
    sched.add(request(1, &[5; 3], 0)).unwrap();
    let decision = select(&mut sched, &mut index, step(0));
    assert!(decision.is_empty());
    assert_eq!(decision.stop, StopReason::Memory);
    assert_eq!(decision.num_tokens_to_evict, 0);
    sched.check_invariants().unwrap();
}

#[test]
fn evictable_cache_counts_as_available_and_the_shortfall_is_reported() {
    let mut index = FakeIndex::default();
    let unrelated = index.cache(&[9; 8], 200);
    let mut sched = scheduler(fcfs());
    sched.add(request(1, &[5; 6], 0)).unwrap();
    let decision = select(&mut sched, &mut index, step(2));
    assert_eq!(decision.num_prefill_tokens, 6);
    // 4 more slots were needed: the engine evicts them; the scheduler itself frees nothing.
    assert_eq!(decision.num_tokens_to_evict, 4);
    assert!(index.is_cached(unrelated));
}

#[test]
fn a_matched_prefix_is_locked_and_never_evicted_for_its_own_prefill() {
    let mut index = FakeIndex::default();
    let prefix = index.cache(&[1, 2, 3, 4], 100);
    let mut sched = scheduler(fcfs());
    sched.add(request(1, &[1, 2, 3, 4, 5, 6], 0)).unwrap();
    // free 2 == the 2 uncached tokens; the 4 cached ones are locked, not evictable.
    let decision = select(&mut sched, &mut index, step(2));
    assert_eq!(decision.admissions[0].prefix_len, 4);
    assert_eq!(decision.admissions[0].node.unwrap().seq, Some(prefix));
    assert_eq!(decision.slots_of(0), &[100, 101, 102, 103]);
    assert_eq!(index.lock_ref(prefix), 1, "the engine now owns this lock");
    assert_eq!(decision.num_tokens_to_evict, 0);
}

#[test]
fn all_cache_locked_leaves_only_free_slots() {
    let mut index = FakeIndex::default();
    let held = index.cache(&[7; 50], 0);
    sglr_sched::PrefixIndex::lock(&mut index, FakeNode { seq: Some(held), len: 50 }).unwrap();
    let mut sched = scheduler(fcfs());
    sched.add(request(1, &[5; 4], 0)).unwrap();
    let decision = select(&mut sched, &mut index, step(3));
    assert_eq!(decision.stop, StopReason::Memory);
    assert_eq!(decision.num_tokens_to_evict, 0);
    assert_eq!(select(&mut sched, &mut index, step(4)).admissions.len(), 1);
    assert_eq!(index.protected_size(), 50);
}

#[test]
fn a_refused_request_leaves_no_lock_behind() {
    let mut index = FakeIndex::default();
    let prefix = index.cache(&[1, 2, 3, 4], 100);
    let mut sched = scheduler(fcfs());
    sched.add(request(1, &[1, 2, 3, 4, 5, 6], 0)).unwrap();
    let decision = select(&mut sched, &mut index, step(1));
    assert_eq!(decision.stop, StopReason::Memory);
    assert!(decision.prefix_slots.is_empty());
    assert_eq!(index.lock_ref(prefix), 0);
}

#[test]
fn memory_stop_blocks_later_requests_to_keep_order() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(fcfs());
    sched.add(request(1, &[5; 100], 0)).unwrap();
    sched.add(request(2, &[6; 2], 0)).unwrap();
    let decision = select(&mut sched, &mut index, step(50));
    assert!(decision.is_empty(), "a small request does not overtake a big one");
}

#[test]
fn chunk_boundary_prompt_equal_to_budget_runs_whole() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(SchedConfig { max_prefill_tokens: 8, ..fcfs() });
    sched.add(request(1, &[5; 8], 0)).unwrap();
    sched.add(request(2, &[6; 3], 0)).unwrap();
    let decision = select(&mut sched, &mut index, step(100));
    assert_eq!(rids(&decision), vec![1]);
    assert!(decision.admissions[0].is_prompt_done);
    assert_eq!(decision.stop, StopReason::PrefillBudget);
    assert_eq!(sched.chunked_rid(), None);
}

#[test]
fn prompt_one_over_the_budget_is_chunked_and_continued_first() {
    let mut index = FakeIndex::default();
    let prefix = index.cache(&[1, 2], 100);
    let mut sched = scheduler(SchedConfig { max_prefill_tokens: 8, ..fcfs() });
    let mut tokens = vec![1, 2];
    tokens.extend([5; 9]); // 11 tokens, 2 cached: 9 to prefill
    sched.add(request(1, &tokens, 4)).unwrap();
    sched.add(request(2, &[6; 3], 0)).unwrap();

    let first = select(&mut sched, &mut index, step(100));
    assert_eq!(rids(&first), vec![1]);
    let chunk = &first.admissions[0];
    assert_eq!((chunk.prefix_len, chunk.extend_len), (2, 8));
    assert!(!chunk.is_prompt_done && !chunk.is_continuation);
    assert_eq!(chunk.node.unwrap().seq, Some(prefix));
    assert_eq!(sched.chunked_rid(), Some(1));
    assert_eq!(sched.len(), 2);

    let second = select(&mut sched, &mut index, step(100));
    assert_eq!(rids(&second), vec![1, 2]);
    let rest = &second.admissions[0];
    assert_eq!((rest.prefix_len, rest.extend_len), (10, 1));
    assert!(rest.is_prompt_done && rest.is_continuation);
    assert_eq!(rest.node, None);
    assert!(second.slots_of(0).is_empty());
    assert_eq!(second.num_prefill_tokens, 1 + 3);
    assert_eq!(index.lock_ref(prefix), 1, "a continuation takes no new lock");
    assert!(sched.is_empty() && sched.chunked_rid().is_none());
}

#[test]
fn a_continuation_waits_for_memory_and_nothing_overtakes_it() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(SchedConfig { max_prefill_tokens: 4, ..fcfs() });
    sched.add(request(1, &[5; 10], 0)).unwrap();
    sched.add(request(2, &[6; 2], 0)).unwrap();
    assert_eq!(select(&mut sched, &mut index, step(100)).admissions[0].extend_len, 4);
    let starved = select(&mut sched, &mut index, step(3));
    assert!(starved.is_empty());
    assert_eq!(starved.stop, StopReason::Memory);
    let resumed = select(&mut sched, &mut index, step(100));
    assert_eq!((resumed.admissions[0].prefix_len, resumed.admissions[0].extend_len), (4, 4));
}

#[test]
fn without_chunking_an_oversized_prompt_runs_alone() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(SchedConfig { max_prefill_tokens: 8, enable_chunked_prefill: false, ..fcfs() });
    sched.add(request(1, &[5; 20], 0)).unwrap();
    sched.add(request(2, &[6; 3], 0)).unwrap();
    sched.add(request(3, &[7; 20], 0)).unwrap();
    let first = select(&mut sched, &mut index, step(100));
    assert_eq!(rids(&first), vec![1]);
    assert_eq!(first.admissions[0].extend_len, 20);
    assert!(first.admissions[0].is_prompt_done);
    let second = select(&mut sched, &mut index, step(100));
    assert_eq!(rids(&second), vec![2], "3 does not fit next to 2 and waits");
    assert_eq!(second.stop, StopReason::PrefillBudget);
}

#[test]
fn running_cap_counts_running_and_admitted_requests() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(SchedConfig { max_running_requests: 3, ..fcfs() });
    for rid in 0..5 {
        sched.add(request(rid, &[rid as u32 + 1; 2], 0)).unwrap();
    }
    let input =
        |running: &'static [u32]| StepInput { num_free_slots: 100, running_tokens_left: running, now_s: 0.0 };
    let decision = select(&mut sched, &mut index, input(&[0, 0, 0]));
    assert!(decision.is_empty());
    assert_eq!(decision.stop, StopReason::RunningCap);
    let decision = select(&mut sched, &mut index, input(&[0]));
    assert_eq!(rids(&decision), vec![0, 1]);
    assert_eq!(decision.stop, StopReason::RunningCap);
}

#[test]
fn one_token_prompts_never_match_and_always_prefill_a_token() {
    let mut index = FakeIndex::default();
    index.cache(&[3, 4], 0);
    let mut sched = scheduler(fcfs());
    sched.add(request(1, &[3], 0)).unwrap();
    sched.add(request(2, &[3, 4], 0)).unwrap();
    let decision = select(&mut sched, &mut index, step(10));
    let spans: Vec<(usize, usize)> =
        decision.admissions.iter().map(|a| (a.prefix_len, a.extend_len)).collect();
    // A fully cached prompt still runs its last token.
    assert_eq!(spans, vec![(0, 1), (1, 1)]);
}

#[test]
fn queue_bookkeeping_errors_are_typed() {
    let mut sched = scheduler::<FakeNode>(SchedConfig { max_request_tokens: Some(4), ..fcfs() });
    sched.add(request(1, &[1, 2], 0)).unwrap();
    assert_eq!(sched.add(request(1, &[3], 0)), Err(SchedError::DuplicateRequest(1)));
    assert_eq!(sched.requeue(request(1, &[3], 0)), Err(SchedError::DuplicateRequest(1)));
    assert_eq!(sched.add(request(2, &[], 0)), Err(SchedError::EmptyPrompt(2)));
    assert!(matches!(
        sched.add(request(3, &[1; 5], 0)),
        Err(SchedError::RequestTooLarge { num_tokens: 5, .. })
    ));
    assert_eq!(sched.len(), 1);
    assert!(sched.remove(1));
    assert!(!sched.remove(1));
    sched.check_invariants().unwrap();
}

#[test]
fn removing_the_chunked_request_frees_the_next_step() {
    let mut index = FakeIndex::default();
    let mut sched = scheduler(SchedConfig { max_prefill_tokens: 4, ..fcfs() });
    sched.add(request(1, &[5; 10], 0)).unwrap();
    sched.add(request(2, &[6; 2], 0)).unwrap();
    select(&mut sched, &mut index, step(100));
    assert!(sched.remove(1));
    sched.check_invariants().unwrap();
    assert_eq!(rids(&select(&mut sched, &mut index, step(100))), vec![2]);
}

#[test]
fn index_errors_release_every_lock_of_the_pass() {
    // An index whose lock fails on the second call.
    struct Flaky {
        inner: FakeIndex,
        num_locks: usize,
    }
    impl sglr_sched::PrefixIndex for Flaky {
        type Node = FakeNode;
        type Error = String;
        fn match_len(&mut self, ns: Option<u64>, t: &[u32]) -> (usize, FakeNode) {
            self.inner.match_len(ns, t)
        }
        fn match_slots(&mut self, ns: Option<u64>, t: &[u32], s: &mut Vec<u32>) -> (usize, FakeNode) {
            self.inner.match_slots(ns, t, s)
        }
        fn lock(&mut self, node: FakeNode) -> Result<(), String> {
            self.num_locks += 1;
            if self.num_locks == 2 {
                return Err("refused".into());
            }
            self.inner.lock(node)
        }
        fn unlock(&mut self, node: FakeNode) -> Result<(), String> {
            self.inner.unlock(node)
        }
        fn evictable_size(&self) -> usize {
            self.inner.evictable_size()
        }
    }
    let mut index = Flaky { inner: FakeIndex::default(), num_locks: 0 };
    let a = index.inner.cache(&[1, 1, 1], 0);
    index.inner.cache(&[2, 2, 2], 10);
    let mut sched = scheduler(fcfs());
    sched.add(request(1, &[1, 1, 1, 9], 0)).unwrap();
    sched.add(request(2, &[2, 2, 2, 9], 0)).unwrap();
    let error = sched.select(&mut index, &step(100)).unwrap_err();
    assert!(matches!(error, SchedError::Index(_)));
    assert_eq!(index.inner.lock_ref(a), 0);
    assert_eq!(sched.len(), 2, "a failed selection admits nobody");
    sched.check_invariants().unwrap();
}
