//! Whole-batch variants of lock/unlock, for callers that cross an FFI once per scheduler step.

use crate::error::RadixError;
use crate::ids::NodeId;
use crate::tree::RadixTree;

impl RadixTree {
    /// Locks every node in `nodes` (a node listed twice is locked twice). All or nothing: on
    /// the first bad handle, the locks already taken by this call are released again.
    pub fn lock_all(&mut self, nodes: &[NodeId]) -> Result<(), RadixError> {
        for (done, &node) in nodes.iter().enumerate() {
            if let Err(error) = self.lock(node) {
                for &taken in &nodes[..done] {
                    self.unlock(taken).expect("a lock taken by this call can be released");
                }
                return Err(error);
            }
        }
        Ok(())
    }

    /// Unlocks every node in `nodes`. All or nothing, like [`RadixTree::lock_all`].
    pub fn unlock_all(&mut self, nodes: &[NodeId]) -> Result<(), RadixError> {
        for (done, &node) in nodes.iter().enumerate() {
            if let Err(error) = self.unlock(node) {
                for &released in &nodes[..done] {
                    self.lock(released).expect("a lock released by this call can be retaken");
                }
                return Err(error);
            }
        }
        Ok(())
    }
}
