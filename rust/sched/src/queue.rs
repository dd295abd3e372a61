//! The requests the scheduler holds, in a slab keyed by small integers (the waiting trie and
//! the per-step candidate lists refer to requests by slab key, not by request id).

use std::sync::Arc;

use rustc_hash::FxHashMap;
use sglr_radix::{Namespace, TokenId};

use crate::ReqId;

#[derive(Debug, Clone)]
pub(crate) struct Entry<N> {
    pub(crate) rid: ReqId,
    pub(crate) namespace: Option<Namespace>,
    pub(crate) tokens: Arc<[TokenId]>,
    pub(crate) max_new_tokens: usize,
    /// Arrival order (requeues take a fresh one).
    pub(crate) seq: u64,
    /// Selections that had run before the request arrived.
    pub(crate) arrival_step: u64,
    pub(crate) arrival_s: f64,
    /// Put back at the head of the queue (a retracted request).
    pub(crate) is_front: bool,
    /// How many leading tokens the cache may supply (the rest is computed).
    pub(crate) match_key_len: usize,
    /// The last known cache match of `match_key()`, continued cheaply by the next ranking.
    pub(crate) cached: Option<(usize, N)>,
    /// Node of the waiting trie where `tokens` ends.
    pub(crate) trie_node: u32,
    /// Tokens whose KV exists once a chunked prefill has started (`None` before).
    pub(crate) num_computed: Option<usize>,
    /// See `NewRequest::priority_key`.
    pub(crate) priority_key: i64,
}

#[derive(Debug)]
pub(crate) struct Queue<N> {
    slots: Vec<Option<Entry<N>>>,
    free_keys: Vec<u32>,
    by_rid: FxHashMap<ReqId, u32>,
}

impl<N> Default for Queue<N> {
    fn default() -> Self {
        Self { slots: Vec::new(), free_keys: Vec::new(), by_rid: FxHashMap::default() }
    }
}

impl<N> Queue<N> {
    pub(crate) fn len(&self) -> usize {
        self.by_rid.len()
    }

    /// One past the largest key ever used.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn key_of(&self, rid: ReqId) -> Option<u32> {
        self.by_rid.get(&rid).copied()
    }

    /// The key the next `insert` will use.
    pub(crate) fn next_key(&self) -> u32 {
        self.free_keys.last().copied().unwrap_or(self.slots.len() as u32)
    }

    /// Stores `entry` under `next_key()`; the caller checked that its rid is new.
    pub(crate) fn insert(&mut self, entry: Entry<N>) -> u32 {
        let key = self.next_key();
        debug_assert!(!self.by_rid.contains_key(&entry.rid));
        self.by_rid.insert(entry.rid, key);
        match self.free_keys.pop() {
            Some(key) => self.slots[key as usize] = Some(entry),
            None => self.slots.push(Some(entry)),
        }
        key
    }

    pub(crate) fn remove(&mut self, key: u32) -> Entry<N> {
        let entry = self.slots[key as usize].take().expect("removed keys are live");
        self.by_rid.remove(&entry.rid);
        self.free_keys.push(key);
        entry
    }

    pub(crate) fn get(&self, key: u32) -> &Entry<N> {
        self.slots[key as usize].as_ref().expect("live key")
    }

    pub(crate) fn get_mut(&mut self, key: u32) -> &mut Entry<N> {
        self.slots[key as usize].as_mut().expect("live key")
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &Entry<N>)> {
        self.slots.iter().enumerate().filter_map(|(key, slot)| slot.as_ref().map(|entry| (key as u32, entry)))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Entry<N>)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(key, slot)| slot.as_mut().map(|entry| (key as u32, entry)))
    }

    /// Request ids by key, for invariant checks.
    pub(crate) fn rid_index(&self) -> &FxHashMap<ReqId, u32> {
        &self.by_rid
    }
}
