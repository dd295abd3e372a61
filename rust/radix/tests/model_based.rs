//! Random operation sequences checked against a naive reference model, with
//! `check_invariants()` after every operation.
//!
//! The model stores every cached *prefix* (namespace, tokens[..=i]) with its slot, last access
//! time and lock count. Eviction order is not predicted exactly (ties); instead each eviction
//! is checked for what LRU leaf eviction must guarantee.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use sglr_radix::{Namespace, NodeId, RadixTree};

type Key = (Option<Namespace>, Vec<u32>);

#[derive(Clone, Copy)]
struct Entry {
    slot: u32,
    last_access: u64,
    lock_ref: u32,
}

#[derive(Default)]
struct Model {
    entries: HashMap<Key, Entry>,
    clock: u64,
}

impl Model {
    fn matched_len(&self, ns: Option<Namespace>, tokens: &[u32]) -> usize {
        (0..tokens.len()).take_while(|&i| self.entries.contains_key(&(ns, tokens[..=i].to_vec()))).count()
    }

    fn slots(&self, ns: Option<Namespace>, tokens: &[u32], len: usize) -> Vec<u32> {
        (0..len).map(|i| self.entries[&(ns, tokens[..=i].to_vec())].slot).collect()
    }

    fn touch(&mut self, ns: Option<Namespace>, tokens: &[u32], len: usize) {
        for i in 0..len {
            self.entries.get_mut(&(ns, tokens[..=i].to_vec())).unwrap().last_access = self.clock;
        }
    }

    fn match_prefix(&mut self, ns: Option<Namespace>, tokens: &[u32]) -> Vec<u32> {
        self.clock += 1;
        let len = self.matched_len(ns, tokens);
        self.touch(ns, tokens, len);
        self.slots(ns, tokens, len)
    }

    fn insert(&mut self, ns: Option<Namespace>, tokens: &[u32], slots: &[u32]) -> usize {
        self.clock += 1;
        let cached = self.matched_len(ns, tokens);
        for i in cached..tokens.len() {
            let entry = Entry { slot: slots[i], last_access: 0, lock_ref: 0 };
            self.entries.insert((ns, tokens[..=i].to_vec()), entry);
        }
        self.touch(ns, tokens, tokens.len());
        cached
    }

    fn add_lock(&mut self, ns: Option<Namespace>, path: &[u32], delta: i64) {
        for i in 0..path.len() {
            let entry = self.entries.get_mut(&(ns, path[..=i].to_vec())).unwrap();
            entry.lock_ref = (i64::from(entry.lock_ref) + delta) as u32;
        }
    }

    fn num_unlocked(&self) -> usize {
        self.entries.values().filter(|e| e.lock_ref == 0).count()
    }

    fn has_extension(&self, key: &Key) -> bool {
        self.entries.keys().any(|(ns, t)| *ns == key.0 && t.len() == key.1.len() + 1 && t.starts_with(&key.1))
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert { ns: Option<Namespace>, tokens: Vec<u32> },
    Match { ns: Option<Namespace>, tokens: Vec<u32> },
    MatchAndLock { ns: Option<Namespace>, tokens: Vec<u32> },
    Unlock { pick: usize },
    Evict { num_tokens: usize },
    Reset,
}

fn tokens() -> impl Strategy<Value = Vec<u32>> {
    // A tiny alphabet so random sequences share prefixes and split each other often.
    prop::collection::vec(0u32..3, 0..10)
}

fn namespace() -> impl Strategy<Value = Option<Namespace>> {
    prop_oneof![4 => Just(None), 1 => Just(Some(7))]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (namespace(), tokens()).prop_map(|(ns, tokens)| Op::Insert { ns, tokens }),
        3 => (namespace(), tokens()).prop_map(|(ns, tokens)| Op::Match { ns, tokens }),
        3 => (namespace(), tokens()).prop_map(|(ns, tokens)| Op::MatchAndLock { ns, tokens }),
        2 => any::<usize>().prop_map(|pick| Op::Unlock { pick }),
        3 => (0usize..12).prop_map(|num_tokens| Op::Evict { num_tokens }),
        1 => Just(Op::Reset),
    ]
}

struct Harness {
    tree: RadixTree,
    model: Model,
    next_slot: u32,
    locks: Vec<(NodeId, Option<Namespace>, Vec<u32>)>,
}

impl Harness {
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Insert { ns, tokens } => {
                let slots: Vec<u32> = (0..tokens.len() as u32).map(|i| self.next_slot + i).collect();
                self.next_slot += tokens.len() as u32;
                let outcome = self.tree.insert(*ns, tokens, &slots).unwrap();
                assert_eq!(outcome.num_cached, self.model.insert(*ns, tokens, &slots));
            }
            Op::Match { ns, tokens } => {
                let outcome = self.tree.match_prefix(*ns, tokens);
                assert_eq!(outcome.slots, self.model.match_prefix(*ns, tokens));
            }
            Op::MatchAndLock { ns, tokens } => {
                let outcome = self.tree.match_prefix(*ns, tokens);
                assert_eq!(outcome.slots, self.model.match_prefix(*ns, tokens));
                let path = tokens[..outcome.slots.len()].to_vec();
                self.tree.lock(outcome.node).unwrap();
                self.model.add_lock(*ns, &path, 1);
                self.locks.push((outcome.node, *ns, path));
            }
            Op::Unlock { pick } => {
                if !self.locks.is_empty() {
                    let (node, ns, path) = self.locks.swap_remove(pick % self.locks.len());
                    self.tree.unlock(node).unwrap();
                    self.model.add_lock(ns, &path, -1);
                }
            }
            Op::Evict { num_tokens } => self.evict(*num_tokens),
            Op::Reset => {
                // Reset is only valid with nothing locked; release locks first.
                for (node, ns, path) in self.locks.drain(..) {
                    self.tree.unlock(node).unwrap();
                    self.model.add_lock(ns, &path, -1);
                }
                self.tree.reset();
                self.model.entries.clear();
            }
        }
    }

    fn evict(&mut self, num_tokens: usize) {
        let unlocked_before = self.model.num_unlocked();
        let freed = self.tree.evict(num_tokens);
        if unlocked_before >= num_tokens {
            assert!(freed.len() >= num_tokens, "asked {num_tokens}, freed {}", freed.len());
        } else {
            assert_eq!(freed.len(), unlocked_before, "everything unlocked must go");
        }
        let freed: HashSet<u32> = freed.into_iter().collect();
        let evicted: Vec<Key> = self
            .model
            .entries
            .iter()
            .filter(|(_, e)| freed.contains(&e.slot))
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(evicted.len(), freed.len(), "freed slots the model does not hold");
        let mut newest_evicted = 0;
        for key in &evicted {
            let entry = self.model.entries.remove(key).unwrap();
            assert_eq!(entry.lock_ref, 0, "evicted a locked prefix");
            newest_evicted = newest_evicted.max(entry.last_access);
        }
        for (ns, t) in self.model.entries.keys() {
            if t.len() > 1 {
                assert!(
                    self.model.entries.contains_key(&(*ns, t[..t.len() - 1].to_vec())),
                    "orphaned prefix"
                );
            }
        }
        // LRU: nothing evicted was used more recently than an unlocked leaf that stayed.
        for (key, entry) in &self.model.entries {
            if entry.lock_ref == 0 && !self.model.has_extension(key) {
                assert!(
                    entry.last_access >= newest_evicted,
                    "evicted {newest_evicted} before leaf {:?}",
                    key
                );
            }
        }
    }

    fn check_sizes(&self) {
        let protected = self.model.entries.values().filter(|e| e.lock_ref > 0).count();
        assert_eq!(self.tree.protected_size(), protected);
        assert_eq!(self.tree.evictable_size(), self.model.entries.len() - protected);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn tree_agrees_with_reference_model(ops in prop::collection::vec(op(), 1..60)) {
        let mut harness = Harness { tree: RadixTree::new(), model: Model::default(), next_slot: 0, locks: Vec::new() };
        for op in &ops {
            harness.apply(op);
            harness.tree.check_invariants().unwrap();
            harness.check_sizes();
        }
    }
}
