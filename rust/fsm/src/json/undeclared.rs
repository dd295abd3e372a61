//! JSON keys other than the declared names, in any spelling, built directly: the DFA of
//! `key_not_in(&[])` minus `key_in(names)` without determinizing `key_in`'s regex or searching
//! the product with hashed state tuples (together about 9 µs a state here: 80 ms for 100
//! names, at the first mask of an object that admits extra members).
//!
//! The product's states are few and known in advance. While the bytes read spell a prefix of
//! some declared name, the spelling trie's node says where (its any-key state follows from the
//! bytes, since any-key is deterministic); once they leave the trie, only the any-key state
//! matters. So the states are the trie's nodes plus one "left the names" state per any-key
//! state, and the closing quote after a whole declared name is the one transition removed.

use std::sync::OnceLock;

use super::keys::key_not_in;
use super::text::short_escape;
use crate::dfa::classes::classes_refined;
use crate::dfa::{ByteDfa, CompileLimits, DEAD};
use crate::error::FsmError;

/// The DFA of JSON keys (with quotes) whose decoded text is none of `declared`, however its
/// characters are written (raw, short escape, `\u` escape in either case, surrogate pairs):
/// the language of `key_not_in(declared)` and of the product `key_not_in(&[])` minus
/// `key_in(declared)`. `AutomatonTooLarge` past `max_states` states.
pub fn undeclared_key_dfa(declared: &[&str], max_states: usize) -> Result<ByteDfa, FsmError> {
    undeclared_key_dfa_and_twins(declared, max_states).map(|keys| keys.dfa)
}

/// [`undeclared_key_dfa`] with its states' twins.
#[derive(Debug)]
pub struct TwinnedKeyDfa {
    pub dfa: ByteDfa,
    /// Per state, its *twin* ([`DEAD`] for none): for a state inside the declared names'
    /// spellings, the state that has left the names at the same any-key state. The two take
    /// the same bytes to the same states except along a declared name's spelling (where this
    /// state goes on in the names and the twin has left them) and on the closing quote after a
    /// whole name (dead here only): a twin's token mask is this state's but for tokens
    /// spelling a name.
    pub twins: Vec<u32>,
    /// States from here on have left the names: state `first_free + k` is any-key's state k
    /// (the same automaton in every such DFA of the process, so its masks can be shared).
    pub first_free: u32,
    /// Per state, a lower bound on the fewest bytes to an accepting state, exact where 0 and
    /// past the names: its any-key state's distance (a name's state takes what any-key takes
    /// but a closing quote after a whole name, so it is never nearer). Read off any-key's
    /// distances instead of a search of the whole table, which cost more than its build.
    pub accept_distance_bounds: Vec<u16>,
}

/// [`undeclared_key_dfa`] with its states' twins ([`TwinnedKeyDfa`]).
pub fn undeclared_key_dfa_and_twins(declared: &[&str], max_states: usize) -> Result<TwinnedKeyDfa, FsmError> {
    static ANY_KEY: OnceLock<Result<(ByteDfa, Vec<u16>), FsmError>> = OnceLock::new();
    let any_key = ANY_KEY.get_or_init(|| {
        let dfa = ByteDfa::build(&key_not_in(&[]), &CompileLimits::default())?;
        let distances = dfa.accept_distances();
        Ok((dfa, distances))
    });
    let (any_key, any_distances) = any_key.as_ref().map_err(Clone::clone)?;
    let trie = SpellingTrie::new(declared, max_states)?;
    let too_large = || FsmError::AutomatonTooLarge { what: "undeclared key DFA", limit: max_states };
    let num_states = trie.num_nodes() + any_key.num_states();
    if num_states > max_states {
        return Err(too_large());
    }
    // Classes: any-key's, with each byte some spelling uses in a class of its own.
    let mut used = [false; 256];
    for &(byte, _, _) in &trie.edges {
        used[byte as usize] = true;
    }
    let (classes, num_classes, class_len, class_byte) = classes_refined(any_key, |byte| used[byte as usize]);
    // Each trie node's any-key state, from the root (the start) down its edges.
    let mut any_state = vec![DEAD; trie.num_nodes()];
    any_state[0] = any_key.start();
    let mut order = vec![0u32];
    let mut head = 0;
    while head < order.len() {
        let node = order[head] as usize;
        head += 1;
        for (byte, child) in trie.edges_of(node as u32) {
            if any_state[child as usize] == DEAD {
                let next = any_key.next(any_state[node], byte);
                if next == DEAD {
                    return Err(FsmError::Invariant("a declared name's spelling is not a JSON key".into()));
                }
                any_state[child as usize] = next;
                order.push(child);
            }
        }
    }
    let left = |state: u32| (trie.num_nodes() + state as usize) as u32;
    // The "left the names" rows: any-key's, renumbered. A trie node's row is its any-key
    // state's (a byte off the names leaves them) with its own edges and the removed quote
    // written over: a copy instead of a lookup per class (most nodes are partial `\u`
    // spellings), into a table written once, not filled first.
    let mut left_rows = Vec::with_capacity(any_key.num_states() * num_classes);
    for state in 0..any_key.num_states() as u32 {
        left_rows.extend(class_byte.iter().map(|&byte| match any_key.next(state, byte) {
            DEAD => DEAD,
            next => left(next),
        }));
    }
    let quote_class = classes[b'"' as usize] as usize;
    let mut trans = Vec::with_capacity(num_states * num_classes);
    for node in 0..trie.num_nodes() {
        let start = trans.len();
        trans.extend_from_slice(&left_rows[any_state[node] as usize * num_classes..][..num_classes]);
        let row = &mut trans[start..];
        // NOTE: a spelling byte has a class of its own, and any-key takes it (checked above).
        for (byte, child) in trie.edges_of(node as u32) {
            row[classes[byte as usize] as usize] = child;
        }
        if trie.declared[node] {
            // The closing quote after a whole declared name: the one key taken out.
            row[quote_class] = DEAD;
        }
    }
    trans.extend_from_slice(&left_rows);
    let mut accepting = vec![false; trie.num_nodes()];
    accepting.extend((0..any_key.num_states() as u32).map(|state| any_key.is_accepting(state)));
    let mut twins: Vec<u32> = any_state.iter().map(|&state| left(state)).collect();
    twins.resize(num_states, DEAD);
    let accept_distance_bounds: Vec<u16> = any_state
        .iter()
        .copied()
        .chain(0..any_key.num_states() as u32)
        .map(|s| any_distances[s as usize])
        .collect();
    let dfa = ByteDfa::from_live_table(classes, num_classes, class_len, class_byte, trans, accepting)?;
    Ok(TwinnedKeyDfa { dfa, twins, first_free: left(0), accept_distance_bounds })
}

/// Every spelling of the declared names (with the opening quote), one node per decoded prefix
/// at character boundaries and per partial spelling of a character inside them.
///
/// A node's edges and characters are linked lists in shared arrays: nodes are many (half a
/// dozen per character, most of them partial `\u` spellings) with a handful of edges each, and
/// a list per node cost more in allocations than the rest of the build.
struct SpellingTrie {
    /// Per node: its first edge and first character ([`NO_LINK`] for none).
    first_edge: Vec<u32>,
    first_char: Vec<u32>,
    /// Per node: a character boundary where a whole declared name ends.
    declared: Vec<bool>,
    /// (byte, child, the node's next edge).
    edges: Vec<(u8, u32, u32)>,
    /// At a character boundary: (character, the boundary after it, the node's next one).
    chars: Vec<(char, u32, u32)>,
}

/// The end of a node's list in [`SpellingTrie`].
const NO_LINK: u32 = u32::MAX;

impl SpellingTrie {
    fn new(declared: &[&str], max_states: usize) -> Result<Self, FsmError> {
        // About seven nodes per character (the raw byte and a shared `\u00` chain).
        let capacity = 2 + 7 * declared.iter().map(|name| name.len()).sum::<usize>().min(max_states);
        let mut trie = SpellingTrie {
            first_edge: Vec::with_capacity(capacity),
            first_char: Vec::with_capacity(capacity),
            declared: Vec::with_capacity(capacity),
            edges: Vec::with_capacity(capacity * 2),
            chars: Vec::new(),
        };
        trie.add(max_states)?;
        trie.add(max_states)?;
        trie.push_edge(0, b'"', 1);
        for name in declared {
            let mut at = 1u32;
            for c in name.chars() {
                let after = match trie.char_after(at, c) {
                    Some(after) => after,
                    None => {
                        let after = trie.add(max_states)?;
                        trie.chars.push((c, after, trie.first_char[at as usize]));
                        trie.first_char[at as usize] = trie.chars.len() as u32 - 1;
                        for spelling in spellings_of(c).iter() {
                            trie.insert(at, spelling, after, max_states)?;
                        }
                        after
                    }
                };
                at = after;
            }
            trie.declared[at as usize] = true;
        }
        Ok(trie)
    }

    fn num_nodes(&self) -> usize {
        self.first_edge.len()
    }

    fn add(&mut self, max_states: usize) -> Result<u32, FsmError> {
        if self.num_nodes() >= max_states {
            return Err(FsmError::AutomatonTooLarge { what: "undeclared key DFA", limit: max_states });
        }
        self.first_edge.push(NO_LINK);
        self.first_char.push(NO_LINK);
        self.declared.push(false);
        Ok(self.num_nodes() as u32 - 1)
    }

    /// `node`'s (byte, child) edges.
    fn edges_of(&self, node: u32) -> impl Iterator<Item = (u8, u32)> + '_ {
        let mut link = self.first_edge[node as usize];
        std::iter::from_fn(move || {
            let &(byte, child, next) = self.edges.get(link as usize)?;
            link = next;
            Some((byte, child))
        })
    }

    fn edge(&self, node: u32, byte: u8) -> Option<u32> {
        self.edges_of(node).find(|&(b, _)| b == byte).map(|(_, child)| child)
    }

    fn push_edge(&mut self, node: u32, byte: u8, child: u32) {
        self.edges.push((byte, child, self.first_edge[node as usize]));
        self.first_edge[node as usize] = self.edges.len() as u32 - 1;
    }

    fn char_after(&self, node: u32, c: char) -> Option<u32> {
        let mut link = self.first_char[node as usize];
        while let Some(&(known, after, next)) = self.chars.get(link as usize) {
            if known == c {
                return Some(after);
            }
            link = next;
        }
        None
    }

    /// One spelling (a byte set per position: a hex letter in both cases) from boundary `from`
    /// to boundary `to`; partial spellings are shared by canonical byte (spellings of different
    /// characters agree on a prefix only where they mean the same, the code being prefix-free,
    /// so a node's edge on a partial spelling's first byte leads to that partial spelling).
    fn insert(
        &mut self,
        from: u32,
        spelling: &[Vec<u8>],
        to: u32,
        max_states: usize,
    ) -> Result<(), FsmError> {
        let mut at = from;
        for (position, bytes) in spelling.iter().enumerate() {
            let next = if position + 1 == spelling.len() {
                to
            } else {
                match self.edge(at, bytes[0]) {
                    Some(next) => next,
                    None => self.add(max_states)?,
                }
            };
            for &byte in bytes {
                match self.edge(at, byte) {
                    Some(existing) if existing != next => {
                        return Err(FsmError::Invariant("two spellings of key characters collide".into()))
                    }
                    Some(_) => {}
                    None => self.push_edge(at, byte, next),
                }
            }
            at = next;
        }
        Ok(())
    }
}

/// [`spellings`] of `c`, kept for ASCII characters (names are mostly ASCII, and each
/// spelling is a dozen small buffers).
fn spellings_of(c: char) -> std::borrow::Cow<'static, [Vec<Vec<u8>>]> {
    static ASCII: OnceLock<Vec<Vec<Vec<Vec<u8>>>>> = OnceLock::new();
    if c.is_ascii() {
        let table = ASCII.get_or_init(|| (0..128u8).map(|b| spellings(char::from(b))).collect());
        std::borrow::Cow::Borrowed(&table[c as usize])
    } else {
        std::borrow::Cow::Owned(spellings(c))
    }
}

/// Every way a JSON string writes `c`: raw UTF-8 (not `"`, `\` or a control character), a short
/// escape, `\u` escapes of its UTF-16 units with hex letters in either case.
fn spellings(c: char) -> Vec<Vec<Vec<u8>>> {
    let mut forms = Vec::new();
    if c != '"' && c != '\\' && (c as u32) >= 0x20 {
        let mut buffer = [0u8; 4];
        forms.push(c.encode_utf8(&mut buffer).bytes().map(|b| vec![b]).collect());
    }
    if let Some(letter) = short_escape(c) {
        forms.push(vec![vec![b'\\'], vec![letter as u8]]);
    }
    let mut units = [0u16; 2];
    let mut escaped = Vec::new();
    for &unit in c.encode_utf16(&mut units).iter() {
        escaped.push(vec![b'\\']);
        escaped.push(vec![b'u']);
        for digit in format!("{unit:04x}").bytes() {
            escaped.push(if digit.is_ascii_alphabetic() {
                vec![digit, digit.to_ascii_uppercase()]
            } else {
                vec![digit]
            });
        }
    }
    forms.push(escaped);
    forms
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::json::key_in;

    fn full_match(dfa: &ByteDfa, text: &[u8]) -> bool {
        dfa.matches(text)
    }

    /// The product the grammar path built before: any key minus every spelling of the names.
    fn product(names: &[&str]) -> ByteDfa {
        let limits = CompileLimits::default();
        let any_key = ByteDfa::build(&key_not_in(&[]), &limits).unwrap();
        if names.is_empty() {
            return any_key;
        }
        let declared = ByteDfa::build(&key_in(names), &limits).unwrap();
        ByteDfa::intersect(&[&any_key], &[&declared], 1 << 20).unwrap()
    }

    #[test]
    fn declared_names_are_out_in_every_spelling() {
        let dfa = undeclared_key_dfa(&["error", "é", "a\"b", "😀"], 1 << 20).unwrap();
        assert!(crate::dfa::every_state_is_live(&dfa));
        for key in [r#""error""#, r#""\u0065rror""#, r#""\u0065\u0072ror""#, r#""\u00e9""#, r#""\u00E9""#] {
            assert!(!full_match(&dfa, key.as_bytes()), "{key}");
        }
        for key in ["\"é\"", r#""a\"b""#, r#""a\u0022b""#, "\"😀\"", r#""\ud83d\ude00""#, r#""\uD83D\uDE00""#]
        {
            assert!(!full_match(&dfa, key.as_bytes()), "{key}");
        }
        for key in
            [r#""errors""#, r#""erro""#, r#""""#, r#""\u0065rrorx""#, "\"éé\"", r#""a\\b""#, r#""\ud83d""#]
        {
            assert!(full_match(&dfa, key.as_bytes()), "{key}");
        }
        assert!(!full_match(&dfa, br#""error"#) && !full_match(&dfa, br#""\u006""#));
        // Every state is live: the product kept only those, and so many.
        assert!(dfa.accept_distances().iter().all(|&d| d != u16::MAX));
    }

    #[test]
    fn too_many_states_is_a_typed_error() {
        let names: Vec<String> = (0..100).map(|i| format!("name_{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        assert!(matches!(undeclared_key_dfa(&refs, 50), Err(FsmError::AutomatonTooLarge { .. })));
    }

    fn name_char() -> impl Strategy<Value = char> {
        prop_oneof![
            4 => prop::sample::select(vec!['a', 'b', 'e', 'A', '"', '\\', '/', '\n', '\u{1}', 'é', '😀', ' ']),
        ]
    }

    /// A spelling of `text`: each character raw, short-escaped or `\u`-escaped, by `choices`.
    fn spell(text: &str, choices: &[u8]) -> String {
        let mut out = String::from("\"");
        for (i, c) in text.chars().enumerate() {
            let forms = spellings(c);
            let form = &forms[choices.get(i).copied().unwrap_or(0) as usize % forms.len()];
            let bytes: Vec<u8> = form
                .iter()
                .enumerate()
                .map(|(j, set)| set[(choices.get(i + j).copied().unwrap_or(0) as usize) % set.len()])
                .collect();
            out.push_str(std::str::from_utf8(&bytes).unwrap());
        }
        out.push('"');
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Built directly, the same language as the product of regex DFAs, on the names'
        /// spellings, their neighbours and random keys.
        #[test]
        fn agrees_with_the_regex_product(
            names in proptest::collection::vec(proptest::collection::vec(name_char(), 0..4), 0..5),
            keys in proptest::collection::vec(proptest::collection::vec(name_char(), 0..5), 0..6),
            choices in proptest::collection::vec(any::<u8>(), 12),
        ) {
            let names: Vec<String> = names.into_iter().map(|n| n.into_iter().collect()).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let direct = undeclared_key_dfa(&refs, 1 << 20).unwrap();
            prop_assert!(crate::dfa::every_state_is_live(&direct), "{:?}", refs);
            let expected = product(&refs);
            let mut texts: Vec<String> = Vec::new();
            for name in names.iter().chain(keys.iter().map(|k| k.iter().collect::<String>()).collect::<Vec<_>>().iter()) {
                texts.push(spell(name, &choices));
                texts.push(spell(&format!("{name}a"), &choices));
                let spelled = spell(name, &choices);
                texts.push(spelled[..spelled.len() - 1].to_string());
                texts.push(format!("{}x\"", &spelled[..spelled.len() - 1]));
            }
            for text in texts {
                prop_assert_eq!(full_match(&direct, text.as_bytes()), full_match(&expected, text.as_bytes()), "{:?} {}", refs, text);
                let (a, b) = (direct.walk(direct.start(), text.as_bytes()), expected.walk(expected.start(), text.as_bytes()));
                prop_assert_eq!(a == DEAD, b == DEAD, "{:?} {}", refs, text);
            }
        }

        /// A state and its twin go the same way on every byte except where the state goes on
        /// in the names (to a state whose twin is the twin's successor) or drops a whole
        /// name's closing quote; twins have no twins.
        #[test]
        fn twins_differ_only_along_the_names(
            names in proptest::collection::vec(proptest::collection::vec(name_char(), 0..4), 0..5),
        ) {
            let names: Vec<String> = names.into_iter().map(|n| n.into_iter().collect()).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let TwinnedKeyDfa { dfa, twins, first_free, accept_distance_bounds: bounds } =
                undeclared_key_dfa_and_twins(&refs, 1 << 20).unwrap();
            prop_assert!((first_free..dfa.num_states() as u32).all(|s| twins[s as usize] == DEAD));
            let exact = dfa.accept_distances();
            for (state, (&bound, &distance)) in bounds.iter().zip(&exact).enumerate() {
                prop_assert!(bound <= distance && (bound == 0) == (distance == 0), "{:?} state {}", refs, state);
                prop_assert!(state < first_free as usize || bound == distance, "{:?} state {}", refs, state);
            }
            prop_assert_eq!(twins.len(), dfa.num_states());
            prop_assert!(twins[dfa.start() as usize] != DEAD);
            for state in 0..dfa.num_states() as u32 {
                let twin = twins[state as usize];
                if twin == DEAD {
                    continue;
                }
                prop_assert_eq!(twins[twin as usize], DEAD);
                prop_assert_eq!(dfa.is_accepting(state), dfa.is_accepting(twin));
                for byte in 0..=255u8 {
                    let (own, other) = (dfa.next(state, byte), dfa.next(twin, byte));
                    let along = own != DEAD && twins[own as usize] == other;
                    let closed = own == DEAD && byte == b'"' && other != DEAD && dfa.is_accepting(other);
                    prop_assert!(own == other || along || closed, "{:?} state {} byte {}", refs, state, byte);
                }
            }
        }
    }
}
