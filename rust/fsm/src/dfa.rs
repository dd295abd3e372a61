//! Regex -> a compact byte-level DFA over the pattern's language (anchored, full match).
//!
//! Parsed and compiled to a Thompson NFA by `regex-syntax` / `regex-automata`, determinized by
//! our own subset construction (`subset.rs`; `regex-automata`'s dense builder where the pattern
//! has look-around), keeping only *live* states (states from which some accepting state is
//! reachable). Two details matter for constrained
//! decoding and are easy to get wrong:
//! - `MatchKind::All`: the default leftmost-first semantics prune alternatives that a match
//!   would never prefer (`a|ab` would forbid `b` after `a`), but a constraint is a language.
//! - `regex-automata` reports matches one byte late, so a state accepts iff its end-of-input
//!   transition is a match state; `is_match_state(s)` alone is the wrong test.

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson::{self, WhichCaptures};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};

use crate::error::FsmError;

/// Transition target meaning "no accepting state is reachable any more".
pub const DEAD: u32 = u32::MAX;

/// Size limits that bound compile time and memory; exceeding one is a typed error, so a
/// hostile or accidental pattern can neither hang nor exhaust memory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompileLimits {
    /// Heap bytes for the Thompson NFA.
    pub nfa_size_limit: usize,
    /// Heap bytes for the determinized DFA.
    pub dfa_size_limit: usize,
    /// Heap bytes of scratch space used during determinization.
    pub determinize_size_limit: usize,
    /// Maximum nesting depth of groups/repetitions in the pattern.
    pub nest_limit: u32,
}

impl Default for CompileLimits {
    fn default() -> Self {
        Self {
            nfa_size_limit: 64 << 20,
            dfa_size_limit: 128 << 20,
            determinize_size_limit: 64 << 20,
            nest_limit: 1000,
        }
    }
}

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
    pub fn build(pattern: &str, limits: &CompileLimits) -> Result<Self, FsmError> {
        if let Some(strings) = crate::finite::plain_pattern_strings(pattern) {
            if let Some(dfa) = crate::finite::strings_dfa(&strings, limits) {
                return Ok(dfa);
            }
        }
        let hir = Self::hir(pattern, limits)?;
        // A few short strings (an enum's values): their minimal DFA directly.
        if let Some(dfa) = crate::finite::finite_language_dfa(&hir, limits) {
            return Ok(dfa);
        }
        Self::determinized(&Self::nfa_of(&hir, limits)?, limits)
    }

    /// [`ByteDfa::build`] without the fast path for finite languages (its test oracle).
    #[cfg(test)]
    pub(crate) fn build_general(pattern: &str, limits: &CompileLimits) -> Result<Self, FsmError> {
        Self::determinized(&Self::nfa(pattern, limits)?, limits)
    }

    fn determinized(nfa: &thompson::NFA, limits: &CompileLimits) -> Result<Self, FsmError> {
        match crate::subset::determinize(nfa, limits) {
            Some(dfa) => dfa,
            None => Self::from_nfa_dense(nfa, limits),
        }
    }

    fn hir(pattern: &str, limits: &CompileLimits) -> Result<regex_syntax::hir::Hir, FsmError> {
        regex_syntax::ParserBuilder::new()
            .unicode(true)
            .utf8(true)
            .nest_limit(limits.nest_limit)
            .build()
            .parse(pattern)
            .map_err(|e| FsmError::InvalidRegex(e.to_string()))
    }

    /// The pattern's Thompson NFA (UTF-8, no captures).
    #[cfg(test)]
    pub(crate) fn nfa(pattern: &str, limits: &CompileLimits) -> Result<thompson::NFA, FsmError> {
        Self::nfa_of(&Self::hir(pattern, limits)?, limits)
    }

    fn nfa_of(hir: &regex_syntax::hir::Hir, limits: &CompileLimits) -> Result<thompson::NFA, FsmError> {
        thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .nfa_size_limit(Some(limits.nfa_size_limit))
                    .which_captures(WhichCaptures::None),
            )
            .build_from_hir(hir)
            .map_err(|e| match e.size_limit() {
                Some(limit) => FsmError::AutomatonTooLarge { what: "NFA", limit },
                None => FsmError::UnsupportedRegex(e.to_string()),
            })
    }

    /// `regex-automata`'s dense determinizer, for NFAs with look-around (`crate::subset`
    /// handles the rest).
    fn from_nfa_dense(nfa: &thompson::NFA, limits: &CompileLimits) -> Result<Self, FsmError> {
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .accelerate(false)
                    .minimize(false)
                    .dfa_size_limit(Some(limits.dfa_size_limit))
                    .determinize_size_limit(Some(limits.determinize_size_limit)),
            )
            .build_from_nfa(nfa)
            .map_err(|e| {
                if e.is_size_limit_exceeded() {
                    FsmError::AutomatonTooLarge { what: "DFA", limit: limits.dfa_size_limit }
                } else {
                    FsmError::UnsupportedRegex(e.to_string())
                }
            })?;
        Self::from_dense(&dfa)
    }

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

    /// Both determinizers on one pattern (tests compare their languages).
    #[cfg(test)]
    pub(crate) fn build_both(pattern: &str, limits: &CompileLimits) -> Result<(Self, Self), FsmError> {
        let nfa = Self::nfa(pattern, limits)?;
        let subset = crate::subset::determinize(&nfa, limits).expect("no look-around")?;
        Ok((subset, Self::from_nfa_dense(&nfa, limits)?))
    }

    fn from_dense(dfa: &dense::DFA<Vec<u32>>) -> Result<Self, FsmError> {
        let byte_classes = dfa.byte_classes();
        let mut classes = [0u8; 256];
        for byte in 0..=255u8 {
            classes[byte as usize] = byte_classes.get(byte);
        }
        let num_classes = byte_classes.alphabet_len() - 1;
        let (class_len, class_byte) = class_members(&classes, num_classes);
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| FsmError::UnsupportedRegex(e.to_string()))?;

        // Pass 1: every state reachable from the start, numbered in BFS order.
        let stride2 = dfa.stride2();
        let slot = |id: StateID| id.as_usize() >> stride2;
        let mut number_of: Vec<u32> = Vec::new();
        let mut dense_ids: Vec<StateID> = Vec::new();
        let mut raw_trans: Vec<u32> = Vec::new();
        let mut accepting = Vec::new();
        let intern = |id: StateID, number_of: &mut Vec<u32>, dense_ids: &mut Vec<StateID>| {
            if dfa.is_dead_state(id) || dfa.is_quit_state(id) {
                return DEAD;
            }
            let index = slot(id);
            if index >= number_of.len() {
                number_of.resize(index + 1, DEAD);
            }
            if number_of[index] == DEAD {
                number_of[index] = dense_ids.len() as u32;
                dense_ids.push(id);
            }
            number_of[index]
        };
        if intern(start, &mut number_of, &mut dense_ids) == DEAD {
            return Err(FsmError::EmptyLanguage);
        }
        let mut next_to_expand = 0;
        while next_to_expand < dense_ids.len() {
            let id = dense_ids[next_to_expand];
            next_to_expand += 1;
            accepting.push(dfa.is_match_state(dfa.next_eoi_state(id)));
            for &byte in &class_byte {
                let next = dfa.next_state(id, byte);
                raw_trans.push(intern(next, &mut number_of, &mut dense_ids));
            }
        }
        Self::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
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

    /// Decimal integers in JSON spelling (no leading zeros, no `-0`) divisible by `divisor`
    /// (at least 1): a remainder automaton, which no short regex can say.
    pub fn decimal_multiples(divisor: u32) -> Result<Self, FsmError> {
        if divisor == 0 {
            return Err(FsmError::InvalidRegex("a divisor must be positive".into()));
        }
        // Classes: each digit, '-', everything else.
        let (classes, num_classes, class_len, class_byte) = digit_classes(b"-");
        // States: 0 start, 1 after '-', 2 a lone "0", 3 + r digits read with remainder r.
        let k = divisor as u64;
        let remainder = |r: u64| 3 + r as u32;
        let num_states = 3 + divisor as usize;
        let mut raw_trans = vec![DEAD; num_states * num_classes];
        let mut accepting = vec![false; num_states];
        raw_trans[10] = 1;
        raw_trans[0] = 2;
        accepting[2] = true;
        for digit in 1..10u64 {
            raw_trans[digit as usize] = remainder(digit % k);
            raw_trans[num_classes + digit as usize] = remainder(digit % k);
        }
        for r in 0..k {
            let state = remainder(r) as usize;
            accepting[state] = r == 0;
            for digit in 0..10u64 {
                raw_trans[state * num_classes + digit as usize] = remainder((r * 10 + digit) % k);
            }
        }
        Self::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
    }

    /// JSON numbers without exponent that are multiples of `divisor` / 10^`scale`
    /// (`multipleOf: 0.25` is divisor 25, scale 2; `multipleOf: 5` on a number is 5, scale 0,
    /// which admits `10.0`): the value times 10^`scale` must be an integer divisible by
    /// `divisor`, so past `scale` fraction digits only zeros follow. States: the integer part's
    /// remainder, then the remainder and the number of fraction digits read (capped).
    pub fn decimal_multiples_scaled(divisor: u32, scale: u32) -> Result<Self, FsmError> {
        if divisor == 0 || scale > 18 {
            return Err(FsmError::InvalidRegex(
                "a scaled divisor needs a positive divisor and a scale up to 18".into(),
            ));
        }
        // Classes: each digit, '-', '.', everything else.
        let (classes, num_classes, class_len, class_byte) = digit_classes(b"-.");
        let (d, k) = (u64::from(divisor), scale as usize);
        // Fraction digits read are counted up to `top` (at least 1, so that a fraction of zeros
        // past the scale is told apart from a bare ".").
        let top = k.max(1);
        // States: 0 start, 1 after '-', 2 a lone "0", then the integer part's remainders, then
        // (remainder, fraction digits read 0..=top).
        let integer = |r: u64| 3 + r as usize;
        let fraction = |r: u64, read: usize| 3 + d as usize + r as usize * (top + 1) + read;
        let num_states = 3 + d as usize * (top + 2);
        let mut raw_trans = vec![DEAD; num_states * num_classes];
        let mut accepting = vec![false; num_states];
        let mut set =
            |state: usize, class: usize, next: usize| raw_trans[state * num_classes + class] = next as u32;
        // (r * 10^e) mod d, for the value's remaining shift.
        let shifted = |r: u64, e: usize| (0..e).fold(r, |acc, _| acc * 10 % d);
        set(0, 10, 1);
        for start in [0, 1] {
            set(start, 0, 2);
            for digit in 1..10u64 {
                set(start, digit as usize, integer(digit % d));
            }
        }
        accepting[2] = true;
        set(2, 11, fraction(0, 0));
        for r in 0..d {
            accepting[integer(r)] = shifted(r, k) == 0;
            for digit in 0..10u64 {
                set(integer(r), digit as usize, integer((r * 10 + digit) % d));
            }
            set(integer(r), 11, fraction(r, 0));
            for read in 0..=top {
                // NOTE: "." needs a digit after it; past `scale` digits only zeros keep the value.
                accepting[fraction(r, read)] = read > 0 && shifted(r, k - read.min(k)) == 0;
                if read < k {
                    for digit in 0..10u64 {
                        set(fraction(r, read), digit as usize, fraction((r * 10 + digit) % d, read + 1));
                    }
                } else {
                    set(fraction(r, read), 0, fraction(r, (read + 1).min(top)));
                }
            }
        }
        Self::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
    }

    /// The DFA of the strings every one of `all` accepts and none of `none` does (a product
    /// construction, so regexes can be intersected and subtracted, which their syntax cannot
    /// say). `AutomatonTooLarge` past `max_states` product states; `EmptyLanguage` if empty.
    pub fn intersect(all: &[&ByteDfa], none: &[&ByteDfa], max_states: usize) -> Result<Self, FsmError> {
        let parts: Vec<&ByteDfa> = all.iter().chain(none).copied().collect();
        if all.is_empty() {
            return Err(FsmError::InvalidRegex("an intersection needs at least one language".into()));
        }
        let (classes, num_classes, class_len, class_byte) = product_classes(&parts);
        let mut number_of: std::collections::HashMap<Vec<u32>, u32> = std::collections::HashMap::new();
        let mut states: Vec<Vec<u32>> = vec![parts.iter().map(|d| d.start()).collect()];
        number_of.insert(states[0].clone(), 0);
        let mut raw_trans: Vec<u32> = Vec::new();
        let mut accepting = Vec::new();
        let mut head = 0;
        while head < states.len() {
            let tuple = states[head].clone();
            head += 1;
            let accepts = |i: usize, d: &ByteDfa| tuple[i] != DEAD && d.is_accepting(tuple[i]);
            accepting.push(
                all.iter().enumerate().all(|(i, d)| accepts(i, d))
                    && !none.iter().enumerate().any(|(i, d)| accepts(all.len() + i, d)),
            );
            for &byte in &class_byte {
                let next: Vec<u32> = parts
                    .iter()
                    .zip(&tuple)
                    .map(|(d, &s)| if s == DEAD { DEAD } else { d.next(s, byte) })
                    .collect();
                if next[..all.len()].contains(&DEAD) {
                    raw_trans.push(DEAD);
                    continue;
                }
                let id = match number_of.get(&next) {
                    Some(&id) => id,
                    None => {
                        if states.len() >= max_states {
                            return Err(FsmError::AutomatonTooLarge {
                                what: "intersection DFA",
                                limit: max_states,
                            });
                        }
                        let id = states.len() as u32;
                        number_of.insert(next.clone(), id);
                        states.push(next);
                        id
                    }
                };
                raw_trans.push(id);
            }
        }
        Self::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
    }

    /// Whether some string every one of `all` accepts and none of `none` does exists: the
    /// product of [`ByteDfa::intersect`] searched breadth first up to its first accepting
    /// state, without its table (a lexeme checked for emptiness at compile, built on first use).
    /// `AutomatonTooLarge` past `max_states` product states visited.
    pub fn intersection_is_empty(
        all: &[&ByteDfa],
        none: &[&ByteDfa],
        max_states: usize,
    ) -> Result<bool, FsmError> {
        let parts: Vec<&ByteDfa> = all.iter().chain(none).copied().collect();
        if all.is_empty() {
            return Err(FsmError::InvalidRegex("an intersection needs at least one language".into()));
        }
        let (_, _, _, class_byte) = product_classes(&parts);
        let accepts = |tuple: &[u32]| {
            let accepts = |(d, &s): (&&ByteDfa, &u32)| s != DEAD && d.is_accepting(s);
            all.iter().zip(tuple).all(accepts) && !none.iter().zip(&tuple[all.len()..]).any(accepts)
        };
        let start: Vec<u32> = parts.iter().map(|d| d.start()).collect();
        let mut seen: rustc_hash::FxHashSet<Vec<u32>> = rustc_hash::FxHashSet::default();
        let mut queue = std::collections::VecDeque::from([start.clone()]);
        seen.insert(start);
        while let Some(tuple) = queue.pop_front() {
            if accepts(&tuple) {
                return Ok(false);
            }
            for &byte in &class_byte {
                let next: Vec<u32> = parts
                    .iter()
                    .zip(&tuple)
                    .map(|(d, &s)| if s == DEAD { DEAD } else { d.next(s, byte) })
                    .collect();
                if next[..all.len()].contains(&DEAD) || seen.contains(&next) {
                    continue;
                }
                if seen.len() >= max_states {
                    return Err(FsmError::AutomatonTooLarge { what: "intersection DFA", limit: max_states });
                }
                seen.insert(next.clone());
                queue.push_back(next);
            }
        }
        Ok(true)
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

/// Byte classes of a product: bytes every part treats alike share one. Returns the classes,
/// their number, each class's size and one byte of each.
fn product_classes(parts: &[&ByteDfa]) -> ByteClasses {
    classes_by_signature(|byte| parts.iter().map(|d| d.classes[byte as usize]).collect::<Vec<u8>>())
}

/// Byte classes, their number, each class's size and its smallest byte.
pub(crate) type ByteClasses = ([u8; 256], usize, Vec<u16>, Vec<u8>);

/// `base`'s byte classes with every byte `own` picks in a class of its own, numbered in order
/// of first byte (as [`classes_by_signature`] would number them, in one pass over the bytes).
pub(crate) fn classes_refined(base: &ByteDfa, own: impl Fn(u8) -> bool) -> ByteClasses {
    let mut classes = [0u8; 256];
    let mut by_base_class = [u16::MAX; 256];
    let mut num_classes = 0usize;
    for byte in 0..=255u8 {
        let base_class = base.class_of(byte) as usize;
        let class = if own(byte) {
            num_classes += 1;
            num_classes - 1
        } else {
            if by_base_class[base_class] == u16::MAX {
                by_base_class[base_class] = num_classes as u16;
                num_classes += 1;
            }
            by_base_class[base_class] as usize
        };
        classes[byte as usize] = class as u8;
    }
    let (class_len, class_byte) = class_members(&classes, num_classes);
    (classes, num_classes, class_len, class_byte)
}

/// Bytes with equal signatures share a class (numbered in order of first appearance).
pub(crate) fn classes_by_signature<S: PartialEq>(signature: impl Fn(u8) -> S) -> ByteClasses {
    let mut classes = [0u8; 256];
    let mut signatures: Vec<S> = Vec::new();
    for byte in 0..=255u8 {
        let own = signature(byte);
        let class = match signatures.iter().position(|s| *s == own) {
            Some(class) => class,
            None => {
                signatures.push(own);
                signatures.len() - 1
            }
        };
        // At most 256 signatures over 256 bytes: the last index is 255.
        classes[byte as usize] = class as u8;
    }
    let num_classes = signatures.len();
    let (class_len, class_byte) = class_members(&classes, num_classes);
    (classes, num_classes, class_len, class_byte)
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

/// Byte classes of a hand-built number automaton: digit d is class d, the bytes of `extra` come
/// next (classes 10, 11, ...), every other byte is the last class. Returns (classes, number of
/// classes, bytes per class, a byte of each class).
fn digit_classes(extra: &[u8]) -> ([u8; 256], usize, Vec<u16>, Vec<u8>) {
    let num_classes = 11 + extra.len();
    let mut classes = [(num_classes - 1) as u8; 256];
    for digit in 0..10u8 {
        classes[(b'0' + digit) as usize] = digit;
    }
    for (offset, &byte) in extra.iter().enumerate() {
        classes[byte as usize] = 10 + offset as u8;
    }
    let (class_len, class_byte) = class_members(&classes, num_classes);
    (classes, num_classes, class_len, class_byte)
}

/// How many bytes each class holds, and one byte of each (the lowest).
pub(crate) fn class_members(classes: &[u8; 256], num_classes: usize) -> (Vec<u16>, Vec<u8>) {
    let mut class_len = vec![0u16; num_classes];
    let mut class_byte = vec![0u8; num_classes];
    for byte in (0..=255u8).rev() {
        let class = classes[byte as usize] as usize;
        class_len[class] += 1;
        class_byte[class] = byte;
    }
    (class_len, class_byte)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(pattern: &str) -> ByteDfa {
        ByteDfa::build(pattern, &CompileLimits::default()).unwrap()
    }

    fn full_match(dfa: &ByteDfa, text: &str) -> bool {
        let state = dfa.walk(dfa.start(), text.as_bytes());
        state != DEAD && dfa.is_accepting(state)
    }

    #[test]
    fn language_semantics_not_leftmost_first() {
        let d = dfa("a|ab");
        assert!(full_match(&d, "a") && full_match(&d, "ab"));
        let d = dfa("a+?");
        assert!(full_match(&d, "aaa"));
        let d = dfa("a(b)??");
        assert!(full_match(&d, "ab"));
    }

    #[test]
    fn acceptance_is_not_delayed() {
        let d = dfa("a(bc)?");
        let after_a = d.walk(d.start(), b"a");
        assert!(d.is_accepting(after_a));
        let after_ab = d.walk(d.start(), b"ab");
        assert!(after_ab != DEAD && !d.is_accepting(after_ab));
        assert!(full_match(&d, "abc"));
        let d = dfa(r"[1-9][0-9]*(\.[0-9]+)?");
        assert!(full_match(&d, "1.5") && !full_match(&d, "1."));
    }

    #[test]
    fn bytes_apart_are_the_bytes_two_states_step_differently() {
        let d = dfa("ab(cd)?|xyz|[0-9]+");
        let after_a = d.next(d.start(), b'a');
        // From the start against nothing: the bytes it takes, if each is a class alone.
        assert_eq!(d.bytes_apart(after_a, DEAD, 4), Some(b"b".to_vec()));
        // The digits share a class: not listed.
        assert_eq!(d.bytes_apart(d.start(), DEAD, 16), None);
        let after_ab = d.next(after_a, b'b');
        let after_x = d.next(d.start(), b'x');
        assert_eq!(d.bytes_apart(after_ab, after_x, 4), Some(b"cy".to_vec()));
        assert_eq!(d.bytes_apart(after_ab, after_x, 1), None);
        assert_eq!(d.bytes_apart(after_ab, after_ab, 0), Some(Vec::new()));
        for (a, b) in [(after_ab, after_x), (after_a, DEAD)] {
            let apart = d.bytes_apart(a, b, 8).unwrap();
            for byte in 0..=255u8 {
                let other = if b == DEAD { DEAD } else { d.next(b, byte) };
                assert_eq!(d.next(a, byte) != other, apart.contains(&byte), "{byte}");
            }
        }
    }

    #[test]
    fn accept_distances_count_bytes_to_the_nearest_match() {
        let d = dfa("ab(cd)?|xyz");
        let distances = d.accept_distances();
        assert_eq!(distances[d.start() as usize], 2);
        let after_a = d.next(d.start(), b'a');
        assert_eq!(distances[after_a as usize], 1);
        let after_ab = d.next(after_a, b'b');
        assert_eq!(distances[after_ab as usize], 0);
        assert_eq!(distances[d.next(after_ab, b'c') as usize], 1);
        assert_eq!(distances[d.walk(d.start(), b"xy") as usize], 1);
    }

    #[test]
    fn full_match_is_anchored_both_ends() {
        let d = dfa("[0-9]+");
        assert!(full_match(&d, "123"));
        assert!(!full_match(&d, "x123"));
        assert_eq!(d.walk(d.start(), b"12x"), DEAD);
    }

    #[test]
    fn unsatisfiable_branches_are_pruned() {
        // After "a" the only continuation ("b" after end of text) is impossible.
        let d = dfa("a$b|c");
        assert_eq!(d.walk(d.start(), b"a"), DEAD);
        assert!(full_match(&d, "c"));
        assert!(matches!(ByteDfa::build("a$b", &CompileLimits::default()), Err(FsmError::EmptyLanguage)));
    }

    #[test]
    fn forced_bytes() {
        let d = dfa("abc|abd");
        assert_eq!(d.forced_byte(d.start()), Some(b'a'));
        let after_ab = d.walk(d.start(), b"ab");
        assert_eq!(d.forced_byte(after_ab), None);
    }

    #[test]
    fn errors_are_typed() {
        let limits = CompileLimits::default();
        assert!(matches!(ByteDfa::build("(ab", &limits), Err(FsmError::InvalidRegex(_))));
        assert!(matches!(ByteDfa::build(r"\bfoo\b", &limits), Err(FsmError::UnsupportedRegex(_))));
        let small = CompileLimits { nfa_size_limit: 1 << 16, ..CompileLimits::default() };
        assert!(matches!(ByteDfa::build(r"\w{1000}", &small), Err(FsmError::AutomatonTooLarge { .. })));
    }

    #[test]
    fn intersection_and_difference_match_the_set_algebra() {
        let (words, short, ab) = (dfa("[a-c]+"), dfa("[a-z]{1,2}"), dfa("ab|ba"));
        let both = ByteDfa::intersect(&[&words, &short], &[&ab], 1000).unwrap();
        for text in ["a", "c", "aa", "ab", "ba", "bc", "abc", "d", "", "cd"] {
            let expected = full_match(&words, text) && full_match(&short, text) && !full_match(&ab, text);
            assert_eq!(full_match(&both, text), expected, "{text:?}");
        }
        assert_eq!(ByteDfa::intersect(&[&ab], &[&words], 1000).unwrap_err(), FsmError::EmptyLanguage);
        assert!(matches!(
            ByteDfa::intersect(&[&dfa("[a-z]{0,50}")], &[], 10),
            Err(FsmError::AutomatonTooLarge { .. })
        ));
    }

    #[test]
    fn emptiness_search_agrees_with_the_product() {
        let (words, short, ab, digits) = (dfa("[a-c]+"), dfa("[a-z]{1,2}"), dfa("ab|ba"), dfa("[0-9]+"));
        let cases: [(&[&ByteDfa], &[&ByteDfa]); 5] = [
            (&[&words, &short], &[&ab]),
            (&[&ab], &[&words]),
            (&[&words, &digits], &[]),
            (&[&short], &[&words, &digits]),
            (&[&ab], &[]),
        ];
        for (all, none) in cases {
            let built = ByteDfa::intersect(all, none, 1000);
            let empty = ByteDfa::intersection_is_empty(all, none, 1000).unwrap();
            assert_eq!(empty, matches!(built, Err(FsmError::EmptyLanguage)), "{built:?}");
        }
        assert!(matches!(
            ByteDfa::intersection_is_empty(&[&dfa("[a-z]{20}")], &[], 10),
            Err(FsmError::AutomatonTooLarge { .. })
        ));
    }

    #[test]
    fn decimal_multiples_are_exact() {
        for divisor in [1u32, 3, 7, 10, 12] {
            let d = ByteDfa::decimal_multiples(divisor).unwrap();
            for n in -300i64..300 {
                assert_eq!(full_match(&d, &n.to_string()), n % divisor as i64 == 0, "{n} / {divisor}");
            }
            for text in ["-0", "00", "012", "", "-", "1.0", "+3"] {
                assert!(!full_match(&d, text), "{text}");
            }
        }
    }

    #[test]
    fn scaled_decimal_multiples_are_exact() {
        // multipleOf 0.25, 0.01, 2.5 (25 / 10), 0.3 (3 / 10), 0.125 (125 / 1000), 3 and 1 on a number.
        for (divisor, scale) in [(25u32, 2u32), (1, 2), (25, 1), (3, 1), (125, 3), (3, 0), (1, 0)] {
            let d = ByteDfa::decimal_multiples_scaled(divisor, scale).unwrap();
            // Every value -4..4 in steps of 0.001, as 3 fraction digits, trimmed, and padded.
            for thousandths in -4000i64..=4000 {
                let (sign, magnitude) = (if thousandths < 0 { "-" } else { "" }, thousandths.abs());
                let padded = format!("{sign}{}.{:03}", magnitude / 1000, magnitude % 1000);
                let trimmed = padded.trim_end_matches('0').trim_end_matches('.').to_string();
                // value * 10^scale = thousandths * 10^scale / 1000, an integer divisible by `divisor`?
                let scaled = i128::from(thousandths) * 10i128.pow(scale);
                let inside = scaled % 1000 == 0 && (scaled / 1000) % i128::from(divisor) == 0;
                for text in [padded.clone(), trimmed.clone(), format!("{padded}00")] {
                    assert_eq!(full_match(&d, &text), inside, "{text} / {divisor}e-{scale}");
                }
            }
            for text in ["", "-", ".5", "1.", "01.5", "1e2", "0.25e0", "+0.5", "--1"] {
                assert!(!full_match(&d, text), "{text}");
            }
        }
        assert!(ByteDfa::decimal_multiples_scaled(0, 1).is_err());
    }
}
