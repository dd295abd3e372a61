//! `Scheduler::preview`: the waiting queue in the order the next selection offers it, from the
//! matches the last selection found, without touching the index.

mod common;

use common::*;
use sglr_sched::{Policy, SchedConfig};

fn preview_rids(sched: &sglr_sched::Scheduler<FakeNode>, limit: usize) -> Vec<u64> {
    sched.preview(0.0, limit).iter().map(|w| w.rid).collect()
}

/// Cached: [1..=8]. Requests 10 (no match), 11 (3 tokens), 12 (6 tokens), 13 (3 tokens).
fn matched_queue(config: SchedConfig) -> (FakeIndex, sglr_sched::Scheduler<FakeNode>) {
    let mut index = FakeIndex::default();
    index.cache(&[1, 2, 3, 4, 5, 6, 7, 8], 100);
    let mut sched = scheduler(SchedConfig { in_batch_share_min_len: None, ..config });
    sched.add(request(10, &[50, 51, 52, 53], 4)).unwrap();
    sched.add(request(11, &[1, 2, 3, 60, 61], 1)).unwrap();
    sched.add(request(12, &[1, 2, 3, 4, 5, 6, 70], 9)).unwrap();
    sched.add(request(13, &[1, 2, 3, 80, 81], 2)).unwrap();
    (index, sched)
}

#[test]
fn preview_is_the_next_selections_order_and_bounded() {
    let (mut index, mut sched) = matched_queue(SchedConfig { policy: Policy::Lof, ..config() });
    assert_eq!(preview_rids(&sched, 2), vec![12, 10]);
    let previewed = preview_rids(&sched, 10);
    assert!(sched.preview(0.0, 10).iter().all(|w| !w.is_urgent && w.priority_key == 0));
    assert_eq!(rids(&select(&mut sched, &mut index, step(1000))), previewed);
    assert!(sched.preview(0.0, 10).is_empty());
}

#[test]
fn lpm_preview_uses_the_matches_of_the_last_selection() {
    let one_at_a_time = SchedConfig { policy: Policy::Lpm, max_running_requests: 1, ..config() };
    let (mut index, mut sched) = matched_queue(one_at_a_time);
    // Nothing ranked yet: no match known, so arrival order.
    assert_eq!(preview_rids(&sched, 10), vec![10, 11, 12, 13]);
    assert_eq!(rids(&select(&mut sched, &mut index, step(1000))), vec![12]);
    let waiting = sched.preview(0.0, 10);
    let seen: Vec<(u64, usize)> = waiting.iter().map(|w| (w.rid, w.matched_len)).collect();
    assert_eq!(seen, vec![(11, 3), (13, 3), (10, 0)]);
    assert_eq!(rids(&select(&mut sched, &mut index, step(1000))), vec![11]);
}

#[test]
fn a_requeued_request_previews_first_and_urgent() {
    let (_, mut sched) = matched_queue(SchedConfig { policy: Policy::Fcfs, ..config() });
    sched.requeue(request(20, &[90, 91], 1)).unwrap();
    let waiting = sched.preview(0.0, 10);
    assert_eq!((waiting[0].rid, waiting[0].is_urgent), (20, true));
    assert_eq!(waiting.iter().skip(1).map(|w| w.rid).collect::<Vec<_>>(), vec![10, 11, 12, 13]);
}
