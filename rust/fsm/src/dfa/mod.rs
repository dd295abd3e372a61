//! Regex -> a compact byte-level DFA over the pattern's language (anchored, full match).
//!
//! Parsed and compiled to a Thompson NFA by `regex-syntax` / `regex-automata`, determinized by
//! our own subset construction (`subset.rs`; `regex-automata`'s dense builder where the pattern
//! has look-around; a few strings' minimal DFA directly, `finite.rs`), keeping only *live* states (states from which some accepting state is
//! reachable). Two details matter for constrained
//! decoding and are easy to get wrong:
//! - `MatchKind::All`: the default leftmost-first semantics prune alternatives that a match
//!   would never prefer (`a|ab` would forbid `b` after `a`), but a constraint is a language.
//! - `regex-automata` reports matches one byte late, so a state accepts iff its end-of-input
//!   transition is a match state; `is_match_state(s)` alone is the wrong test.
//!
//! Here: the table ([`ByteDfa`]) and what reads it. Beside it: `build.rs` (regex -> table),
//! `classes.rs` (byte classes), `limits.rs`, `numbers.rs` (hand-built number automata),
//! `product.rs` (intersections and differences).

mod build;
pub(crate) mod classes;
mod finite;
mod limits;
mod numbers;
mod product;
mod subset;

pub use limits::CompileLimits;

use crate::error::FsmError;

/// Transition target meaning "no accepting state is reachable any more".
pub const DEAD: u32 = u32::MAX;

/// A DFA over bytes with equivalence classes, holding only live states. State 0 is the start.
#[derive(Debug, Clone)]
pub struct ByteDfa {
    pub(crate) classes: [u8; 256],
    pub(crate) num_classes: usize,
    /// Number of bytes in each class, and one byte of it.
    class_len: Vec<u16>,
    class_byte: Vec<u8>,
    /// `trans[state * num_classes + class]`: next live state or `DEAD`.
    pub(crate) trans: Vec<u32>,
    accepting: Vec<bool>,
}

impl ByteDfa {
    /// The whole table as words (classes, transitions, acceptance): equal for equal tables, a
    /// cache key for what is built from one.
    pub(crate) fn table_words(&self) -> Vec<u32> {
        let mut words = Vec::with_capacity(256 + 1 + self.trans.len() + self.accepting.len());
        words.extend(self.classes.iter().map(|&class| u32::from(class)));
        words.push(self.num_classes as u32);
        words.extend_from_slice(&self.trans);
        words.extend(self.accepting.iter().map(|&accepting| u32::from(accepting)));
        words
    }

    /// Sets the edge from `state` on `byte` to `target`, for a byte alone in its class (the
    /// edge is the class's) and a live `target`.
    pub(crate) fn set_transition(&mut self, state: u32, byte: u8, target: u32) {
        let class = self.classes[byte as usize] as usize;
        debug_assert_eq!(self.class_len[class], 1, "byte {byte} shares its class");
        self.trans[state as usize * self.num_classes + class] = target;
    }

    /// Keeps the live states of a raw table (state 0 the start, `DEAD` for no way on),
    /// renumbered in BFS order so the start stays 0.
    pub(crate) fn from_raw(
        classes: [u8; 256],
        num_classes: usize,
        class_len: Vec<u16>,
        class_byte: Vec<u8>,
        raw_trans: &[u32],
        accepting: &[bool],
    ) -> Result<Self, FsmError> {
        let live = live_states(raw_trans, accepting, num_classes);
        if !live[0] {
            return Err(FsmError::EmptyLanguage);
        }
        let num_raw = accepting.len();
        let mut renumber = vec![DEAD; num_raw];
        let mut order = vec![0u32];
        renumber[0] = 0;
        let mut head = 0;
        while head < order.len() {
            let raw = order[head] as usize;
            head += 1;
            for &next in &raw_trans[raw * num_classes..(raw + 1) * num_classes] {
                if next != DEAD && live[next as usize] && renumber[next as usize] == DEAD {
                    renumber[next as usize] = order.len() as u32;
                    order.push(next);
                }
            }
        }
        let mut trans = Vec::with_capacity(order.len() * num_classes);
        let mut live_accepting = Vec::with_capacity(order.len());
        for &raw in &order {
            let raw = raw as usize;
            live_accepting.push(accepting[raw]);
            trans.extend(raw_trans[raw * num_classes..(raw + 1) * num_classes].iter().map(|&next| {
                if next == DEAD {
                    DEAD
                } else {
                    renumber[next as usize]
                }
            }));
        }
        Ok(Self { classes, num_classes, class_len, class_byte, trans, accepting: live_accepting })
    }

    /// A table built live by construction (every state reaches an accepting one; state 0 the
    /// start), taken as it is: no pruning pass over a table that may hold millions of entries.
    pub(crate) fn from_live_table(
        classes: [u8; 256],
        num_classes: usize,
        class_len: Vec<u16>,
        class_byte: Vec<u8>,
        trans: Vec<u32>,
        accepting: Vec<bool>,
    ) -> Result<Self, FsmError> {
        if trans.len() != accepting.len() * num_classes || accepting.is_empty() {
            return Err(FsmError::Invariant("a DFA table must hold one row per state".into()));
        }
        Ok(Self { classes, num_classes, class_len, class_byte, trans, accepting })
    }

    pub fn num_states(&self) -> usize {
        self.accepting.len()
    }

    /// The byte class of `byte` (bytes of one class lead every state to the same state).
    pub(crate) fn class_of(&self, byte: u8) -> u8 {
        self.classes[byte as usize]
    }

    pub fn start(&self) -> u32 {
        0
    }

    /// Per byte class, the state `state` goes to on it and how many bytes the class holds.
    pub(crate) fn class_targets(&self, state: u32) -> impl Iterator<Item = (u32, u16)> + '_ {
        let row = &self.trans[state as usize * self.num_classes..][..self.num_classes];
        row.iter().copied().zip(self.class_len.iter().copied())
    }

    /// One byte of each byte class.
    pub(crate) fn class_bytes(&self) -> &[u8] {
        &self.class_byte
    }

    #[inline(always)]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        self.trans[state as usize * self.num_classes + self.classes[byte as usize] as usize]
    }

    /// The bytes on which state `a` and state `b` (or [`DEAD`]) go to different states,
    /// ascending, when each is a class of its own and there are at most `max` of them (a
    /// declared name's state beside its twin, a literal's next byte); `None` otherwise.
    pub fn bytes_apart(&self, a: u32, b: u32, max: usize) -> Option<Vec<u8>> {
        let row = |state: u32| &self.trans[state as usize * self.num_classes..][..self.num_classes];
        let own = row(a);
        let mut bytes = Vec::new();
        for (class, &next) in own.iter().enumerate() {
            let other = if b == DEAD { DEAD } else { row(b)[class] };
            if next != other {
                if self.class_len[class] != 1 || bytes.len() == max {
                    return None;
                }
                bytes.push(self.class_byte[class]);
            }
        }
        bytes.sort_unstable();
        Some(bytes)
    }

    /// [`ByteDfa::next`] without the bounds check, for the trie walks.
    ///
    /// # Safety
    /// `state` must be a state of this DFA (not `DEAD`).
    #[inline(always)]
    pub unsafe fn next_unchecked(&self, state: u32, byte: u8) -> u32 {
        debug_assert!((state as usize) < self.num_states());
        // SAFETY: classes has 256 entries; state < num_states and class < num_classes keep the
        // index inside trans (num_states * num_classes entries).
        unsafe {
            let class = *self.classes.get_unchecked(byte as usize) as usize;
            *self.trans.get_unchecked(state as usize * self.num_classes + class)
        }
    }

    /// The DFA state after `bytes`, or `DEAD`.
    pub fn walk(&self, mut state: u32, bytes: &[u8]) -> u32 {
        for &byte in bytes {
            state = self.next(state, byte);
            if state == DEAD {
                return DEAD;
            }
        }
        state
    }

    pub fn is_accepting(&self, state: u32) -> bool {
        self.accepting[state as usize]
    }

    /// Whether the DFA matches all of `bytes` from the start.
    pub fn matches(&self, bytes: &[u8]) -> bool {
        let state = self.walk(self.start(), bytes);
        state != DEAD && self.is_accepting(state)
    }

    /// The only byte that keeps `state` live, if exactly one does.
    pub fn forced_byte(&self, state: u32) -> Option<u8> {
        let row = &self.trans[state as usize * self.num_classes..][..self.num_classes];
        let mut forced = None;
        for (class, &next) in row.iter().enumerate() {
            if next == DEAD {
                continue;
            }
            if forced.is_some() || self.class_len[class] != 1 {
                return None;
            }
            forced = Some(self.class_byte[class]);
        }
        forced
    }

    /// Live successor states of `state` (with repeats), for invariant checks and tests.
    pub fn successors(&self, state: u32) -> impl Iterator<Item = u32> + '_ {
        self.trans[state as usize * self.num_classes..][..self.num_classes]
            .iter()
            .copied()
            .filter(|&next| next != DEAD)
    }

    pub fn memory_bytes(&self) -> usize {
        self.trans.capacity() * 4 + self.accepting.capacity() + 256 + self.num_classes * 3
    }

    /// For each state, the fewest bytes that reach an accepting state (0 when accepting),
    /// capped at `u16::MAX`: a walk that only looks for accepting positions can skip what is
    /// too short to reach one.
    pub fn accept_distances(&self) -> Vec<u16> {
        let num_states = self.num_states();
        let (starts, sources) = in_edges(&self.trans, num_states, self.num_classes);
        let mut distance = vec![u16::MAX; num_states];
        let mut queue: std::collections::VecDeque<u32> =
            (0..num_states as u32).filter(|&s| self.accepting[s as usize]).collect();
        for &state in &queue {
            distance[state as usize] = 0;
        }
        while let Some(state) = queue.pop_front() {
            let next = distance[state as usize].saturating_add(1);
            let range = starts[state as usize] as usize..starts[state as usize + 1] as usize;
            for &source in &sources[range] {
                if distance[source as usize] == u16::MAX {
                    distance[source as usize] = next;
                    queue.push_back(source);
                }
            }
        }
        distance
    }
}

/// In-edges as CSR: the sources of state t are `sources[starts[t]..starts[t + 1]]` (a source
/// repeats once per byte class leading to t).
fn in_edges(trans: &[u32], num_states: usize, num_classes: usize) -> (Vec<u32>, Vec<u32>) {
    let mut in_degree = vec![0u32; num_states + 1];
    for &next in trans {
        if next != DEAD {
            in_degree[next as usize + 1] += 1;
        }
    }
    for i in 0..num_states {
        in_degree[i + 1] += in_degree[i];
    }
    let starts = in_degree;
    let mut fill = starts.clone();
    let mut sources = vec![0u32; trans.len()];
    for (edge, &next) in trans.iter().enumerate() {
        if next != DEAD {
            let at = &mut fill[next as usize];
            sources[*at as usize] = (edge / num_classes) as u32;
            *at += 1;
        }
    }
    (starts, sources)
}

/// Whether every state of `dfa` reaches an accepting one (tests of tables built live).
#[cfg(test)]
pub(crate) fn every_state_is_live(dfa: &ByteDfa) -> bool {
    live_states(&dfa.trans, &dfa.accepting, dfa.num_classes).iter().all(|&live| live)
}

/// States from which an accepting state is reachable (reverse BFS over a CSR of in-edges).
fn live_states(trans: &[u32], accepting: &[bool], num_classes: usize) -> Vec<bool> {
    let num_states = accepting.len();
    let (starts, sources) = in_edges(trans, num_states, num_classes);
    let mut live = accepting.to_vec();
    let mut queue: Vec<u32> = (0..num_states as u32).filter(|&s| accepting[s as usize]).collect();
    while let Some(state) = queue.pop() {
        let range = starts[state as usize] as usize..starts[state as usize + 1] as usize;
        for &source in &sources[range] {
            if !live[source as usize] {
                live[source as usize] = true;
                queue.push(source);
            }
        }
    }
    live
}

#[cfg(test)]
mod tests;
