/// A token id of the model's vocabulary.
pub type TokenId = u32;
/// A KV-cache slot id (an index into the KV pool; one slot per token).
pub type SlotId = u32;
/// A cache namespace (adapter id, cache salt, ...): requests of different namespaces never
/// share KV. `None` is the default namespace.
pub type Namespace = u64;

/// A handle to a tree node: arena index plus the generation of that arena entry.
///
/// A node keeps its handle across splits (a split inserts a *new* node above it), so a handle
/// taken from `match_prefix` stays valid until that node itself is evicted or the tree reset.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl NodeId {
    /// Packs the handle into one integer (for the Python binding).
    pub fn to_u64(self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.index)
    }

    /// Inverse of [`NodeId::to_u64`]; the tree validates the result on use.
    pub fn from_u64(raw: u64) -> Self {
        Self { index: raw as u32, generation: (raw >> 32) as u32 }
    }
}
