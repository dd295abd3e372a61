use crate::ReqId;

/// Misuse of the scheduler, or a failure of the prefix index it drives. Every public operation
/// returns these instead of panicking, so the Python binding can raise `sglr.errors` classes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedError {
    #[error("request {0} is already held by the scheduler")]
    DuplicateRequest(ReqId),
    #[error("request {0} has no prompt tokens")]
    EmptyPrompt(ReqId),
    #[error("request {rid} has {num_tokens} tokens, more than max_request_tokens ({max_tokens})")]
    RequestTooLarge { rid: ReqId, num_tokens: usize, max_tokens: usize },
    #[error("invalid scheduler config: {0}")]
    Config(String),
    #[error("the prefix index refused an operation the scheduler relies on: {0}")]
    Index(String),
    #[error("scheduler invariant violated: {0}")]
    Invariant(String),
}
