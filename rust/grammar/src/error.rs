use sglr_fsm::FsmError;

/// Everything that can go wrong building or running a grammar constraint; never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    /// Grammar text does not parse; `line` and `column` are 1-based.
    #[error("grammar syntax error at line {line}, column {column}: {message}")]
    Syntax { line: usize, column: usize, message: String },
    /// A rule refers to a nonterminal that has no definition.
    #[error("undefined rule '{0}'")]
    UndefinedRule(String),
    /// The start symbol derives no string at all.
    #[error("the grammar matches no string")]
    EmptyLanguage,
    /// A lexeme's regex does not compile (bad syntax, too large, ...).
    #[error("lexeme /{pattern}/: {source}")]
    Lexeme { pattern: String, source: FsmError },
    /// The parser grew past a bound (too ambiguous a grammar or too long an input).
    #[error("parser too large: {what} reached its limit of {limit}")]
    ParserTooLarge { what: &'static str, limit: usize },
    /// The grammar has more rules, symbols or lexemes than ids can hold.
    #[error("grammar too large: {0}")]
    GrammarTooLarge(String),
    /// A token id outside the vocabulary.
    #[error("token id {token} is out of range for a vocabulary of {vocab_size} tokens")]
    TokenOutOfRange { token: u32, vocab_size: u32 },
    /// The caller's bitmask buffer is too small.
    #[error("bitmask buffer too small: need {needed} int32 words, got {got}")]
    BitmaskTooSmall { needed: usize, got: usize },
    /// A JSON schema the grammar path refuses or cannot read (names the keyword and path).
    #[error(transparent)]
    Schema(#[from] FsmError),
    /// A structural tag the grammar cannot be built from; `field` names the part
    /// (`structures[0].begin`, `triggers[1]`).
    #[error("{field}: {message}")]
    StructuralTag { field: String, message: String },
    /// An internal invariant does not hold (a bug, never a user mistake).
    #[error("grammar invariant violated: {0}")]
    Invariant(String),
}
