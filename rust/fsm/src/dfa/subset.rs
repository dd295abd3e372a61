//! Subset construction straight from the Thompson NFA, for patterns without look-around.
//!
//! Why not `regex-automata`'s dense builder: it prepares start states for every look-behind
//! context, a quit set and a cache of byte-level scratch per state, which costs 40-50 us even
//! for a key such as `"name"[ ]?:[ ]?` (about 25 states), and a JSON schema holds one lexeme like
//! that per declared key. Here a DFA state is the sorted set of the NFA's consuming states (and
//! its match state) reachable from its entry, each NFA state's epsilon closure is computed once,
//! and a state's successors are gathered per byte class in one pass over its members'
//! transitions. Language semantics (every accepting path counts) hold by construction, which is
//! what `MatchKind::All` gives the dense builder.

use regex_automata::nfa::thompson::{State, NFA};
use regex_automata::util::primitives::StateID;
use rustc_hash::FxHashMap;

use super::classes::class_members;
use super::{ByteDfa, CompileLimits, DEAD};
use crate::error::FsmError;

/// `None` when the NFA holds a look-around assertion (the caller's dense builder handles
/// those); otherwise the DFA of its anchored language, or a typed error past the limits.
pub(crate) fn determinize(nfa: &NFA, limits: &CompileLimits) -> Option<Result<ByteDfa, FsmError>> {
    if !nfa.look_set_any().is_empty() {
        return None;
    }
    Some(Subsets::new(nfa).run(limits))
}

struct Subsets<'a> {
    nfa: &'a NFA,
    classes: [u8; 256],
    num_classes: usize,
    /// `run_end[b]`: the last byte of the run of bytes from `b` on that share `b`'s class.
    run_end: [u8; 256],
    /// Memoised epsilon closures: consuming and match states reachable without a byte.
    closures: Vec<Option<Box<[u32]>>>,
    /// Generation marks for deduplicating a union of closures.
    marks: Vec<u32>,
    generation: u32,
}

impl<'a> Subsets<'a> {
    fn new(nfa: &'a NFA) -> Self {
        let byte_classes = nfa.byte_classes();
        let mut classes = [0u8; 256];
        for byte in 0..=255u8 {
            classes[byte as usize] = byte_classes.get(byte);
        }
        let mut run_end = [255u8; 256];
        for byte in (0..255usize).rev() {
            run_end[byte] = if classes[byte] == classes[byte + 1] { run_end[byte + 1] } else { byte as u8 };
        }
        let num_states = nfa.states().len();
        Self {
            nfa,
            classes,
            num_classes: byte_classes.alphabet_len() - 1,
            run_end,
            closures: vec![None; num_states],
            marks: vec![0; num_states],
            generation: 0,
        }
    }

    /// Computes the epsilon closure of `from` once.
    fn ensure_closure(&mut self, from: StateID) {
        let index = from.as_usize();
        if self.closures[index].is_some() {
            return;
        }
        let mut members = Vec::new();
        self.generation += 1;
        let mut stack = vec![from];
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut self.marks[id.as_usize()], self.generation) == self.generation {
                continue;
            }
            match self.nfa.state(id) {
                State::ByteRange { .. } | State::Sparse(_) | State::Dense(_) | State::Match { .. } => {
                    members.push(id.as_u32())
                }
                State::Union { alternates } => stack.extend(alternates.iter().copied()),
                State::BinaryUnion { alt1, alt2 } => stack.extend([*alt1, *alt2]),
                State::Capture { next, .. } => stack.push(*next),
                // Excluded before construction starts.
                State::Look { .. } => unreachable!("look-around is left to the dense builder"),
                State::Fail => {}
            }
        }
        members.sort_unstable();
        self.closures[index] = Some(members.into_boxed_slice());
    }

    /// The sorted union of the closures of `targets`.
    fn union(&mut self, targets: &[StateID], into: &mut Vec<u32>) {
        for &target in targets {
            self.ensure_closure(target);
        }
        into.clear();
        self.generation += 1;
        let generation = self.generation;
        let Subsets { closures, marks, .. } = self;
        for &target in targets {
            for &member in closures[target.as_usize()].as_deref().unwrap_or(&[]) {
                let mark = &mut marks[member as usize];
                if *mark != generation {
                    *mark = generation;
                    into.push(member);
                }
            }
        }
        into.sort_unstable();
    }

    fn run(mut self, limits: &CompileLimits) -> Result<ByteDfa, FsmError> {
        let num_classes = self.num_classes;
        let too_large = FsmError::AutomatonTooLarge { what: "DFA", limit: limits.dfa_size_limit };
        // Every state's set, end to end in `members` (state s is `members[bounds[s]..bounds[s + 1]]`),
        // and the map back from a set to its state.
        let mut members: Vec<u32> = Vec::new();
        let mut bounds: Vec<usize> = vec![0];
        let mut ids: FxHashMap<Box<[u32]>, u32> = FxHashMap::default();
        let mut union = Vec::new();
        self.union(&[self.nfa.start_anchored()], &mut union);
        members.extend_from_slice(&union);
        bounds.push(members.len());
        ids.insert(union.as_slice().into(), 0);

        let mut raw_trans: Vec<u32> = Vec::new();
        let mut accepting: Vec<bool> = Vec::new();
        let mut targets: Vec<Vec<StateID>> = vec![Vec::new(); num_classes];
        let mut current: Vec<u32> = Vec::new();
        let mut next_to_expand = 0;
        while next_to_expand + 1 < bounds.len() {
            current.clear();
            current.extend_from_slice(&members[bounds[next_to_expand]..bounds[next_to_expand + 1]]);
            next_to_expand += 1;
            targets.iter_mut().for_each(Vec::clear);
            let mut is_accepting = false;
            for &member in &current {
                match self.nfa.state(StateID::new_unchecked(member as usize)) {
                    State::ByteRange { trans } => {
                        self.add_range(&mut targets, trans.start, trans.end, trans.next)
                    }
                    State::Sparse(sparse) => {
                        for trans in sparse.transitions.iter() {
                            self.add_range(&mut targets, trans.start, trans.end, trans.next);
                        }
                    }
                    State::Dense(dense) => {
                        for byte in 0..=255u8 {
                            if let Some(next) = dense.matches_byte(byte) {
                                self.add_range(&mut targets, byte, byte, next);
                            }
                        }
                    }
                    State::Match { .. } => is_accepting = true,
                    _ => {}
                }
            }
            accepting.push(is_accepting);
            for class_targets in &targets {
                if class_targets.is_empty() {
                    raw_trans.push(DEAD);
                    continue;
                }
                self.union(class_targets, &mut union);
                if union.is_empty() {
                    raw_trans.push(DEAD);
                    continue;
                }
                let id = match ids.get(union.as_slice()) {
                    Some(&id) => id,
                    None => {
                        let id = bounds.len() as u32 - 1;
                        if (id as usize + 1) * num_classes * 4 > limits.dfa_size_limit
                            || (members.len() + union.len()) * 8 > limits.determinize_size_limit
                        {
                            return Err(too_large);
                        }
                        members.extend_from_slice(&union);
                        bounds.push(members.len());
                        ids.insert(union.as_slice().into(), id);
                        id
                    }
                };
                raw_trans.push(id);
            }
        }
        let (class_len, class_byte) = class_members(&self.classes, num_classes);
        ByteDfa::from_raw(self.classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
    }

    /// Records `next` under every class that holds a byte of `start..=end`.
    fn add_range(&self, targets: &mut [Vec<StateID>], start: u8, end: u8, next: StateID) {
        let mut byte = start;
        loop {
            let class_targets = &mut targets[self.classes[byte as usize] as usize];
            if class_targets.last() != Some(&next) {
                class_targets.push(next);
            }
            let run_end = self.run_end[byte as usize];
            if run_end >= end {
                break;
            }
            byte = run_end + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::dfa::{ByteDfa, CompileLimits, DEAD};

    /// Both tables hold only live states, so two states pair up exactly when they accept the
    /// same continuations: a walk of the product over every byte checks the languages are equal.
    fn same_language(a: &ByteDfa, b: &ByteDfa) -> Result<(), String> {
        let mut seen = std::collections::HashSet::from([(a.start(), b.start())]);
        let mut queue = vec![(a.start(), b.start())];
        while let Some((x, y)) = queue.pop() {
            if a.is_accepting(x) != b.is_accepting(y) {
                return Err(format!("acceptance differs at states {x} / {y}"));
            }
            for byte in 0..=255u8 {
                let (nx, ny) = (a.next(x, byte), b.next(y, byte));
                if (nx == DEAD) != (ny == DEAD) {
                    return Err(format!("byte {byte:#x} from {x} / {y}: {nx} vs {ny}"));
                }
                if nx != DEAD && seen.insert((nx, ny)) {
                    queue.push((nx, ny));
                }
            }
        }
        Ok(())
    }

    fn check(pattern: &str) {
        let (subset, dense) = ByteDfa::build_both(pattern, &CompileLimits::default()).unwrap();
        if let Err(why) = same_language(&subset, &dense) {
            panic!("{pattern}: {why}");
        }
    }

    #[test]
    fn the_schema_shapes_match_the_dense_builder() {
        for pattern in [
            r#""twitter:image:height"(?:[ ]?):(?:[ ]?)"#,
            r#"(?:"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")"#,
            r#"(?:(?:"SOURCEIP"|"COOKIEINSERT"|"RULE"|"NONE"))"#,
            r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
            r#""(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){2,5}""#,
            r"(?:a|ab)(?:bc|c)?|é+|[\u{10000}-\u{10ffff}]{1,2}|\w{0,3}",
            "",
            "a*",
        ] {
            check(pattern);
        }
    }

    #[test]
    fn look_around_is_left_to_the_dense_builder() {
        let nfa = ByteDfa::nfa(r"a$", &CompileLimits::default()).unwrap();
        assert!(super::determinize(&nfa, &CompileLimits::default()).is_none());
        assert!(ByteDfa::build(r"a$", &CompileLimits::default()).is_ok());
    }

    #[test]
    fn limits_are_typed_errors() {
        let limits = CompileLimits { dfa_size_limit: 4096, ..CompileLimits::default() };
        let nfa = ByteDfa::nfa("[ab]*a[ab]{12}", &limits).unwrap();
        let result = super::determinize(&nfa, &limits).unwrap();
        assert!(matches!(result, Err(crate::FsmError::AutomatonTooLarge { what: "DFA", .. })), "{result:?}");
    }

    fn atom() -> impl Strategy<Value = String> {
        prop_oneof![prop::sample::select(vec![
            "a",
            "b",
            "ab",
            "é",
            "\"",
            "\\\\",
            "\\.",
            "[ab]",
            "[^a]",
            "[a-c0-2]",
            "\\d",
            "[é-ü]",
            "\\u{1F600}",
            "."
        ])
        .prop_map(str::to_string),]
    }

    fn regex() -> impl Strategy<Value = String> {
        atom().prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(|parts| parts.concat()),
                prop::collection::vec(inner.clone(), 2..4)
                    .prop_map(|parts| format!("(?:{})", parts.join("|"))),
                (inner.clone(), prop::sample::select(vec!["*", "+", "?", "{2}", "{0,3}", "{1,}"]))
                    .prop_map(|(part, op)| format!("(?:{part}){op}")),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
        #[test]
        fn random_patterns_match_the_dense_builder(pattern in regex()) {
            check(&pattern);
        }
    }
}
