//! JSON strings with length bounds as automata built directly (count x one character's
//! states) instead of determinizing an unrolled regex.

use std::sync::OnceLock;

use super::text::STRING_CHAR;
use crate::counter::CountedDfa;
use crate::dfa::{ByteDfa, CompileLimits};
use crate::error::FsmError;

/// The DFA of [`json_string_regex`]'s language, built directly (count x one character's
/// states, [`ByteDfa::counted`]) in time linear in the bound instead of determinizing the
/// unrolled regex; `AutomatonTooLarge` past `limits.dfa_size_limit` bytes of table.
pub fn json_string_of_length(
    min_len: usize,
    max_len: Option<usize>,
    limits: &CompileLimits,
) -> Result<ByteDfa, FsmError> {
    ByteDfa::counted(json_string_char()?, min_len, max_len, b"\"", b"\"", max_counted_states(limits))
}

/// [`json_string_of_length`]'s language with the count kept beside the character's state
/// ([`CountedDfa`]): the same states, in memory that does not grow with the bound.
pub fn json_string_counter(
    min_len: usize,
    max_len: Option<usize>,
    limits: &CompileLimits,
) -> Result<CountedDfa, FsmError> {
    CountedDfa::new(json_string_char()?, min_len, max_len, b"\"", b"\"", max_counted_states(limits))
}

/// [`json_string_counter`] after an optional space (` ?"…"`): a value whose lexeme also takes
/// the space after its key's colon.
pub fn json_string_counter_after_space(
    min_len: usize,
    max_len: Option<usize>,
    limits: &CompileLimits,
) -> Result<CountedDfa, FsmError> {
    CountedDfa::new(json_string_char()?, min_len, max_len, b" \"", b"\"", max_counted_states(limits))?
        .with_optional_lead()
}

/// One JSON string character's DFA (escapes and UTF-8 included), built once.
pub(crate) fn json_string_char() -> Result<&'static ByteDfa, FsmError> {
    static CHARACTER: OnceLock<Result<ByteDfa, FsmError>> = OnceLock::new();
    let character = CHARACTER.get_or_init(|| ByteDfa::build(STRING_CHAR, &CompileLimits::default()));
    character.as_ref().map_err(Clone::clone)
}

/// Most states of a counted table within `limits.dfa_size_limit` bytes.
fn max_counted_states(limits: &CompileLimits) -> usize {
    // A row is at most 256 4-byte entries; the character's classes plus the quote are far fewer.
    let row_bytes = 4 * 48;
    limits.dfa_size_limit / row_bytes
}
