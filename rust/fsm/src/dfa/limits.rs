//! The size bounds of automaton construction.

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
