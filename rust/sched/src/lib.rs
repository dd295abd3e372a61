//! Cache-aware admission of waiting requests: which requests run next, how much of each, and
//! what the KV cache must give up for them (SGLang's Algorithm 1, with chunked prefill, in-batch
//! prefix sharing and a starvation guard).
//!
//! The order of admission decides the cache hit rate. Longest-prefix-match (`lpm`) visits the
//! requests' prefix tree depth-first and, offline with a cache at least as large as the longest
//! request, computes every shared prefix exactly once (the paper's Theorem 3.1). It can starve a
//! request whose prefix is cold while hot ones keep arriving, so by default a request waiting
//! longer than a bound (in steps or seconds) is offered first.
//!
//! The scheduler talks to the cache through [`PrefixIndex`] (implemented by
//! `sglr_radix::RadixTree`), returns each step's outcome as a [`Decision`] and owns nothing but
//! the waiting requests: locks and slots pass to the caller, which evicts what the decision says.

mod admit;
mod config;
mod decision;
mod error;
mod index;
mod order;
mod queue;
mod ratio;
mod rng;
mod scheduler;
mod trie;

pub use config::{Policy, SchedConfig, StarvationGuard};
pub use decision::{Admission, Decision, StopReason};
pub use error::SchedError;
pub use index::PrefixIndex;
pub use order::Waiting;
pub use ratio::{NewTokenRatio, RatioConfig};
pub use scheduler::{NewRequest, Scheduler, StepInput};

/// A request id chosen by the caller (unique among the requests the scheduler holds).
pub type ReqId = u64;
