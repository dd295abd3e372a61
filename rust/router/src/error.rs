/// Misuse of the forest, returned instead of panicking so the binding can map it to
/// `sglr.errors`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouterTreeError {
    #[error("unknown replica {0}")]
    UnknownReplica(u32),
    #[error("replica {0} already exists")]
    DuplicateReplica(u32),
    #[error("no replica is available")]
    NoReplicas,
    #[error("max_keys_per_tree must be at least 1")]
    ZeroCapacity,
    #[error("router tree invariant violated: {0}")]
    Invariant(String),
}
