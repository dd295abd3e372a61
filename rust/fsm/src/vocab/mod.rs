//! The model's vocabulary as token bytes, plus the byte trie the index walks.

mod bounded;
mod decode;
mod shared;
pub mod trie;

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

pub use decode::{decode_byte_level, decode_sentencepiece, encode_byte_level, TokenEncoding};

use crate::component::ComponentWalk;
use crate::error::FsmError;
use crate::TokenId;
use shared::SharedResults;
use trie::TokenTrie;

/// Bytes of shared component walks a vocabulary keeps (past it, the least recently used are
/// dropped).
const COMPONENT_CACHE_BYTES: usize = 64 << 20;

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
    pub(crate) trie: TokenTrie,
    fingerprint: u64,
    /// Trie walks through local components, keyed by signature and shared by every FSM over
    /// this vocabulary (see `component.rs`), with their total size in bytes.
    components: Mutex<ComponentCache>,
    /// Other constraint kinds' per-vocabulary results, by their exact description (`shared.rs`).
    shared: SharedResults,
}

/// Component walks by signature.
type ComponentCache = bounded::BoundedCache<Vec<u16>, Arc<ComponentWalk>>;

impl Vocabulary {
    /// Builds a vocabulary from raw token bytes indexed by token id. `None` (or empty bytes)
    /// marks a special or unused id; EOS ids are special whatever bytes they carry.
    pub fn new(tokens: Vec<Option<Vec<u8>>>, eos_token_ids: Vec<TokenId>) -> Result<Self, FsmError> {
        let vocab_size = tokens.len();
        if vocab_size >= u32::MAX as usize {
            return Err(FsmError::InvalidVocabulary(format!(
                "{vocab_size} tokens do not fit 32-bit token ids"
            )));
        }
        if let Some(&bad) = eos_token_ids.iter().find(|&&id| id as usize >= vocab_size) {
            return Err(FsmError::InvalidVocabulary(format!(
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
                    return Err(FsmError::InvalidVocabulary(format!(
                        "token {token_id} is {} bytes long (limit {MAX_TOKEN_LEN})",
                        token.len()
                    )));
                }
                bytes.extend_from_slice(token);
            }
            let end = u32::try_from(bytes.len())
                .map_err(|_| FsmError::InvalidVocabulary("token bytes exceed 4 GiB in total".into()))?;
            offsets.push(end);
        }
        let mut vocab = Self {
            bytes,
            offsets,
            eos_token_ids,
            trie: TokenTrie::default(),
            fingerprint: 0,
            components: Mutex::new(ComponentCache::new(COMPONENT_CACHE_BYTES)),
            shared: SharedResults::default(),
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
    ) -> Result<Self, FsmError> {
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

    /// The byte trie of the ordinary tokens, for walks by other constraint engines.
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

    /// Heap bytes of the token table, the trie and the shared component walks.
    pub fn memory_bytes(&self) -> usize {
        let components = self.lock_components().num_bytes();
        self.bytes.capacity()
            + self.offsets.capacity() * 4
            + self.trie.memory_bytes()
            + components
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

    /// The shared walk for a component signature, computed by `walk` on first use.
    pub(crate) fn component_walk(
        &self,
        signature: &[u16],
        walk: impl FnOnce() -> ComponentWalk,
    ) -> Arc<ComponentWalk> {
        if let Some(found) = self.lock_components().get(signature) {
            return found;
        }
        // NOTE: computed outside the lock; two threads may both compute a walk, the last stays.
        let computed = Arc::new(walk());
        let num_bytes = computed.memory_bytes();
        self.lock_components().insert(signature.to_vec(), computed, num_bytes)
    }

    /// Number of distinct component walks cached.
    pub fn num_cached_components(&self) -> usize {
        self.lock_components().len()
    }

    /// Forgets the shared component walks (benchmarks use it to measure cold costs).
    pub fn clear_caches(&self) {
        self.lock_components().clear();
        self.shared.clear();
    }

    fn lock_components(&self) -> std::sync::MutexGuard<'_, ComponentCache> {
        self.components.lock().unwrap_or_else(|p| p.into_inner())
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
        assert!(matches!(err, FsmError::InvalidVocabulary(_)));
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
