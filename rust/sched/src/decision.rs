//! What one selection decided, as plain data the engine applies in one go.

use std::ops::Range;

use sglr_radix::SlotId;

use crate::ReqId;

/// Why admission stopped offering requests in a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// Every waiting request was offered.
    QueueExhausted,
    /// The step's prefill token budget is spent.
    PrefillBudget,
    /// The next request (or chunk) does not fit in free + evictable slots minus reservations.
    Memory,
    /// `max_running_requests` is reached.
    RunningCap,
}

impl StopReason {
    pub fn name(self) -> &'static str {
        match self {
            StopReason::QueueExhausted => "queue_exhausted",
            StopReason::PrefillBudget => "prefill_budget",
            StopReason::Memory => "memory",
            StopReason::RunningCap => "running_cap",
        }
    }
}

/// One request to prefill in this step: `tokens[prefix_len .. prefix_len + extend_len]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission<N> {
    pub rid: ReqId,
    /// Tokens whose KV already exists: the matched cache prefix for a new admission, the
    /// chunks already prefilled for a continuation.
    pub prefix_len: usize,
    /// Tokens to prefill in this step (the chunk size).
    pub extend_len: usize,
    /// Whether the whole prompt has KV after this step; if not, the request stays with the
    /// scheduler and is continued first next step.
    pub is_prompt_done: bool,
    /// A continuation of a chunked prefill: no new lock was taken and no slots are returned
    /// (the engine already holds them).
    pub is_continuation: bool,
    /// The cache node this decision locked (new admissions only). The engine owns the lock
    /// from now on and unlocks it when it releases the prefix.
    pub node: Option<N>,
    /// Range of `Decision::prefix_slots` holding the slots of `tokens[..prefix_len]` (empty
    /// for a continuation).
    pub slots: Range<usize>,
    /// Selections the request had been passed over.
    pub waited_steps: u64,
    /// Offered ahead of the policy order (requeued at the head, or by the starvation guard).
    pub is_urgent: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision<N> {
    /// Index of this selection (0 for the first).
    pub step: u64,
    /// In the order they were admitted; a continuation, if any, comes first.
    pub admissions: Vec<Admission<N>>,
    /// Matched prefix slots of all new admissions, concatenated.
    pub prefix_slots: Vec<SlotId>,
    /// Cached (unpinned) tokens the engine's KV owner must evict before it can allocate
    /// `num_prefill_tokens` slots; 0 when the free slots suffice.
    pub num_tokens_to_evict: usize,
    /// Sum of `extend_len`: slots the engine allocates for this step's prefill.
    pub num_prefill_tokens: usize,
    pub stop: StopReason,
}

impl<N> Decision<N> {
    pub(crate) fn empty(step: u64) -> Self {
        Self {
            step,
            admissions: Vec::new(),
            prefix_slots: Vec::new(),
            num_tokens_to_evict: 0,
            num_prefill_tokens: 0,
            stop: StopReason::QueueExhausted,
        }
    }

    /// The matched prefix slots of admission `i`.
    pub fn slots_of(&self, i: usize) -> &[SlotId] {
        &self.prefix_slots[self.admissions[i].slots.clone()]
    }

    pub fn is_empty(&self) -> bool {
        self.admissions.is_empty()
    }
}
