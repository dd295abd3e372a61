//! One walk for every boundary where a lexeme ends for good.
//!
//! A boundary walk (`mask.rs`) steps the parser through the subtree of every trie node where a
//! lexeme may end with more bytes to come. Inside a string value that is about 90 nodes (every
//! token with a closing quote part-way: `",`, `ing"}`, `")`, ...) and 600 Earley steps, and it
//! is redone for every new parse context: the commonest slow mask. Yet when the lexeme's DFA
//! accepts at such a node and takes no byte more (a *terminal* boundary), and no shorter prefix
//! of its path could end the lexeme, the parser is in the same position at all of them, up to
//! set numbering: the one lexeme item completed there, nothing else begun. What follows then
//! depends only on the bytes after the boundary. So the tokens below all terminal boundaries
//! are put in one small trie under a single path (the shortest boundary's), their suffixes
//! merged, and walked once: each suffix is stepped once, not once per boundary that has it.
//! The trie depends on the lexeme state's boundaries and the vocabulary only, so it is built
//! once and kept with the state's shared lexeme mask.

use sglr_fsm::{ByteDfa, TokenTrie, DEAD};

/// Most tokens a suffix trie holds (past it the boundaries are walked one by one).
const MAX_SUFFIX_TOKENS: usize = 1 << 16;

/// Fewest terminal boundaries worth a suffix trie (a key or an enum value ends at one or two
/// nodes, a string body at about ninety at cl100k).
const MIN_GROUPED: usize = 3;

#[derive(Debug)]
pub(crate) struct SuffixTrie {
    /// Every token below a terminal boundary, spelled as the shortest boundary's path followed
    /// by the token's bytes after its own boundary.
    pub trie: TokenTrie,
    /// The node of `trie` where that path ends: the one boundary to walk.
    pub boundary: u32,
    /// The original boundaries it stands for, ascending, and each one's path from the root
    /// (whoever walks the trie checks that no other live lexeme can end on them).
    pub grouped: Vec<u32>,
    pub paths: Vec<Vec<u8>>,
}

impl SuffixTrie {
    pub fn memory_bytes(&self) -> usize {
        self.trie.memory_bytes()
            + self.grouped.capacity() * 4
            + self.paths.iter().map(|path| path.capacity() + 24).sum::<usize>()
    }
}

/// The terminal boundaries of DFA state `state` among `boundaries` (ascending trie nodes), with
/// their paths, if at least [`MIN_GROUPED`] of them may stand for each other (as far as this
/// state goes: other live lexeme states must not end on the paths, which the caller checks).
pub(crate) fn terminal_group(
    dfa: &ByteDfa,
    state: u32,
    trie: &TokenTrie,
    boundaries: &[u32],
) -> Option<Vec<(u32, Vec<u8>)>> {
    // NOTE: a lexeme that may end at the token's start (an accepting state) completes in the
    // committed chart, where the bytes could go on in another lexeme as well; only pure
    // in-lexeme paths are told apart by their last state alone.
    if boundaries.len() < MIN_GROUPED || dfa.is_accepting(state) {
        return None;
    }
    let grouped: Vec<(u32, Vec<u8>)> = boundary_paths(trie, boundaries)
        .into_iter()
        .filter(|(_, path)| is_clean_terminal(dfa, state, path))
        .collect();
    (grouped.len() >= MIN_GROUPED).then_some(grouped)
}

/// The suffix trie of a [`terminal_group`]: it depends on the group and the vocabulary only, so
/// the lexeme states of every schema whose group is the same (every string body's closing
/// quotes) share one. `None` past [`MAX_SUFFIX_TOKENS`] or with no token below.
pub(crate) fn suffix_trie(trie: &TokenTrie, grouped: &[(u32, Vec<u8>)]) -> Option<SuffixTrie> {
    let shortest = grouped.iter().min_by_key(|(_, path)| path.len()).map(|(_, path)| path.clone())?;
    let mut pairs: Vec<(u32, Vec<u8>)> = Vec::new();
    for (boundary, _) in grouped {
        let boundary = *boundary as usize;
        let base_depth = trie.nodes[boundary].depth as usize;
        let mut suffix = shortest.clone();
        for index in boundary + 1..trie.nodes[boundary].subtree_end as usize {
            let node = trie.nodes[index];
            suffix.truncate(shortest.len() + node.depth as usize - base_depth - 1);
            suffix.push(node.byte);
            let tokens = trie.nodes[index].token_start as usize..trie.nodes[index + 1].token_start as usize;
            for &token in &trie.token_ids[tokens] {
                pairs.push((token, suffix.clone()));
            }
        }
        if pairs.len() > MAX_SUFFIX_TOKENS {
            return None;
        }
    }
    if pairs.is_empty() {
        return None;
    }
    Some(SuffixTrie {
        trie: TokenTrie::build(pairs.iter().map(|(token, bytes)| (*token, bytes.as_slice()))),
        // Every token starts with `shortest`: its nodes are the chain 1..=len from the root.
        boundary: shortest.len() as u32,
        paths: grouped.iter().map(|(_, path)| path.clone()).collect(),
        grouped: grouped.iter().map(|(boundary, _)| *boundary).collect(),
    })
}

/// The key a [`terminal_group`]'s suffix trie is kept under in the vocabulary.
pub(crate) fn group_key(grouped: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut key = b"sglr-grammar suffix trie\0".to_vec();
    for (boundary, path) in grouped {
        key.extend_from_slice(&boundary.to_le_bytes());
        key.extend_from_slice(&(path.len() as u32).to_le_bytes());
        key.extend_from_slice(path);
    }
    key
}

/// Whether `path` from `state` ends where the DFA accepts and takes no byte more, with no
/// accepting state before (so the lexeme ends there and nowhere earlier on the path).
fn is_clean_terminal(dfa: &ByteDfa, state: u32, path: &[u8]) -> bool {
    let mut current = state;
    for (offset, &byte) in path.iter().enumerate() {
        current = dfa.next(current, byte);
        if current == DEAD {
            return false;
        }
        if offset + 1 < path.len() && dfa.is_accepting(current) {
            return false;
        }
    }
    dfa.is_accepting(current) && dfa.successors(current).next().is_none()
}

/// Each of `nodes` (ascending trie nodes) with the bytes of its path from the root: one walk
/// that enters only the subtrees holding one.
fn boundary_paths(trie: &TokenTrie, nodes: &[u32]) -> Vec<(u32, Vec<u8>)> {
    let mut paths = Vec::with_capacity(nodes.len());
    let mut path: Vec<u8> = Vec::new();
    let mut next = 0;
    let mut index = 1;
    while next < nodes.len() && index < trie.nodes.len() - 1 {
        let node = trie.nodes[index];
        let target = nodes[next] as usize;
        if target < index {
            // Not a node of this trie's walk order (cannot happen for sorted boundaries).
            next += 1;
            continue;
        }
        if target >= node.subtree_end as usize {
            index = node.subtree_end as usize;
            continue;
        }
        path.truncate(node.depth as usize - 1);
        path.push(node.byte);
        if target == index {
            paths.push((index as u32, path.clone()));
            next += 1;
        }
        index += 1;
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use sglr_fsm::CompileLimits;

    fn trie(texts: &[&str]) -> TokenTrie {
        TokenTrie::build(texts.iter().enumerate().map(|(id, text)| (id as u32, text.as_bytes())))
    }

    #[test]
    fn paths_of_nodes_follow_the_trie() {
        let trie = trie(&["a", "ab\"", "ab\",", "b\"}", "\""]);
        let all: Vec<u32> = (1..trie.nodes.len() as u32 - 1).collect();
        for (node, path) in boundary_paths(&trie, &all) {
            assert_eq!(trie.nodes[node as usize].depth as usize, path.len());
            assert_eq!(*path.last().unwrap(), trie.nodes[node as usize].byte);
        }
        assert_eq!(boundary_paths(&trie, &all).len(), all.len());
    }

    #[test]
    fn terminal_boundaries_share_one_walk_with_merged_suffixes() {
        // A string body: every closing quote is a terminal end.
        let dfa = ByteDfa::build(r#""[a-z]*""#, &CompileLimits::default()).unwrap();
        let body = dfa.walk(dfa.start(), b"\"");
        let trie = trie(&["\",", "\"}", "ab\",", "ab\"]", "x\",", "ab", "\""]);
        // Boundaries: nodes after a closing quote that have children.
        let boundaries: Vec<u32> = (1..trie.nodes.len() as u32 - 1)
            .filter(|&i| {
                let node = trie.nodes[i as usize];
                node.byte == b'"' && node.subtree_end > i + 1
            })
            .collect();
        assert_eq!(boundaries.len(), 3);
        let group = terminal_group(&dfa, body, &trie, &boundaries).unwrap();
        let suffix = suffix_trie(&trie, &group).unwrap();
        assert_eq!(suffix.grouped, boundaries);
        // The shortest path is `"` itself; below it `,` (three tokens), `}` and `]`.
        assert_eq!(suffix.boundary, 1);
        let mut below: Vec<(String, Vec<u32>)> = Vec::new();
        for index in 2..suffix.trie.nodes.len() - 1 {
            let node = suffix.trie.nodes[index];
            let tokens = node.token_start as usize..suffix.trie.nodes[index + 1].token_start as usize;
            below.push(((node.byte as char).to_string(), suffix.trie.token_ids[tokens].to_vec()));
        }
        assert_eq!(
            below,
            vec![(",".to_string(), vec![0, 2, 4]), ("]".to_string(), vec![3]), ("}".to_string(), vec![1])]
        );
    }

    #[test]
    fn an_end_that_could_go_on_or_an_earlier_end_is_not_grouped() {
        // `"a"` may be followed by more (`"a"b`): not terminal.
        let dfa = ByteDfa::build(r#""a"b?"#, &CompileLimits::default()).unwrap();
        let trie = trie(&["\"a\",", "\"a\"}"]);
        let boundaries = vec![3];
        assert!(terminal_group(&dfa, dfa.start(), &trie, &boundaries).is_none());
        // An accepting state before the end of the path.
        let dfa = ByteDfa::build(r#"a|a""#, &CompileLimits::default()).unwrap();
        assert!(!is_clean_terminal(&dfa, dfa.start(), b"a\""));
        assert!(is_clean_terminal(&ByteDfa::build(r#"a""#, &CompileLimits::default()).unwrap(), 0, b"a\""));
    }
}
