//! The radix tree behind RadixAttention: it maps token-id sequences to the KV-cache slots that
//! hold their keys and values, so a new request can reuse the KV of its longest cached prefix.
//!
//! The tree only *indexes* slots. It never allocates or frees KV memory: `insert` tells the
//! caller how many of its slots duplicate cached ones (the caller frees those), and `evict`
//! returns slot ids for the caller's pool to take back. Page size is 1 (one slot per token).
//!
//! Handles (`NodeId`) carry a generation, so a handle to an evicted node is reported as stale
//! instead of silently aliasing a reused arena entry.

mod batch;
mod compare;
mod error;
mod ids;
mod node;
mod snapshot;
mod summary;
mod tree;

pub use compare::common_prefix_len;
pub use error::RadixError;
pub use ids::{Namespace, NodeId, SlotId, TokenId};
pub use snapshot::NodeView;
pub use summary::{PrefixSummary, SummaryLimits, SummaryNode};
pub use tree::{InsertOutcome, MatchOutcome, RadixTree};
