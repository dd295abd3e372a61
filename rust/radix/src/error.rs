use crate::ids::NodeId;

/// Misuse of the tree. Every public operation returns these instead of panicking, so the
/// Python binding can map them to `sglr.errors` exceptions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RadixError {
    #[error("tokens and slots differ in length ({num_tokens} tokens, {num_slots} slots)")]
    LengthMismatch { num_tokens: usize, num_slots: usize },
    #[error("unknown node handle {0:?}: it was never issued by this tree")]
    UnknownNode(NodeId),
    #[error("stale node handle {0:?}: the node was evicted or the tree was reset")]
    StaleNode(NodeId),
    #[error("unlock of node {0:?} whose lock count is already zero")]
    UnlockBelowZero(NodeId),
    #[error("tree invariant violated: {0}")]
    Invariant(String),
}
