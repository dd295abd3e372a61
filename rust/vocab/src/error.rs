/// What can be wrong with a token table; the constraint crates turn it into their own error
/// (`sglr_fsm::FsmError::InvalidVocabulary`, with the same message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VocabError {
    /// The token table is malformed (bad EOS id, oversized token, undecodable token string).
    #[error("invalid vocabulary: {0}")]
    InvalidVocabulary(String),
}
