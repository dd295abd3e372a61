//! A lexeme's automaton: a table (`ByteDfa`), or a counted string whose count is kept beside
//! the character's state (`CountedDfa`: constant size whatever `maxLength`). The parser steps
//! either the same way; masks are computed on a table that stands for the state
//! ([`LexemeDfa::mask_view`]), so counts no token can tell apart share one memoised mask.

use std::sync::{Arc, OnceLock};

use sglr_fsm::json::TwinnedKeyDfa;
use sglr_fsm::{ByteDfa, CountedDfa, CountedWindow, FsmError, DEAD};

// NOTE: the table is stepped on every byte of every mask walk: the variant told by a tag at
// the front (`repr(u8)`), not a niche in some field of the table, which would cost that field's
// cache line on every step.
#[derive(Debug)]
#[repr(u8)]
pub(crate) enum LexemeDfa {
    Table {
        /// Shared with the process's cache of regex tables where it came from there (a copy of
        /// a value's table cost more than the first mask that needs it).
        dfa: Arc<ByteDfa>,
        /// [`ByteDfa::accept_distances`], computed on the first mask that needs it; for a free
        /// key's table, lower bounds exact where 0 (`TwinnedKeyDfa::accept_distance_bounds`),
        /// which is all a mask needs (a subtree is skipped when too shallow for the bound).
        distances: OnceLock<Vec<u16>>,
        /// A free key's twins (`TwinnedKeyDfa`: per state, one whose token mask is the same
        /// but on a few paths) and its first state past the declared names.
        twins: Option<(Box<[u32]>, u32)>,
    },
    Counted(Box<CountedDfa>),
}

/// The table a state's token mask is computed on, and the state there that stands for it.
pub(crate) struct MaskView<'a> {
    table: MaskTable<'a>,
    pub state: u32,
}

enum MaskTable<'a> {
    Own(&'a ByteDfa, &'a OnceLock<Vec<u16>>, Option<(&'a [u32], u32)>),
    Window(Arc<CountedWindow>),
}

impl MaskView<'_> {
    pub fn dfa(&self) -> &ByteDfa {
        match &self.table {
            MaskTable::Own(dfa, ..) => dfa,
            MaskTable::Window(window) => window.dfa(),
        }
    }

    /// For a counted string's state between two characters: how many characters must still
    /// come and how many may ([`CountedWindow::words_to_come`]); `None` for any other state.
    pub fn words_to_come(&self) -> Option<(usize, Option<usize>)> {
        match &self.table {
            MaskTable::Own(..) => None,
            MaskTable::Window(window) => window.words_to_come(self.state),
        }
    }

    /// The twin of `state` of [`MaskView::dfa`] (see [`LexemeDfa::Table`]), if it has one.
    pub fn twin(&self, state: u32) -> Option<u32> {
        match &self.table {
            MaskTable::Own(_, _, Some((twins, _))) => {
                twins.get(state as usize).copied().filter(|&t| t != DEAD)
            }
            _ => None,
        }
    }

    /// Who else holds `state`'s token mask.
    pub fn sharing(&self, state: u32) -> Sharing {
        match &self.table {
            MaskTable::Own(_, _, Some((_, first_free))) if state >= *first_free => {
                Sharing::FreeKey(state - first_free)
            }
            MaskTable::Own(_, _, Some(_)) => Sharing::SameLexeme,
            MaskTable::Own(_, _, None) => Sharing::SameResidual,
            MaskTable::Window(window) => Sharing::SameWindow(window.serial()),
        }
    }

    /// The fewest bytes from each state of [`MaskView::dfa`] to the lexeme's end (for a free key's
    /// table, lower bounds exact where 0: see [`LexemeDfa::Table`]).
    pub fn accept_distances(&self) -> &[u16] {
        match &self.table {
            MaskTable::Own(dfa, distances, _) => distances.get_or_init(|| dfa.accept_distances()),
            MaskTable::Window(window) => window.accept_distances(),
        }
    }
}

/// Which masks a lexeme state's token mask is shared with ([`MaskView::sharing`]).
pub(crate) enum Sharing {
    /// Every state with the same residual automaton (when it is small).
    SameResidual,
    /// Every free key's state past the declared names at any-key's state k.
    FreeKey(u32),
    /// The same state of the same lexeme (inside a free key's declared names: a residual that
    /// holds the rest of the names).
    SameLexeme,
    /// The same state of the same counted-string window, by its process-unique number
    /// (`CountedWindow::serial`): bounds no token can tell apart (`maxLength` 255 and 500) share
    /// one window, so their masks.
    SameWindow(u64),
}

/// [`LexemeDfa::successors`]' iterator.
pub(crate) enum Successors<T, C> {
    Table(T),
    Counted(C),
}

impl<T: Iterator<Item = u32>, C: Iterator<Item = u32>> Iterator for Successors<T, C> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        match self {
            Successors::Table(states) => states.next(),
            Successors::Counted(states) => states.next(),
        }
    }
}

impl LexemeDfa {
    pub fn table(dfa: Arc<ByteDfa>) -> Self {
        LexemeDfa::Table { dfa, distances: OnceLock::new(), twins: None }
    }

    /// A free key's table with its twins.
    pub fn twinned(keys: TwinnedKeyDfa) -> Self {
        let twins = Some((keys.twins.into_boxed_slice(), keys.first_free));
        LexemeDfa::Table {
            dfa: Arc::new(keys.dfa),
            distances: OnceLock::from(keys.accept_distance_bounds),
            twins,
        }
    }

    #[inline(always)]
    pub fn start(&self) -> u32 {
        match self {
            LexemeDfa::Table { dfa, .. } => dfa.start(),
            LexemeDfa::Counted(dfa) => dfa.start(),
        }
    }

    #[inline(always)]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        match self {
            LexemeDfa::Table { dfa, .. } => dfa.next(state, byte),
            LexemeDfa::Counted(dfa) => dfa.next(state, byte),
        }
    }

    #[inline(always)]
    pub fn is_accepting(&self, state: u32) -> bool {
        match self {
            LexemeDfa::Table { dfa, .. } => dfa.is_accepting(state),
            LexemeDfa::Counted(dfa) => dfa.is_accepting(state),
        }
    }

    /// Live successor states of `state` (with repeats).
    #[inline(always)]
    pub fn successors(&self, state: u32) -> impl Iterator<Item = u32> + '_ {
        match self {
            LexemeDfa::Table { dfa, .. } => Successors::Table(dfa.successors(state)),
            LexemeDfa::Counted(dfa) => Successors::Counted(dfa.successors(state)),
        }
    }

    pub fn num_states(&self) -> usize {
        match self {
            LexemeDfa::Table { dfa, .. } => dfa.num_states(),
            LexemeDfa::Counted(dfa) => dfa.num_states(),
        }
    }

    /// Where the token mask of `state` is computed, for tokens of at most `reach` bytes: the
    /// table itself, or a counted string's window (built on first use for that reach).
    pub fn mask_view(&self, state: u32, reach: usize) -> Result<MaskView<'_>, FsmError> {
        Ok(match self {
            LexemeDfa::Table { dfa, distances, twins } => {
                let twins = twins.as_ref().map(|(twins, first_free)| (&twins[..], *first_free));
                MaskView { table: MaskTable::Own(dfa, distances, twins), state }
            }
            LexemeDfa::Counted(dfa) => {
                let window = dfa.window(reach)?;
                let state = dfa.window_state(&window, state);
                MaskView { table: MaskTable::Window(window), state }
            }
        })
    }

    pub fn memory_bytes(&self) -> usize {
        match self {
            LexemeDfa::Table { dfa, distances, twins } => {
                dfa.memory_bytes()
                    + distances.get().map_or(0, |d| d.capacity() * 2)
                    + twins.as_ref().map_or(0, |(t, _)| t.len() * 4)
            }
            LexemeDfa::Counted(dfa) => dfa.memory_bytes(),
        }
    }
}
