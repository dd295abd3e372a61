//! Approximate prefix trees for the data-parallel router.
//!
//! The router never sees the replicas' real KV caches; it remembers what it *sent* where.
//! Each replica gets a radix tree of the keys (token ids, or text bytes widened to u32) routed
//! to it, holding tokens only ([`ReplicaTree`]: edges in one token arena, two bytes per token while
//! every id fits in 16 bits, nodes in a vector). [`PrefixForest::route`] is the cache-aware
//! policy's whole decision in one call: match every tree, choose, insert into the chosen tree
//! from where its match ended.
//! A tree holds at most `max_keys_per_tree` keys; past that, least-recently-used leaves are
//! evicted whole, as the replica's cache evicts. `scan_id_prompt` reads a request body's id prompt
//! straight from its bytes, for the router's routing key.

mod arena;
mod error;
mod forest;
mod id_prompt;
mod invariants;
mod node;
mod route;
mod tree;

pub use error::RouterTreeError;
pub use forest::{PrefixForest, ReplicaId, ReplicaMatch};
pub use id_prompt::{scan_id_prompt, IdPrompt};
pub use route::{CacheAwareRule, ReplicaLoad};
pub use tree::ReplicaTree;
