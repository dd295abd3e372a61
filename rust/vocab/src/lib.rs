//! A model's vocabulary for constrained decoding, with no knowledge of any parser.
//!
//! [`Vocabulary`]: token id -> bytes (tokenizer strings decoded by [`TokenEncoding`]), the EOS
//! ids, a fingerprint, and a byte [`TokenTrie`] of the ordinary tokens that every mask walk
//! follows. It also keeps, bounded and shared by every constraint compiled over it, results that
//! constraint engines compute from it ([`Vocabulary::shared_walk`], [`Vocabulary::shared_result`]):
//! the keys and values are the callers' own, this crate only bounds and shares them.
//!
//! Pure Rust, integer ids: `TokenId = u32`.

mod bounded;
mod decode;
mod error;
mod shared;
mod trie;
mod vocabulary;

pub use decode::{decode_byte_level, decode_sentencepiece, encode_byte_level, TokenEncoding};
pub use error::VocabError;
pub use trie::{TokenTrie, TrieNode};
pub use vocabulary::{Vocabulary, MAX_TOKEN_LEN};

/// Index of a token in the model's vocabulary.
pub type TokenId = u32;
