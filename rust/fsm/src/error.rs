/// Everything that can go wrong when compiling or using a constraint. Every public entry point
/// returns these instead of panicking, so the binding can map them onto `sglr.errors` classes
/// and the server can answer bad input with a 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsmError {
    /// The pattern does not parse (syntax error, bad escape, unbalanced group, ...).
    #[error("invalid regex: {0}")]
    InvalidRegex(String),
    /// The pattern parses but uses a feature a DFA cannot express (look-around, backreference,
    /// Unicode word boundary, a pattern that only matches invalid UTF-8, ...).
    #[error("unsupported regex: {0}")]
    UnsupportedRegex(String),
    /// The automaton grew past a configured size limit (for example a huge bounded repetition).
    #[error("automaton too large: {what} exceeds its limit of {limit} bytes; simplify the constraint or raise the limit")]
    AutomatonTooLarge { what: &'static str, limit: usize },
    /// The pattern matches no string at all, so no output could ever satisfy it.
    #[error("the constraint matches no string")]
    EmptyLanguage,
    /// The schema is not valid JSON or not a valid JSON Schema.
    #[error("invalid JSON schema at {path}: {message}")]
    InvalidSchema { path: String, message: String },
    /// The schema uses a keyword (or keyword value) this compiler cannot enforce; it is refused
    /// up front rather than silently ignored, so an output is never wrongly accepted.
    #[error("unsupported JSON schema keyword '{keyword}' at {path}: {reason}")]
    UnsupportedSchema { keyword: String, path: String, reason: String },
    /// The token table is malformed (bad EOS id, oversized token, undecodable token string).
    #[error("invalid vocabulary: {0}")]
    InvalidVocabulary(String),
    /// A state id that this FSM never issued.
    #[error("unknown state id {state} (this FSM has {num_states} states)")]
    UnknownState { state: u32, num_states: u32 },
    /// A token id outside the vocabulary.
    #[error("token id {token} is out of range for a vocabulary of {vocab_size} tokens")]
    TokenOutOfRange { token: u32, vocab_size: u32 },
    /// `advance` with a token the mask of that state does not allow.
    #[error("token {token} is not allowed in state {state}")]
    TokenNotAllowed { state: u32, token: u32 },
    /// The caller's bitmask buffer is too small or misshapen.
    #[error("bitmask buffer too small: need {needed} int32 words, got {got}")]
    BitmaskTooSmall { needed: usize, got: usize },
    /// FSMs built over different vocabulary sizes cannot share one batched bitmask.
    #[error("vocabulary size mismatch in batch: {expected} vs {got} tokens")]
    VocabularyMismatch { expected: usize, got: usize },
    /// An internal invariant does not hold (a bug, never a user mistake).
    #[error("FSM invariant violated: {0}")]
    Invariant(String),
}

impl From<sglr_vocab::VocabError> for FsmError {
    fn from(error: sglr_vocab::VocabError) -> Self {
        match error {
            sglr_vocab::VocabError::InvalidVocabulary(message) => Self::InvalidVocabulary(message),
        }
    }
}
