//! A node of a [`crate::ReplicaTree`]: a fixed-size record in the tree's node vector, its edge
//! a range of the tree's token arena. No heap allocation per node.

/// Index into the tree's node vector. The root is always index [`ROOT`].
pub(crate) type NodeIndex = u32;

pub(crate) const ROOT: NodeIndex = 0;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    /// Edge label from the parent: `arena[start..start + len]`. Empty only for the root.
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) parent: NodeIndex,
    pub(crate) num_children: u32,
    /// Clock of the last insert that walked through this node (never lower than a child's).
    pub(crate) last_access: u64,
    /// False for entries on the free list.
    pub(crate) is_alive: bool,
}

impl Node {
    pub(crate) fn root() -> Self {
        Self { start: 0, len: 0, parent: ROOT, num_children: 0, last_access: 0, is_alive: true }
    }

    pub(crate) fn end(&self) -> usize {
        self.start + self.len
    }
}

/// Key of the child map, which holds every edge of the tree in one table: the parent and the
/// first token of the child's edge (siblings never share a first token).
pub(crate) fn child_key(parent: NodeIndex, first_token: u32) -> u64 {
    (u64::from(parent) << 32) | u64::from(first_token)
}
