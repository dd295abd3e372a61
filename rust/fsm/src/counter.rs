//! Counted repetition with the count kept beside the unit's state, not in a table.
//!
//! [`ByteDfa::counted`] writes `open unit{min,max} close` as one block of unit states per count:
//! linear in the bound (`maxLength` 32,767 is a 62 MB table). Yet a count's rows depend only on
//! two facts about it, whether it has reached `min` and whether it is `max` (the top count), so a
//! state is the pair (count, unit state) numbered as that table numbers it, and a step is one
//! step of a *window*: the same table for small bounds, where each count is mapped to one that
//! agrees with it on both facts. [`CountedDfa`] is exact and its size does not grow with the
//! bound.
//!
//! The window also serves token masks: a token of at most `reach` bytes completes at most
//! `reach` units, so two counts whose distances to `min` and to `max` agree up to `reach + 1`
//! allow the same tokens and end the string below the same trie nodes. A window of bounds
//! `min(min, reach + 1)` and `that + min(max - min, reach + 1)` holds one count per such class:
//! a 32k-character value maps its middle counts to one window count (one memoised mask per
//! unit state), and only the `reach` counts next to each bound to counts of their own.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::dfa::{ByteDfa, DEAD};
use crate::error::FsmError;

/// Lower and upper bound of the count (`None`: no upper bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    min: usize,
    max: Option<usize>,
}

impl Bounds {
    /// The last count with states of its own: `max`, or `min` when there is no upper bound
    /// (a word begun there ends there again).
    fn top(&self) -> usize {
        self.max.unwrap_or(self.min)
    }

    /// The smallest bounds that no walk of at most `reach` bytes tells apart from these.
    fn window(&self, reach: usize) -> Bounds {
        let near = reach.saturating_add(1);
        let min = self.min.min(near);
        Bounds { min, max: self.max.map(|max| min + (max - self.min).min(near)) }
    }

    /// The window count of `count` (a count of these bounds) in `window`: same distance to
    /// `min` and to `max`, up to the window's own.
    fn count_in(&self, window: &Bounds, count: usize) -> usize {
        if count < self.min {
            return window.min - (self.min - count).min(window.min);
        }
        match (self.max, window.max) {
            (Some(max), Some(window_max)) => window_max - (max - count).min(window_max - window.min),
            // No upper bound: the only count at or past `min` is the top one.
            _ => window.min,
        }
    }
}

/// Where a state id lies in the table layout of [`ByteDfa::counted`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// `open[..i]` read.
    Open(usize),
    /// Unit state `inner` (numbered among the unit's non-accepting states) at `count`.
    Body { count: usize, inner: usize },
    /// `close[..j + 1]` read.
    Close(usize),
}

/// The numbering of one counted table: `open`, then each count's block, then `close`.
#[derive(Debug, Clone, Copy)]
struct Layout {
    bounds: Bounds,
    open_len: usize,
    num_inner: usize,
    close_len: usize,
}

impl Layout {
    /// States of the top count: its start only, or (neither bound: `{0,}`) a whole block.
    fn top_states(&self) -> usize {
        if self.bounds.max.is_none() && self.bounds.min == 0 {
            self.num_inner
        } else {
            1
        }
    }

    fn after_body(&self) -> u128 {
        self.open_len as u128 + self.bounds.top() as u128 * self.num_inner as u128 + self.top_states() as u128
    }

    fn num_states(&self) -> u128 {
        self.after_body() + self.close_len as u128
    }

    fn place(&self, state: u32) -> Place {
        let state = state as usize;
        if state < self.open_len {
            return Place::Open(state);
        }
        let after_body = self.after_body() as usize;
        if state >= after_body {
            return Place::Close(state - after_body);
        }
        let relative = state - self.open_len;
        Place::Body { count: relative / self.num_inner, inner: relative % self.num_inner }
    }

    fn id(&self, place: Place) -> u32 {
        (match place {
            Place::Open(i) => i,
            Place::Body { count, inner } => self.open_len + count * self.num_inner + inner,
            Place::Close(j) => self.after_body() as usize + j,
        }) as u32
    }
}

/// The counted table of a window's bounds, for masks over tokens of at most `reach` bytes.
#[derive(Debug)]
pub struct CountedWindow {
    /// Unique in the process (never reused): masks of equal windows are shared by it.
    serial: u64,
    reach: usize,
    layout: Layout,
    dfa: ByteDfa,
    distances: OnceLock<Vec<u16>>,
}

impl CountedWindow {
    /// The window's table: its states stand for the counted DFA's (see
    /// [`CountedDfa::window_state`]) for every walk of at most [`CountedWindow::reach`] bytes.
    pub fn dfa(&self) -> &ByteDfa {
        &self.dfa
    }

    pub fn reach(&self) -> usize {
        self.reach
    }

    /// A number no other window of this process has: a state's token mask depends only on the
    /// window's table and the state, so a window met again (the process keeps them by what
    /// they are built from) finds its masks by this number and the state.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// For a state between two words of the unit (its start) inside the count: how many words
    /// must still come before `close` may, and how many at most may (`None`: no bound), as the
    /// window's bounds say (exact for walks of at most `reach` bytes). `None` for any other
    /// state.
    pub fn words_to_come(&self, state: u32) -> Option<(usize, Option<usize>)> {
        match self.layout.place(state) {
            Place::Body { count, inner: 0 } => {
                let bounds = self.layout.bounds;
                Some((bounds.min.saturating_sub(count), bounds.max.map(|max| max - count)))
            }
            _ => None,
        }
    }

    /// [`ByteDfa::accept_distances`] of the window's table, computed once.
    pub fn accept_distances(&self) -> &[u16] {
        self.distances.get_or_init(|| self.dfa.accept_distances())
    }

    pub fn memory_bytes(&self) -> usize {
        self.dfa.memory_bytes() + self.distances.get().map_or(0, |d| d.capacity() * 2)
    }
}

/// Most windows one counted DFA keeps (one per vocabulary's longest token, in practice one).
const MAX_WINDOWS: usize = 8;

/// `open unit{min,max} close` with the count beside the unit's state: the language of
/// [`ByteDfa::counted`], state for state (same ids), in memory that does not grow with the bound.
#[derive(Debug)]
pub struct CountedDfa {
    shape: Shape,
    layout: Layout,
    /// The window every step goes through (reach 0: one count per answer to "reached `min`?"
    /// and "is `max`?").
    stepping: CountedWindow,
    /// Windows for masks, by reach.
    windows: Mutex<Vec<Arc<CountedWindow>>>,
}

/// What every window of one counted DFA is built from, besides its bounds.
#[derive(Debug)]
struct Shape {
    unit: ByteDfa,
    open: Vec<u8>,
    close: Vec<u8>,
    /// `open[0]` may be left out ([`CountedDfa::with_optional_lead`]).
    optional_lead: bool,
    max_states: usize,
}

impl CountedDfa {
    /// The DFA of `open`, then `min` to `max` (`None`: no upper bound) words of `unit`, then
    /// `close`, as [`ByteDfa::counted`] (same conditions and errors); `max_states` bounds each
    /// window's table, and the state ids (which grow with the bound) must fit below `DEAD`.
    pub fn new(
        unit: &ByteDfa,
        min: usize,
        max: Option<usize>,
        open: &[u8],
        close: &[u8],
        max_states: usize,
    ) -> Result<CountedDfa, FsmError> {
        if max.is_some_and(|max| max < min) {
            return Err(FsmError::EmptyLanguage);
        }
        let num_inner = (0..unit.num_states() as u32).filter(|&s| !unit.is_accepting(s)).count();
        let layout =
            Layout { bounds: Bounds { min, max }, open_len: open.len(), num_inner, close_len: close.len() };
        // Refuses what `ByteDfa::counted` refuses (a unit matching the empty string included,
        // so there is at least one inner state to count by).
        let shape = Shape {
            unit: unit.clone(),
            open: open.to_vec(),
            close: close.to_vec(),
            optional_lead: false,
            max_states,
        };
        let stepping = shape.build_window(&layout, 0)?;
        if layout.num_states() >= DEAD as u128 {
            return Err(FsmError::AutomatonTooLarge { what: "counted DFA state ids", limit: DEAD as usize });
        }
        Ok(CountedDfa { shape, layout, stepping, windows: Mutex::new(Vec::new()) })
    }

    /// This DFA with its `open`'s first byte optional (`lead?` then the rest of `open`: a JSON
    /// string after an optional space), for an `open` of at least two bytes: the same states,
    /// with one more edge, from the start past the lead.
    pub fn with_optional_lead(mut self) -> Result<CountedDfa, FsmError> {
        if self.shape.open.len() < 2 {
            return Err(FsmError::UnsupportedRegex("an optional lead needs two opening bytes".into()));
        }
        self.shape.optional_lead = true;
        self.stepping = self.shape.build_window(&self.layout, 0)?;
        self.windows = Mutex::new(Vec::new());
        Ok(self)
    }

    pub fn num_states(&self) -> usize {
        self.layout.num_states() as usize
    }

    pub fn start(&self) -> u32 {
        0
    }

    /// The state of `window` that stands for `state`.
    pub fn window_state(&self, window: &CountedWindow, state: u32) -> u32 {
        let place = match self.layout.place(state) {
            Place::Body { count, inner } => {
                Place::Body { count: self.layout.bounds.count_in(&window.layout.bounds, count), inner }
            }
            other => other,
        };
        window.layout.id(place)
    }

    // NOTE: kept out of line: callers dispatch between this and a table lookup in hot loops.
    #[inline(never)]
    pub fn next(&self, state: u32, byte: u8) -> u32 {
        let window = &self.stepping;
        let (from, window_from) = match self.layout.place(state) {
            Place::Body { count, inner } => {
                let window_count = self.layout.bounds.count_in(&window.layout.bounds, count);
                (Some((count, window_count)), Place::Body { count: window_count, inner })
            }
            other => (None, other),
        };
        let next = window.dfa.next(window.layout.id(window_from), byte);
        if next == DEAD {
            return DEAD;
        }
        let place = match window.layout.place(next) {
            // A window count moves as the true one does: on by a word, or back by one where a
            // word begun at the top count borrows the states of the count below. From `open`,
            // the first count is 0 in both.
            Place::Body { count: window_next, inner } => match from {
                Some((count, window_count)) => {
                    Place::Body { count: count + window_next - window_count, inner }
                }
                None => Place::Body { count: window_next, inner },
            },
            other => other,
        };
        self.layout.id(place)
    }

    #[inline(never)]
    pub fn is_accepting(&self, state: u32) -> bool {
        self.stepping.dfa.is_accepting(self.window_state(&self.stepping, state))
    }

    /// Live successor states of `state` (with repeats, one per byte class).
    pub fn successors(&self, state: u32) -> impl Iterator<Item = u32> + '_ {
        self.stepping.dfa.class_bytes().iter().map(move |&byte| self.next(state, byte)).filter(|&s| s != DEAD)
    }

    /// Whether some byte keeps `state` live.
    pub fn has_successors(&self, state: u32) -> bool {
        self.stepping.dfa.successors(self.window_state(&self.stepping, state)).next().is_some()
    }

    /// The window for tokens of at most `reach` bytes (built on first use, then kept).
    pub fn window(&self, reach: usize) -> Result<Arc<CountedWindow>, FsmError> {
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = windows.iter().find(|w| w.reach == reach) {
            return Ok(found.clone());
        }
        let window = self.shape.shared_window(&self.layout, reach)?;
        if windows.len() >= MAX_WINDOWS {
            windows.remove(0);
        }
        windows.push(window.clone());
        Ok(window)
    }

    pub fn memory_bytes(&self) -> usize {
        let windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        self.shape.unit.memory_bytes()
            + self.stepping.memory_bytes()
            + windows.iter().map(|w| w.memory_bytes()).sum::<usize>()
            + self.shape.open.capacity()
            + self.shape.close.capacity()
    }
}

/// What a window's table is built from: the shape and the window's bounds and reach.
#[derive(PartialEq, Eq, Hash)]
struct WindowKey {
    /// The unit's table as words (`ByteDfa` has no `Hash`), then the shape's other fields.
    unit: Vec<u32>,
    open: Vec<u8>,
    close: Vec<u8>,
    optional_lead: bool,
    max_states: usize,
    bounds: (usize, Option<usize>),
    reach: usize,
}

/// Bytes of windows the process keeps for every counted DFA (past it, the cache starts over).
const MAX_SHARED_WINDOW_BYTES: usize = 64 << 20;

impl Shape {
    /// [`Shape::build_window`], kept for the process: schemas repeat their length bounds
    /// (`maxLength` 255 in many members and schemas), and a window for the vocabulary's longest
    /// token is a table of a few thousand states, which cost more than the first mask that
    /// needs it.
    fn shared_window(&self, layout: &Layout, reach: usize) -> Result<Arc<CountedWindow>, FsmError> {
        type Windows = (rustc_hash::FxHashMap<WindowKey, Arc<CountedWindow>>, usize);
        static WINDOWS: OnceLock<Mutex<Windows>> = OnceLock::new();
        let bounds = layout.bounds.window(reach);
        let key = WindowKey {
            unit: self.unit.table_words(),
            open: self.open.clone(),
            close: self.close.clone(),
            optional_lead: self.optional_lead,
            max_states: self.max_states,
            bounds: (bounds.min, bounds.max),
            reach,
        };
        let windows = WINDOWS.get_or_init(Default::default);
        if let Some(found) = windows.lock().unwrap_or_else(PoisonError::into_inner).0.get(&key) {
            return Ok(found.clone());
        }
        let window = Arc::new(self.build_window(layout, reach)?);
        let mut windows = windows.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, bytes) = &mut *windows;
        // NOTE: a window's accept distances are filled in later, at most doubling its bytes.
        let window_bytes = 2 * window.memory_bytes();
        if *bytes + window_bytes > MAX_SHARED_WINDOW_BYTES {
            kept.clear();
            *bytes = 0;
        }
        *bytes += window_bytes;
        kept.insert(key, window.clone());
        Ok(window)
    }

    /// The counted table of `layout`'s bounds seen through `reach` bytes.
    fn build_window(&self, layout: &Layout, reach: usize) -> Result<CountedWindow, FsmError> {
        let Shape { unit, open, close, optional_lead, max_states } = self;
        let bounds = layout.bounds.window(reach);
        let mut dfa = ByteDfa::counted(unit, bounds.min, bounds.max, open, close, *max_states)?;
        if *optional_lead {
            // NOTE: the table numbers `open[..i]` read as state i, and each opening byte is a
            // class of its own: the start may also take `open[1]` straight to state 2.
            dfa.set_transition(0, open[1], 2);
        }
        static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let serial = SERIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let layout = Layout { bounds, ..*layout };
        Ok(CountedWindow { serial, reach, layout, dfa, distances: OnceLock::new() })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::dfa::CompileLimits;

    const STRING_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;

    fn unit() -> ByteDfa {
        ByteDfa::build(STRING_CHAR, &CompileLimits::default()).unwrap()
    }

    /// Bytes that exercise every class of a JSON string character and the quotes.
    const BYTES: &[u8] = b"\"\\aunbt0F/\x01\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";

    fn walk(step: impl Fn(u32, u8) -> u32, mut state: u32, bytes: &[u8]) -> u32 {
        for &byte in bytes {
            state = step(state, byte);
            if state == DEAD {
                break;
            }
        }
        state
    }

    #[test]
    fn a_large_bound_costs_no_more_than_a_small_one() {
        let unit = unit();
        let small = CountedDfa::new(&unit, 50, Some(300), b"\"", b"\"", 1 << 20).unwrap();
        let large = CountedDfa::new(&unit, 50, Some(1_000_000), b"\"", b"\"", 1 << 20).unwrap();
        assert!(large.num_states() > 1_000_000 * 10);
        let reach = 128;
        let (small_window, large_window) = (small.window(reach).unwrap(), large.window(reach).unwrap());
        assert_eq!(small.memory_bytes(), large.memory_bytes());
        assert_eq!(small_window.dfa().num_states(), large_window.dfa().num_states());
        // One million characters, then the close: accepted; one more character: refused.
        let body = large.walk_units(large.walk_units(large.start(), b"\""), &[b'x'; 1_000_000]);
        assert!(large.is_accepting(large.next(body, b'"')));
        assert_eq!(large.next(body, b'y'), DEAD);
        // The middle counts share one window state; the last `reach` each have their own.
        let states: Vec<u32> = [60, 5_000, 900_000, 999_950]
            .iter()
            .map(|&n| {
                large.window_state(&large_window, large.walk_units(0, &[&b"\""[..], &vec![b'x'; n]].concat()))
            })
            .collect();
        assert!(states[..3].iter().all(|&s| s == states[0]) && states[3] != states[0]);
    }

    impl CountedDfa {
        fn walk_units(&self, state: u32, bytes: &[u8]) -> u32 {
            walk(|s, b| self.next(s, b), state, bytes)
        }
    }

    #[test]
    fn an_optional_lead_is_the_regex_with_an_optional_space() {
        let unit = unit();
        for (min, max) in [(0, Some(2)), (1, Some(3)), (2, None), (0, None)] {
            let counted = CountedDfa::new(&unit, min, max, b" \"", b"\"", 1 << 20)
                .unwrap()
                .with_optional_lead()
                .unwrap();
            let bound = max.map_or(String::new(), |max| max.to_string());
            let regex =
                ByteDfa::build(&format!("[ ]?\"{STRING_CHAR}{{{min},{bound}}}\""), &CompileLimits::default())
                    .unwrap();
            let window = counted.window(4).unwrap();
            // Every string over these bytes up to 6 long: the same prefixes live, the same matches.
            let mut frontier: Vec<(Vec<u8>, u32, u32)> = vec![(Vec::new(), counted.start(), regex.start())];
            for _ in 0..6 {
                let mut next = Vec::new();
                for (text, state, expected) in frontier {
                    assert_eq!(counted.is_accepting(state), regex.is_accepting(expected), "{text:?}");
                    let shown = window.dfa().is_accepting(counted.window_state(&window, state));
                    assert_eq!(shown, regex.is_accepting(expected), "window {text:?}");
                    for &byte in b" \"a\\n" {
                        let (stepped, wanted) = (counted.next(state, byte), regex.next(expected, byte));
                        assert_eq!(stepped == DEAD, wanted == DEAD, "{text:?} then {byte}");
                        if stepped != DEAD {
                            next.push(([text.as_slice(), &[byte]].concat(), stepped, wanted));
                        }
                    }
                }
                frontier = next;
            }
        }
        assert!(CountedDfa::new(&unit, 0, Some(1), b"\"", b"\"", 1 << 20)
            .unwrap()
            .with_optional_lead()
            .is_err());
    }

    #[test]
    fn refusals_match_the_table() {
        let unit = unit();
        assert_eq!(
            CountedDfa::new(&unit, 3, Some(2), b"\"", b"\"", 1 << 20).unwrap_err(),
            FsmError::EmptyLanguage
        );
        let empty_word = ByteDfa::build("a?", &CompileLimits::default()).unwrap();
        assert!(matches!(
            CountedDfa::new(&empty_word, 0, Some(2), b"", b"", 1 << 20),
            Err(FsmError::UnsupportedRegex(_))
        ));
        assert!(matches!(
            CountedDfa::new(&unit, 0, Some(usize::MAX / 64), b"\"", b"\"", 1 << 20),
            Err(FsmError::AutomatonTooLarge { .. })
        ));
    }

    proptest! {
        /// Same ids, same steps, same acceptance as the table `ByteDfa::counted` writes.
        #[test]
        fn steps_as_the_table_does(min in 0usize..12, extra in proptest::option::of(0usize..12)) {
            let unit = unit();
            let max = extra.map(|extra| min + extra);
            let table = ByteDfa::counted(&unit, min, max, b"\"", b"\"", 1 << 20).unwrap();
            let counted = CountedDfa::new(&unit, min, max, b"\"", b"\"", 1 << 20).unwrap();
            prop_assert_eq!(counted.num_states(), table.num_states());
            for state in 0..table.num_states() as u32 {
                prop_assert_eq!(counted.is_accepting(state), table.is_accepting(state));
                prop_assert_eq!(counted.has_successors(state), table.successors(state).next().is_some());
                for byte in 0..=255u8 {
                    prop_assert_eq!(counted.next(state, byte), table.next(state, byte), "{} {}", state, byte);
                }
            }
        }

        /// From any state, every walk of at most `reach` bytes through the window's stand-in
        /// dies, lives and accepts where the table's does, and ends the same distance from
        /// acceptance when that distance is within the walk's reach.
        #[test]
        fn windows_stand_in_for_walks_within_reach(
            min in 0usize..14,
            extra in proptest::option::of(0usize..14),
            reach in 0usize..5,
            walks in proptest::collection::vec(proptest::collection::vec(proptest::sample::select(BYTES), 0..5), 1..20),
        ) {
            let unit = unit();
            let max = extra.map(|extra| min + extra);
            let table = ByteDfa::counted(&unit, min, max, b"\"", b"\"", 1 << 20).unwrap();
            let counted = CountedDfa::new(&unit, min, max, b"\"", b"\"", 1 << 20).unwrap();
            let window = counted.window(reach).unwrap();
            let (dfa, distances, table_distances) = (window.dfa(), window.accept_distances(), table.accept_distances());
            for state in 0..table.num_states() as u32 {
                let stand_in = counted.window_state(&window, state);
                for bytes in &walks {
                    let bytes = &bytes[..bytes.len().min(reach)];
                    let (real, seen) = (walk(|s, b| table.next(s, b), state, bytes), walk(|s, b| dfa.next(s, b), stand_in, bytes));
                    prop_assert_eq!(real == DEAD, seen == DEAD, "{} {:?}", state, bytes);
                    if real != DEAD {
                        prop_assert_eq!(table.is_accepting(real), dfa.is_accepting(seen));
                        let left = (reach - bytes.len()) as u16;
                        let (d, e) = (table_distances[real as usize], distances[seen as usize]);
                        prop_assert!(d == e || d > left && e > left, "{} {:?}: {} {}", state, bytes, d, e);
                    }
                }
            }
        }
    }
}
