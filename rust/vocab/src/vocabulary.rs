//! The model's vocabulary as token bytes, plus the byte trie the mask walks follow.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::decode::TokenEncoding;
use crate::error::VocabError;
use crate::shared::SharedResults;
use crate::trie::TokenTrie;
use crate::TokenId;

/// Bytes of shared walks a vocabulary keeps (past it, the least recently used are dropped).
const SHARED_WALK_BYTES: usize = 64 << 20;

/// Bytes of other shared results a vocabulary keeps (past it, the least recently used are
/// dropped).
const SHARED_RESULT_BYTES: usize = 64 << 20;

/// Longest token accepted, in bytes (the trie stores depths as `u16`).
pub const MAX_TOKEN_LEN: usize = u16::MAX as usize;

/// Token id -> bytes for every ordinary token; special tokens have no bytes and are never
/// allowed by a constraint, except EOS, which is allowed exactly in accepting states.
///
/// Immutable once built; share it (`Arc`) between every FSM compiled for the same model.
#[derive(Debug)]
pub struct Vocabulary {
    bytes: Vec<u8>,
    /// `bytes[offsets[t]..offsets[t + 1]]` are token t's bytes (empty for specials).
    offsets: Vec<u32>,
    eos_token_ids: Vec<TokenId>,
    trie: TokenTrie,
    fingerprint: u64,
    /// Trie walks of automaton fragments, by the fragment's description (the FSM path's local
    /// components: few, large, met by every string of every schema; [`Vocabulary::shared_walk`]).
    walks: SharedResults,
    /// Other per-vocabulary results, by their exact description (the grammar path's lexeme
    /// masks: many, small; [`Vocabulary::shared_result`]). Kept apart from the walks so neither
    /// kind pushes the other out.
    shared: SharedResults,
}

impl Vocabulary {
    /// Builds a vocabulary from raw token bytes indexed by token id. `None` (or empty bytes)
    /// marks a special or unused id; EOS ids are special whatever bytes they carry.
    pub fn new(tokens: Vec<Option<Vec<u8>>>, eos_token_ids: Vec<TokenId>) -> Result<Self, VocabError> {
        let vocab_size = tokens.len();
        if vocab_size >= u32::MAX as usize {
            return Err(VocabError::InvalidVocabulary(format!(
                "{vocab_size} tokens do not fit 32-bit token ids"
            )));
        }
        if let Some(&bad) = eos_token_ids.iter().find(|&&id| id as usize >= vocab_size) {
            return Err(VocabError::InvalidVocabulary(format!(
                "EOS token id {bad} is outside the vocabulary of {vocab_size} tokens"
            )));
        }
        let mut eos_token_ids = eos_token_ids;
        eos_token_ids.sort_unstable();
        eos_token_ids.dedup();

        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(vocab_size + 1);
        offsets.push(0u32);
        for (token_id, token) in tokens.iter().enumerate() {
            let is_eos = eos_token_ids.binary_search(&(token_id as u32)).is_ok();
            if let (Some(token), false) = (token, is_eos) {
                if token.len() > MAX_TOKEN_LEN {
                    return Err(VocabError::InvalidVocabulary(format!(
                        "token {token_id} is {} bytes long (limit {MAX_TOKEN_LEN})",
                        token.len()
                    )));
                }
                bytes.extend_from_slice(token);
            }
            let end = u32::try_from(bytes.len())
                .map_err(|_| VocabError::InvalidVocabulary("token bytes exceed 4 GiB in total".into()))?;
            offsets.push(end);
        }
        let mut vocab = Self {
            bytes,
            offsets,
            eos_token_ids,
            trie: TokenTrie::default(),
            fingerprint: 0,
            walks: SharedResults::new(SHARED_WALK_BYTES),
            shared: SharedResults::new(SHARED_RESULT_BYTES),
        };
        vocab.trie =
            TokenTrie::build((0..vocab_size as u32).filter_map(|id| vocab.token_bytes(id).map(|b| (id, b))));
        vocab.fingerprint = vocab.compute_fingerprint();
        Ok(vocab)
    }

    /// Builds a vocabulary from token strings in a tokenizer's own encoding.
    pub fn from_strings(
        tokens: Vec<Option<String>>,
        encoding: TokenEncoding,
        eos_token_ids: Vec<TokenId>,
    ) -> Result<Self, VocabError> {
        let decoded = tokens
            .iter()
            .map(|token| token.as_deref().map(|t| encoding.decode(t)).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(decoded, eos_token_ids)
    }

    /// Number of token ids (the width of a mask in bits).
    pub fn vocab_size(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Number of int32 words in one token bitmask: `ceil(vocab_size / 32)`.
    pub fn num_mask_words(&self) -> usize {
        self.vocab_size().div_ceil(32)
    }

    /// Bytes of an ordinary token; `None` for special tokens, EOS and out-of-range ids.
    pub fn token_bytes(&self, token_id: TokenId) -> Option<&[u8]> {
        let id = token_id as usize;
        if id >= self.vocab_size() {
            return None;
        }
        let (start, end) = (self.offsets[id] as usize, self.offsets[id + 1] as usize);
        (end > start).then(|| &self.bytes[start..end])
    }

    /// Sorted, de-duplicated EOS ids.
    pub fn eos_token_ids(&self) -> &[TokenId] {
        &self.eos_token_ids
    }

    pub fn is_eos(&self, token_id: TokenId) -> bool {
        self.eos_token_ids.binary_search(&token_id).is_ok()
    }

    /// The byte trie of the ordinary tokens, for the constraint engines' mask walks.
    #[inline]
    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// Number of ordinary (allowable) tokens.
    pub fn num_ordinary_tokens(&self) -> usize {
        self.trie.token_ids.len()
    }

    /// A hash of every token's bytes and the EOS ids: equal vocabularies have equal
    /// fingerprints, which makes it a compile-cache key.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Heap bytes of the token table, the trie and the shared walks and results.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.offsets.capacity() * 4
            + self.trie.memory_bytes()
            + self.walks.memory_bytes()
            + self.shared.memory_bytes()
    }

    /// A result that depends on this vocabulary and on what `key` describes exactly (the
    /// grammar path's lexeme masks: a lexeme's definition and DFA state), computed by `compute`
    /// on first use and shared by every constraint over this vocabulary, so a lexeme that many
    /// schemas share (a plain string, a number) is walked once. `size` gives a result's heap
    /// bytes, counted against a budget past which the cache starts over. Callers prefix their
    /// keys with their own name; a key holding another type is recomputed.
    pub fn shared_result<T: std::any::Any + Send + Sync, E>(
        &self,
        key: &[u8],
        size: impl FnOnce(&T) -> usize,
        compute: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        self.shared.get_or_compute(key, size, compute)
    }

    /// Number of results kept by [`Vocabulary::shared_result`].
    pub fn num_shared_results(&self) -> usize {
        self.shared.len()
    }

    /// A trie walk of an automaton fragment that depends only on this vocabulary and on what
    /// `key` describes exactly (the FSM path's local components: a string body's walk, met by
    /// every string field of every schema), computed by `compute` on first use and shared by
    /// every constraint over this vocabulary. `size` gives a walk's heap bytes, counted against
    /// a budget past which the least recently used walks are dropped. Callers keep their keys apart
    /// from other callers' (a prefix, or a layout only they write); a key holding another type
    /// is recomputed.
    pub fn shared_walk<T: std::any::Any + Send + Sync>(
        &self,
        key: &[u8],
        size: impl FnOnce(&T) -> usize,
        compute: impl FnOnce() -> T,
    ) -> Arc<T> {
        let computed: Result<Arc<T>, std::convert::Infallible> =
            self.walks.get_or_compute(key, size, || Ok(compute()));
        match computed {
            Ok(walk) => walk,
            Err(never) => match never {},
        }
    }

    /// Number of walks kept by [`Vocabulary::shared_walk`].
    pub fn num_shared_walks(&self) -> usize {
        self.walks.len()
    }

    /// Forgets the shared walks and results (benchmarks use it to measure cold costs).
    pub fn clear_caches(&self) {
        self.walks.clear();
        self.shared.clear();
    }

    fn compute_fingerprint(&self) -> u64 {
        let mut hasher = std::hash::DefaultHasher::new();
        self.offsets.hash(&mut hasher);
        self.bytes.hash(&mut hasher);
        self.eos_token_ids.hash(&mut hasher);
        hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specials_and_eos_have_no_bytes() {
        let vocab = Vocabulary::new(
            vec![Some(b"a".to_vec()), None, Some(b"</s>".to_vec()), Some(vec![])],
            vec![2, 2],
        )
        .unwrap();
        assert_eq!(vocab.vocab_size(), 4);
        assert_eq!(vocab.num_mask_words(), 1);
        assert_eq!(vocab.token_bytes(0), Some(&b"a"[..]));
        assert_eq!(vocab.token_bytes(1), None);
        assert_eq!(vocab.token_bytes(2), None);
        assert_eq!(vocab.token_bytes(3), None);
        assert_eq!(vocab.token_bytes(99), None);
        assert_eq!(vocab.eos_token_ids(), &[2]);
        assert_eq!(vocab.num_ordinary_tokens(), 1);
    }

    #[test]
    fn eos_out_of_range_is_an_error() {
        let err = Vocabulary::new(vec![Some(b"a".to_vec())], vec![5]).unwrap_err();
        assert!(matches!(err, VocabError::InvalidVocabulary(_)));
    }

    #[test]
    fn fingerprint_tracks_content() {
        let a = Vocabulary::new(vec![Some(b"a".to_vec()), None], vec![1]).unwrap();
        let b = Vocabulary::new(vec![Some(b"a".to_vec()), None], vec![1]).unwrap();
        let c = Vocabulary::new(vec![Some(b"b".to_vec()), None], vec![1]).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
    }

    #[test]
    fn from_strings_decodes_each_encoding() {
        let vocab = Vocabulary::from_strings(
            vec![Some("\u{0120}hi".into()), None],
            TokenEncoding::ByteLevel,
            vec![1],
        )
        .unwrap();
        assert_eq!(vocab.token_bytes(0), Some(&b" hi"[..]));
        let vocab = Vocabulary::from_strings(
            vec![Some("\u{2581}hi".into()), Some("<0xFF>".into())],
            TokenEncoding::SentencePiece,
            vec![],
        )
        .unwrap();
        assert_eq!(vocab.token_bytes(1), Some(&[0xFF][..]));
    }
}
