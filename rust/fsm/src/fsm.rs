//! `TokenFsm`: a regex compiled against a vocabulary into a token-level automaton.
//!
//! States are the live states of the byte DFA (plus one terminal state entered by EOS). A
//! state's allowed-token set is computed on first use by one trie walk and memoised, so the
//! first mask is ready right after DFA construction and later masks are a row copy. `advance`
//! runs the token's bytes through the DFA (a few table lookups), which is what the per-state
//! "next state of each allowed token" table would store, at no memory cost.

use std::sync::{Arc, OnceLock};

use sglr_vocab::{TokenId, Vocabulary};

use crate::component::{local_component, shared_component_row};
use crate::delegate::{delegated_row, delegation, is_donor};
use crate::dfa::{ByteDfa, CompileLimits, DEAD};
use crate::error::FsmError;
use crate::jump::{forced_continuation, JumpForward};
use crate::row::{Row, RowStore};
use crate::walk::{walk_allowed, Successors};
use crate::StateId;

/// Sizes of a compiled FSM, for reports and cache accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsmStats {
    /// Live DFA states (token-level states are a subset of these, plus the terminal state).
    pub num_states: usize,
    /// States whose allowed-token row has been computed so far.
    pub num_rows_built: usize,
    /// Distinct dense bitmask rows among them.
    pub num_dense_rows: usize,
    /// Heap bytes owned by this FSM: DFA table, rows, per-state slots (not the vocabulary).
    pub memory_bytes: usize,
}

/// A compiled constraint: immutable (rows are filled in lazily, once, behind `OnceLock`), so
/// one `Arc<TokenFsm>` serves any number of requests and threads.
#[derive(Debug)]
pub struct TokenFsm {
    vocab: Arc<Vocabulary>,
    dfa: ByteDfa,
    rows: Box<[OnceLock<Row>]>,
    jumps: Box<[OnceLock<JumpForward>]>,
    store: RowStore,
}

impl TokenFsm {
    /// Compiles `pattern` (anchored at both ends: the whole output must match) for `vocab`.
    pub fn from_regex(
        pattern: &str,
        vocab: Arc<Vocabulary>,
        limits: &CompileLimits,
    ) -> Result<Self, FsmError> {
        let dfa = ByteDfa::build(pattern, limits)?;
        let num_states = dfa.num_states();
        Ok(Self {
            vocab,
            dfa,
            rows: (0..num_states).map(|_| OnceLock::new()).collect(),
            jumps: (0..num_states).map(|_| OnceLock::new()).collect(),
            store: RowStore::default(),
        })
    }

    pub fn vocabulary(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The state before any token.
    pub fn start_state(&self) -> StateId {
        self.dfa.start()
    }

    /// The state entered by EOS: finished; only EOS is allowed from it.
    pub fn terminal_state(&self) -> StateId {
        self.dfa.num_states() as StateId
    }

    /// Number of valid state ids (live DFA states plus the terminal state).
    pub fn num_states(&self) -> usize {
        self.dfa.num_states() + 1
    }

    /// Whether the output so far is a complete match (EOS allowed). True for the terminal state.
    pub fn is_accepting(&self, state: StateId) -> Result<bool, FsmError> {
        self.check_state(state)?;
        Ok(state == self.terminal_state() || self.dfa.is_accepting(state))
    }

    /// Whether `state` is the terminal state (EOS has been consumed).
    pub fn is_terminal(&self, state: StateId) -> bool {
        state == self.terminal_state()
    }

    /// Writes the allowed-token bitmask of `state` into `out`: bit t of word t / 32 is set iff
    /// token t is allowed. `out` must hold at least `ceil(V / 32)` words; words past that
    /// (a model whose logits are padded beyond the tokenizer) are zeroed.
    pub fn fill_bitmask(&self, state: StateId, out: &mut [i32]) -> Result<(), FsmError> {
        self.check_state(state)?;
        let num_words = self.vocab.num_mask_words();
        if out.len() < num_words {
            return Err(FsmError::BitmaskTooSmall { needed: num_words, got: out.len() });
        }
        let (words, padding) = as_u32_mut(out).split_at_mut(num_words);
        padding.fill(0);
        if self.is_terminal(state) {
            words.fill(0);
        } else {
            self.row(state).write(words);
        }
        if state == self.terminal_state() || self.dfa.is_accepting(state) {
            for &eos in self.vocab.eos_token_ids() {
                words[eos as usize >> 5] |= 1 << (eos & 31);
            }
        }
        Ok(())
    }

    /// Allowed token ids of `state` in increasing order (EOS included when accepting).
    pub fn allowed_token_ids(&self, state: StateId) -> Result<Vec<TokenId>, FsmError> {
        let mut words = vec![0i32; self.vocab.num_mask_words()];
        self.fill_bitmask(state, &mut words)?;
        Ok(crate::row::bits_to_ids(as_u32_mut(&mut words)))
    }

    /// Whether `token` is allowed in `state` (the bit `fill_bitmask` would set).
    pub fn is_allowed(&self, state: StateId, token: TokenId) -> Result<bool, FsmError> {
        Ok(self.try_advance(state, token)?.is_some())
    }

    /// The state after `token`, or `TokenNotAllowed` if the mask of `state` forbids it.
    pub fn advance(&self, state: StateId, token: TokenId) -> Result<StateId, FsmError> {
        self.try_advance(state, token)?.ok_or(FsmError::TokenNotAllowed { state, token })
    }

    /// Like [`TokenFsm::advance`], with `None` for a forbidden token (errors only for ids out
    /// of range).
    pub fn try_advance(&self, state: StateId, token: TokenId) -> Result<Option<StateId>, FsmError> {
        self.check_state(state)?;
        if token as usize >= self.vocab.vocab_size() {
            return Err(FsmError::TokenOutOfRange { token, vocab_size: self.vocab.vocab_size() as u32 });
        }
        if self.vocab.is_eos(token) {
            let accepting = self.is_terminal(state) || self.dfa.is_accepting(state);
            return Ok(accepting.then(|| self.terminal_state()));
        }
        if self.is_terminal(state) {
            return Ok(None);
        }
        let Some(bytes) = self.vocab.token_bytes(token) else {
            return Ok(None);
        };
        let next = self.dfa.walk(state, bytes);
        Ok((next != DEAD).then_some(next))
    }

    /// Advances through a whole token sequence, stopping with an error at the first token
    /// the constraint forbids.
    pub fn advance_many(&self, state: StateId, tokens: &[TokenId]) -> Result<StateId, FsmError> {
        tokens.iter().try_fold(state, |state, &token| self.advance(state, token))
    }

    /// The state after raw `bytes` (for callers that append a jump-forward string themselves),
    /// or `None` if they leave the language.
    pub fn advance_bytes(&self, state: StateId, bytes: &[u8]) -> Result<Option<StateId>, FsmError> {
        self.check_state(state)?;
        if self.is_terminal(state) {
            return Ok(bytes.is_empty().then_some(state));
        }
        let next = self.dfa.walk(state, bytes);
        Ok((next != DEAD).then_some(next))
    }

    /// Compressed edge out of `state`: the longest byte string that every continuation starts
    /// with (stopping at accepting states, where EOS is a second option, and cut back to a
    /// UTF-8 character boundary), and the state after it. Empty when the next byte is a choice.
    pub fn jump_forward(&self, state: StateId) -> Result<JumpForward, FsmError> {
        self.check_state(state)?;
        if self.is_terminal(state) {
            return Ok(JumpForward { bytes: Vec::new(), state });
        }
        Ok(self.jumps[state as usize].get_or_init(|| forced_continuation(&self.dfa, state)).clone())
    }

    /// Whether the row of `state` is already memoised (filling it then costs a copy only; the
    /// first fill of a state walks the vocabulary).
    pub fn is_row_ready(&self, state: StateId) -> bool {
        self.is_terminal(state) || self.rows.get(state as usize).is_some_and(|r| r.get().is_some())
    }

    /// Computes the rows of every state reachable by tokens from the start (at most
    /// `max_states` of them); returns how many states were visited.
    pub fn build_all(&self, max_states: usize) -> usize {
        let mut seen = vec![false; self.dfa.num_states()];
        let mut queue = vec![self.start_state()];
        seen[self.start_state() as usize] = true;
        let mut head = 0;
        while head < queue.len() && head < max_states {
            let state = queue[head];
            head += 1;
            let mut successors = Vec::new();
            let mut scratch = vec![false; self.dfa.num_states()];
            if self.rows[state as usize].get().is_none() {
                let row = self.plain_row(state, Some((&mut successors, &mut scratch)));
                let _ = self.rows[state as usize].set(row);
            } else {
                // Already memoised: recover the successors from the token list.
                for token in self.rows[state as usize].get().expect("set").token_ids() {
                    let bytes = self.vocab.token_bytes(token).expect("allowed tokens have bytes");
                    let next = self.dfa.walk(state, bytes);
                    if !scratch[next as usize] {
                        scratch[next as usize] = true;
                        successors.push(next);
                    }
                }
            }
            for next in successors {
                if !seen[next as usize] {
                    seen[next as usize] = true;
                    queue.push(next);
                }
            }
        }
        head
    }

    pub fn stats(&self) -> FsmStats {
        let num_rows_built = self.rows.iter().filter(|r| r.get().is_some()).count();
        let slots = self.rows.len() * std::mem::size_of::<OnceLock<Row>>()
            + self.jumps.len() * std::mem::size_of::<OnceLock<JumpForward>>();
        let jump_bytes: usize = self.jumps.iter().filter_map(|j| j.get()).map(|j| j.bytes.capacity()).sum();
        FsmStats {
            num_states: self.dfa.num_states(),
            num_rows_built,
            num_dense_rows: self.store.num_dense(),
            memory_bytes: self.dfa.memory_bytes() + self.store.memory_bytes() + slots + jump_bytes,
        }
    }

    /// Checks the structure: every DFA transition stays in range, every state can still reach
    /// an accepting state, every memoised row lists only ordinary tokens that `advance`
    /// accepts, and the row agrees with a fresh walk.
    pub fn check_invariants(&self) -> Result<(), FsmError> {
        let num_states = self.dfa.num_states();
        for state in 0..num_states as u32 {
            if self.dfa.successors(state).any(|next| next as usize >= num_states) {
                return Err(FsmError::Invariant(format!("state {state} has a transition out of range")));
            }
            if !self.dfa.is_accepting(state) && self.dfa.successors(state).next().is_none() {
                return Err(FsmError::Invariant(format!(
                    "state {state} is neither accepting nor has a live successor"
                )));
            }
        }
        for (state, row) in self.rows.iter().enumerate() {
            let Some(row) = row.get() else { continue };
            let fresh = self.plain_row(state as u32, None);
            if fresh.token_ids() != row.token_ids() {
                return Err(FsmError::Invariant(format!(
                    "memoised row of state {state} differs from a fresh walk"
                )));
            }
            for token in row.token_ids() {
                if self.vocab.token_bytes(token).is_none() || self.try_advance(state as u32, token)?.is_none()
                {
                    return Err(FsmError::Invariant(format!(
                        "row of state {state} allows token {token} that advance rejects"
                    )));
                }
            }
        }
        Ok(())
    }

    fn row(&self, state: StateId) -> &Row {
        self.rows[state as usize].get_or_init(|| self.compute_row(state))
    }

    /// The row of `state`: borrowed from a loop state, through its shared local component,
    /// or by one whole-trie walk, cheapest first.
    fn compute_row(&self, state: StateId) -> Row {
        if !is_donor(&self.dfa, state) {
            if let Some(delegation) = delegation(&self.dfa, state) {
                let mut donor_words = vec![0u32; self.vocab.num_mask_words()];
                self.row(delegation.donor).write(&mut donor_words);
                let mut mask = vec![0u32; donor_words.len()];
                let num_allowed =
                    delegated_row(&self.dfa, &self.vocab, state, &delegation, &donor_words, &mut mask);
                return self.store.make_row(mask, num_allowed);
            }
        }
        let Some(component) = local_component(&self.dfa, state) else {
            return self.plain_row(state, None);
        };
        let mut mask = vec![0u32; self.vocab.num_mask_words()];
        let num_allowed = shared_component_row(&self.dfa, &self.vocab, &component, &mut mask);
        self.store.make_row(mask, num_allowed)
    }

    /// The row of `state` by one walk over the whole trie (the reference the component path
    /// must agree with).
    fn plain_row(&self, state: StateId, successors: Successors<'_>) -> Row {
        let mut mask = vec![0u32; self.vocab.num_mask_words()];
        let num_allowed = walk_allowed(&self.dfa, self.vocab.trie(), state, &mut mask, successors);
        self.store.make_row(mask, num_allowed)
    }

    fn check_state(&self, state: StateId) -> Result<(), FsmError> {
        if (state as usize) < self.num_states() {
            Ok(())
        } else {
            Err(FsmError::UnknownState { state, num_states: self.num_states() as u32 })
        }
    }
}

/// Views caller int32 words as u32 bit patterns.
fn as_u32_mut(words: &mut [i32]) -> &mut [u32] {
    // SAFETY: i32 and u32 have the same size, alignment and validity (every bit pattern).
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u32>(), words.len()) }
}
