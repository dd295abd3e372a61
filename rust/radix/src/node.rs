use rustc_hash::FxHashMap;

use crate::ids::{SlotId, TokenId};

/// An arena entry. `tokens` is the edge label from the parent; `slots[i]` holds the KV of
/// `tokens[i]`. Roots (one per namespace) have empty edges and are never evicted or locked.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) generation: u32,
    pub(crate) is_alive: bool,
    pub(crate) is_root: bool,
    pub(crate) parent: Option<u32>,
    pub(crate) tokens: Vec<TokenId>,
    pub(crate) slots: Vec<SlotId>,
    /// Keyed by the first token of the child's edge.
    pub(crate) children: FxHashMap<TokenId, u32>,
    /// Number of running requests whose locked prefix ends at or below this node.
    pub(crate) lock_ref: u32,
    /// Locks ever taken through this node (never reset): each request that holds its prefix, at
    /// admission or once its own tokens are cached, counts once per lock.
    pub(crate) num_hits: u64,
    /// Logical clock value of the last match or insert that walked through this node.
    pub(crate) last_access: u64,
    /// Whether the node is in the LRU set of evictable leaves (kept in step with `can_evict`).
    pub(crate) in_lru: bool,
}

impl Node {
    pub(crate) fn new(parent: Option<u32>, tokens: Vec<TokenId>, slots: Vec<SlotId>, now: u64) -> Self {
        Self {
            generation: 0,
            is_alive: true,
            is_root: parent.is_none(),
            parent,
            tokens,
            slots,
            children: FxHashMap::default(),
            lock_ref: 0,
            num_hits: 0,
            last_access: now,
            in_lru: false,
        }
    }

    /// An unlocked, childless, non-root node: the only kind `evict` may remove.
    pub(crate) fn can_evict(&self) -> bool {
        self.is_alive && !self.is_root && self.lock_ref == 0 && self.children.is_empty()
    }
}
