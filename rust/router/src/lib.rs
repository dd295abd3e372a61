//! Approximate prefix trees for the data-parallel router.
//!
//! The router never sees the replicas' real KV caches; it remembers what it *sent* where.
//! Each replica gets a radix tree of the keys (token ids, or text bytes widened to u32) routed
//! to it, holding tokens only ([`ReplicaTree`]: edges in one token arena, nodes in a vector).
//! A tree holds at most `max_keys_per_tree` keys; past that, least-recently-used leaves are
//! evicted whole, as the replica's cache evicts. `scan_id_prompt` reads a request body's id prompt
//! straight from its bytes, for the router's routing key.

mod error;
mod forest;
mod id_prompt;
mod invariants;
mod node;
mod tree;

pub use error::RouterTreeError;
pub use forest::{PrefixForest, ReplicaId, ReplicaMatch};
pub use id_prompt::{scan_id_prompt, IdPrompt};
pub use tree::ReplicaTree;
