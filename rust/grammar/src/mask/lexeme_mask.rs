//! [`LexemeMask`]: the tokens whose bytes stay inside one lexeme from one DFA state (as words,
//! a list, or a few changes to another mask), with the trie nodes where the lexeme may end and
//! the grammar take over; and the matcher's memo of them ([`LexemeMaskCache`]).

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use sglr_fsm::{bits_to_ids, count_bits};

use crate::grammar::LexemeId;
use crate::suffix_trie::SuffixTrie;

/// Tokens whose bytes stay inside one lexeme from one DFA state, and the trie nodes where the
/// lexeme may end with more bytes below (where the grammar takes over).
#[derive(Debug)]
pub(crate) struct LexemeMask {
    pub(super) tokens: Tokens,
    pub(super) boundaries: Vec<u32>,
    /// Groups of boundaries where the lexeme ends in one state, each walked as one
    /// ([`SuffixTrie`], shared through the vocabulary), with where each member's path could
    /// end the lexeme earlier; found by the first boundary walk that needs them.
    // NOTE: the vocabulary's cache counts a mask's bytes when it keeps it, before this is
    // built; `memory_bytes` (a matcher's) counts it once built.
    pub(super) suffix: OnceLock<Vec<SuffixGroup>>,
}

/// A [`LexemeMask`]'s tokens.
#[derive(Debug)]
pub(super) enum Tokens {
    /// One bit per token.
    Words(Vec<u32>),
    /// Ascending ids, when they are few (a key, a keyword, digits): a mask ORs every live
    /// lexeme's tokens in, and at the start of an object with many declared keys
    /// whole-vocabulary ORs of nearly empty masks would cost more than the rest of the step.
    Ids(Vec<u32>),
    /// Another mask's tokens but `removed`, and `added` (ascending ids): a state beside its
    /// twin (a free key's text beside a declared name's spelling) differs on a few tokens,
    /// and a mask-sized copy per state would cost page faults and memory.
    Delta { base: Arc<LexemeMask>, removed: Vec<u32>, added: Vec<u32> },
}

thread_local! {
    /// A zeroed mask-sized buffer that walks write into before their tokens are kept (as a
    /// list when few): most lexeme states allow a handful of tokens, and a fresh mask-sized
    /// buffer for each cost more in page faults than the walk itself.
    static SCRATCH_WORDS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `fill` on a zeroed buffer of `num_words` words and keeps what it set as a
/// [`LexemeMask`] with `boundaries` (which `fill` returns), as a [`Tokens::Delta`] over `base`
/// where given and the difference is small; the buffer is left zeroed.
pub(super) fn mask_from_scratch(
    num_words: usize,
    base: Option<&Arc<LexemeMask>>,
    fill: impl FnOnce(&mut [u32]) -> Vec<u32>,
) -> LexemeMask {
    SCRATCH_WORDS.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        if scratch.len() != num_words {
            *scratch = vec![0u32; num_words];
        }
        let boundaries = fill(&mut scratch);
        let tokens = match base.and_then(|base| delta(base, &scratch)) {
            Some(tokens) => tokens,
            None => Tokens::from_words(Cow::Borrowed(&scratch)),
        };
        scratch.fill(0);
        LexemeMask { tokens, boundaries, suffix: OnceLock::new() }
    })
}

/// `words` as a [`Tokens::Delta`] over `base`, if they differ on few tokens.
fn delta(base: &Arc<LexemeMask>, words: &[u32]) -> Option<Tokens> {
    let Tokens::Words(base_words) = &base.tokens else { return None };
    let limit = words.len() / SPARSE_WORDS_PER_TOKEN;
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    for (index, (&own, &other)) in words.iter().zip(base_words).enumerate() {
        if own == other {
            continue;
        }
        for (list, mut bits) in [(&mut removed, other & !own), (&mut added, own & !other)] {
            while bits != 0 {
                list.push(index as u32 * 32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
        if removed.len() + added.len() > limit {
            return None;
        }
    }
    Some(Tokens::Delta { base: base.clone(), removed, added })
}

impl Tokens {
    /// `words` as a list when sparse, else as words (copied only if borrowed).
    fn from_words(words: Cow<'_, [u32]>) -> Self {
        if count_bits(&words) <= words.len() / SPARSE_WORDS_PER_TOKEN {
            Tokens::Ids(bits_to_ids(&words))
        } else {
            Tokens::Words(words.into_owned())
        }
    }
}

impl LexemeMask {
    pub(super) fn new(words: Vec<u32>, boundaries: Vec<u32>) -> Self {
        Self { tokens: Tokens::from_words(Cow::Owned(words)), boundaries, suffix: OnceLock::new() }
    }

    /// Bytes this mask holds (a delta's base is counted where it is kept).
    pub fn memory_bytes(&self) -> usize {
        let tokens = match &self.tokens {
            Tokens::Words(words) => words.capacity(),
            Tokens::Ids(ids) => ids.capacity(),
            Tokens::Delta { removed, added, .. } => removed.capacity() + added.capacity(),
        };
        (tokens + self.boundaries.capacity()) * 4
            + self.suffix.get().map_or(0, |groups| groups.iter().map(|g| g.ends_before.len() * 24).sum())
    }

    /// Whether some group of this mask's boundaries has a suffix trie.
    pub(super) fn has_suffix_trie(&self) -> bool {
        self.suffix.get().is_some_and(|groups| groups.iter().any(|g| g.trie.is_some()))
    }

    /// ORs these tokens into `allowed`.
    pub(super) fn add_to(&self, allowed: &mut [u32]) {
        match &self.tokens {
            Tokens::Ids(ids) => set_ids(allowed, ids),
            Tokens::Words(words) => {
                for (word, bits) in allowed.iter_mut().zip(words) {
                    *word |= bits;
                }
            }
            Tokens::Delta { base, removed, added } => {
                // NOTE: `allowed` may already hold a removed token from another lexeme, so the
                // base goes in with its removed tokens cleared word by word, not set and unset.
                match &base.tokens {
                    Tokens::Words(words) => {
                        let mut next = 0;
                        for (index, (word, &bits)) in allowed.iter_mut().zip(words).enumerate() {
                            let mut bits = bits;
                            while removed.get(next).is_some_and(|&t| t as usize >> 5 == index) {
                                bits &= !(1 << (removed[next] & 31));
                                next += 1;
                            }
                            *word |= bits;
                        }
                    }
                    // NOTE: built over a `Words` base only (see `delta`).
                    _ => unreachable!("a delta over a delta or a list"),
                }
                set_ids(allowed, added);
            }
        }
    }

    /// These tokens as one bit per token (`num_words` words).
    pub(super) fn dense_words(&self, num_words: usize) -> Cow<'_, [u32]> {
        match &self.tokens {
            Tokens::Words(words) => Cow::Borrowed(words),
            _ => {
                let mut words = vec![0u32; num_words];
                self.add_to(&mut words);
                Cow::Owned(words)
            }
        }
    }
}

/// Sets the bits of `ids` in `allowed`.
pub(super) fn set_ids(allowed: &mut [u32], ids: &[u32]) {
    for &token in ids {
        allowed[token as usize >> 5] |= 1 << (token & 31);
    }
}

/// A group of a lexeme state's boundaries ending in one state: its suffix trie (none when too
/// large) and, per member, where its path could end the lexeme earlier.
#[derive(Debug)]
pub(super) struct SuffixGroup {
    pub(super) trie: Arc<Option<SuffixTrie>>,
    pub(super) ends_before: Vec<Vec<u16>>,
}

/// A mask's tokens are also kept as a list when a token costs less to set than this many words
/// to OR.
pub(super) const SPARSE_WORDS_PER_TOKEN: usize = 8;

/// Memo key: vocabulary fingerprint, lexeme, DFA state (a counted string's: the state of its
/// window for that vocabulary, `LexemeDfa::mask_view`).
pub(crate) type LexemeMaskKey = (u64, LexemeId, u32);

/// Most memoised lexeme masks per matcher (each is one bit per token: 12.5 KiB at 100k
/// tokens, so at most 6.25 MiB there); past it, masks are computed and not kept.
const MAX_LEXEME_MASKS: usize = 512;

/// The matcher's memo of [`LexemeMask`]s, shared by every request using the grammar.
#[derive(Debug, Default)]
pub(crate) struct LexemeMaskCache {
    masks: std::sync::Mutex<rustc_hash::FxHashMap<LexemeMaskKey, Arc<LexemeMask>>>,
}

impl LexemeMaskCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, rustc_hash::FxHashMap<LexemeMaskKey, Arc<LexemeMask>>> {
        // NOTE: a panic while holding the lock cannot leave the map half-updated.
        self.masks.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn get(&self, key: &LexemeMaskKey) -> Option<Arc<LexemeMask>> {
        self.lock().get(key).cloned()
    }

    pub(super) fn insert(&self, key: LexemeMaskKey, mask: Arc<LexemeMask>) {
        let mut masks = self.lock();
        if masks.len() < MAX_LEXEME_MASKS {
            masks.insert(key, mask);
        }
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Masks with a group of boundaries walked as one [`SuffixTrie`].
    pub fn num_suffix_tries(&self) -> usize {
        self.lock().values().filter(|mask| mask.has_suffix_trie()).count()
    }

    pub fn memory_bytes(&self) -> usize {
        self.lock().values().map(|m| m.memory_bytes()).sum()
    }
}
