//! Regex constraints compiled to a token-level compressed DFA.
//!
//! Pipeline: pattern (a JSON schema's comes from `sglr-schema`) -> byte DFA over the pattern's
//! language (`regex-automata`, anchored full match, only live states kept) -> [`TokenFsm`] over
//! a vocabulary (`sglr_vocab::Vocabulary`): per-state allowed-token bitmasks (walked once over
//! the vocabulary's byte trie, memoised) and compressed edges ([`TokenFsm::jump_forward`]) that
//! return the longest forced byte string so the runtime can append it in one step. The byte
//! automata (and [`json`]'s JSON-text pieces) also serve the grammar path's lexemes.
//!
//! Everything is pure Rust with integer ids: `TokenId = u32`, `StateId = u32`.

mod batch;
mod component;
mod counted;
mod counter;
mod delegate;
mod dfa;
mod error;
mod fsm;
pub mod json;
mod jump;
mod literal_prefix;
mod live;
mod residual;
mod row;
mod walk;

pub use batch::{fill_bitmask_rows, fill_bitmasks};
pub use counter::{CountedDfa, CountedWindow};
pub use delegate::Delegation;
pub use dfa::{ByteDfa, CompileLimits, DEAD};
pub use error::FsmError;
pub use fsm::{FsmStats, TokenFsm};
pub use jump::JumpForward;
pub use live::{live_tokens, live_tokens_and_ends, live_tokens_donor, live_tokens_from_donor};
pub use row::{bits_to_ids, count_bits};
/// Index of a token-level automaton state; valid for the FSM that issued it.
pub type StateId = u32;
