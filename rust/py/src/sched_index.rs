//! The radix tree as the scheduler's `PrefixIndex`, with the scheduler's namespace ids
//! translated to the tree's (each side interns namespace names on its own).

use sglr_radix::{Namespace, NodeId, RadixError, RadixTree, SlotId, TokenId};
use sglr_sched::PrefixIndex;

/// The tree seen through the scheduler's namespace ids.
pub(crate) struct NamespacedTree<'a> {
    pub(crate) tree: &'a mut RadixTree,
    /// Scheduler namespace id -> the tree's namespace id.
    pub(crate) namespaces: &'a [Namespace],
}

impl NamespacedTree<'_> {
    fn map(&self, namespace: Option<Namespace>) -> Option<Namespace> {
        namespace.map(|id| self.namespaces[id as usize])
    }
}

impl PrefixIndex for NamespacedTree<'_> {
    type Node = NodeId;
    type Error = RadixError;

    fn match_len(&mut self, namespace: Option<Namespace>, tokens: &[TokenId]) -> (usize, NodeId) {
        let namespace = self.map(namespace);
        self.tree.match_len(namespace, tokens)
    }

    fn rematch_len(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        previous: (usize, NodeId),
    ) -> (usize, NodeId) {
        let namespace = self.map(namespace);
        self.tree.rematch_len(namespace, tokens, previous)
    }

    fn match_slots(
        &mut self,
        namespace: Option<Namespace>,
        tokens: &[TokenId],
        slots: &mut Vec<SlotId>,
    ) -> (usize, NodeId) {
        let namespace = self.map(namespace);
        self.tree.match_slots(namespace, tokens, slots)
    }

    fn lock(&mut self, node: NodeId) -> Result<(), RadixError> {
        self.tree.lock(node)
    }

    fn unlock(&mut self, node: NodeId) -> Result<(), RadixError> {
        self.tree.unlock(node)
    }

    fn evictable_size(&self) -> usize {
        self.tree.evictable_size()
    }
}
