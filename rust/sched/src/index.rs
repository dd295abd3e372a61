//! The narrow view of the KV prefix index that admission needs. `sglr_radix::RadixTree`
//! implements it; tests plug in a naive fake.

use std::fmt::{Debug, Display};

use sglr_radix::{Namespace, NodeId, RadixError, RadixTree, SlotId, TokenId};

/// What the scheduler asks of the prefix index.
///
/// Matching may reshape the index (split an edge where a match ends, mark a path as recently
/// used) but never changes which tokens are cached: the scheduler never evicts; it reports how
/// many cached tokens must go (`Decision::num_tokens_to_evict`) and the KV owner evicts them.
pub trait PrefixIndex {
    /// A handle to the place where a matched prefix ends; lock it to pin the prefix.
    type Node: Copy + Eq + Debug;
    type Error: Display;

    /// Length of the longest cached prefix of `tokens` and the node where it ends.
    fn match_len(&mut self, namespace: Option<Namespace>, tokens: &[TokenId]) -> (usize, Self::Node);

    /// The same answer as `match_len`, given that an earlier match of these `tokens` returned
    /// `previous`. Indexes that can continue from `previous.1` make re-ranking a long queue
    /// cheap; the default matches from scratch.
    fn rematch_len(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        previous: (usize, Self::Node),
    ) -> (usize, Self::Node) {
        let _ = previous;
        self.match_len(namespace, tokens)
    }

    /// Like `match_len`, also appending the slots of the matched prefix to `slots`.
    fn match_slots(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        slots: &mut Vec<SlotId>,
    ) -> (usize, Self::Node);

    /// Pins the prefix ending at `node`: its tokens stop counting as evictable.
    fn lock(&mut self, node: Self::Node) -> Result<(), Self::Error>;

    /// Undoes one `lock`.
    fn unlock(&mut self, node: Self::Node) -> Result<(), Self::Error>;

    /// Cached tokens that eviction could reclaim (unpinned).
    fn evictable_size(&self) -> usize;
}

impl PrefixIndex for RadixTree {
    type Node = NodeId;
    type Error = RadixError;

    fn match_len(&mut self, namespace: Option<Namespace>, tokens: &[TokenId]) -> (usize, NodeId) {
        self.match_prefix_len(namespace, tokens)
    }

    fn rematch_len(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        (matched_len, node): (usize, NodeId),
    ) -> (usize, NodeId) {
        self.extend_match_len(namespace, node, matched_len, tokens)
            .unwrap_or_else(|_| self.match_prefix_len(namespace, tokens))
    }

    fn match_slots(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        slots: &mut Vec<SlotId>,
    ) -> (usize, NodeId) {
        let start = slots.len();
        let node = self.match_prefix_into(namespace, tokens, slots);
        (slots.len() - start, node)
    }

    fn lock(&mut self, node: NodeId) -> Result<(), RadixError> {
        RadixTree::lock(self, node)
    }

    fn unlock(&mut self, node: NodeId) -> Result<(), RadixError> {
        RadixTree::unlock(self, node)
    }

    fn evictable_size(&self) -> usize {
        RadixTree::evictable_size(self)
    }
}
