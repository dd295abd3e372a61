//! One walk for many boundaries where a lexeme ends in the same state.
//!
//! A boundary walk (`mask/boundary_walk.rs`) steps the parser through the subtree of every trie
//! node where a lexeme may end with more bytes to come. Inside a string value that is about 90 nodes (every
//! token with a closing quote part-way: `",`, `ing"}`, `")`, ...) and 600 Earley steps, after a
//! number about 110 (`1,`, `25}`, ...), and it is redone for every new parse context: the
//! commonest slow mask. Yet at all boundaries where the lexeme's DFA ends in one state, the
//! parser is in the same position up to set numbering (the lexeme's items completed, and still
//! inside in that state if it goes on), provided nothing else began on the way: no other live
//! lexeme ends on the path, and where this one could already end earlier on it (a number's
//! shorter digits), whatever follows it dies on the rest of the path. What follows the boundary
//! then depends only on the bytes after it. So the tokens below a group of such boundaries are
//! put in one small trie under a single path (the shortest one's), their suffixes merged, and
//! walked once: each suffix is stepped once, not once per boundary that has it. The groups
//! depend on the lexeme state; the trie on the group and the vocabulary only, so lexeme states
//! of any schema with the same group (every string body's closing quotes) share one.

use rustc_hash::FxHashMap;
use sglr_fsm::{ByteDfa, DEAD};
use sglr_vocab::TokenTrie;

/// Most tokens a suffix trie holds (past it the boundaries are walked one by one).
const MAX_SUFFIX_TOKENS: usize = 1 << 16;

/// Fewest boundaries worth a suffix trie (a key or an enum value ends at one or two nodes, a
/// string body at about ninety at cl100k).
pub(crate) const MIN_GROUPED: usize = 3;

#[derive(Debug)]
pub(crate) struct SuffixTrie {
    /// Every token below a grouped boundary, spelled as the shortest boundary's path followed
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

/// A boundary of a group: its trie node, its path from the root, and the lengths of the path's
/// proper prefixes where the lexeme could already end.
#[derive(Debug)]
pub(crate) struct Member {
    pub boundary: u32,
    pub path: Vec<u8>,
    pub ends_before: Vec<u16>,
}

/// The boundaries of DFA state `state` among `boundaries` (ascending trie nodes) grouped by the
/// state they end in, groups of at least [`MIN_GROUPED`]. A boundary whose path could end the
/// lexeme earlier joins only when `state` itself accepts (the lexeme's successors are then in
/// the committed chart, where the caller finds them to check they die on the rest of the path).
/// Other live lexeme states must not end on the paths either, which the caller checks.
pub(crate) fn boundary_groups(
    dfa: &ByteDfa,
    state: u32,
    trie: &TokenTrie,
    boundaries: &[u32],
) -> Vec<Vec<Member>> {
    if boundaries.len() < MIN_GROUPED {
        return Vec::new();
    }
    let may_end_here = dfa.is_accepting(state);
    let mut by_end: FxHashMap<u32, Vec<Member>> = FxHashMap::default();
    'members: for (boundary, path) in boundary_paths(trie, boundaries) {
        let mut current = state;
        let mut ends_before = Vec::new();
        for (offset, &byte) in path.iter().enumerate() {
            current = dfa.next(current, byte);
            if current == DEAD {
                continue 'members;
            }
            if offset + 1 < path.len() && dfa.is_accepting(current) {
                if !may_end_here {
                    continue 'members;
                }
                ends_before.push(offset as u16 + 1);
            }
        }
        if dfa.is_accepting(current) {
            by_end.entry(current).or_default().push(Member { boundary, path, ends_before });
        }
    }
    let mut groups: Vec<Vec<Member>> = by_end.into_values().filter(|g| g.len() >= MIN_GROUPED).collect();
    groups.sort_unstable_by_key(|group| group[0].boundary);
    groups
}

/// The suffix trie of a group ([`boundary_groups`]): it depends on the group's boundaries and
/// the vocabulary only. `None` past [`MAX_SUFFIX_TOKENS`] or with no token below.
pub(crate) fn suffix_trie(trie: &TokenTrie, group: &[Member]) -> Option<SuffixTrie> {
    let shortest = group.iter().min_by_key(|member| member.path.len()).map(|member| member.path.clone())?;
    let mut pairs: Vec<(u32, Vec<u8>)> = Vec::new();
    for member in group {
        let boundary = member.boundary as usize;
        let base_depth = trie.nodes[boundary].depth as usize;
        let mut suffix = shortest.clone();
        for index in boundary + 1..trie.nodes[boundary].subtree_end as usize {
            let node = trie.nodes[index];
            suffix.truncate(shortest.len() + node.depth as usize - base_depth - 1);
            suffix.push(node.byte);
            let tokens = node.token_start as usize..trie.nodes[index + 1].token_start as usize;
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
        paths: group.iter().map(|member| member.path.clone()).collect(),
        grouped: group.iter().map(|member| member.boundary).collect(),
    })
}

/// The key a group's suffix trie is kept under in the vocabulary (its boundaries; the paths
/// follow from them).
pub(crate) fn group_key(group: &[Member]) -> Vec<u8> {
    let mut key = b"sglr-grammar suffix trie\0".to_vec();
    for member in group {
        key.extend_from_slice(&member.boundary.to_le_bytes());
    }
    key
}

/// Each of `nodes` with the bytes of its path from the root.
fn boundary_paths(trie: &TokenTrie, nodes: &[u32]) -> Vec<(u32, Vec<u8>)> {
    nodes.iter().map(|&node| (node, trie.path_bytes(node as usize))).collect()
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
        let groups = boundary_groups(&dfa, body, &trie, &boundaries);
        assert_eq!(groups.len(), 1);
        let suffix = suffix_trie(&trie, &groups[0]).unwrap();
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
    fn boundaries_group_by_end_state_and_earlier_ends_need_an_accepting_start() {
        // Digits: every boundary ends in the same state and could have ended earlier.
        let dfa = ByteDfa::build("[0-9]+", &CompileLimits::default()).unwrap();
        let digits = trie(&["1,", "12,", "123}", "4]", "45,", "9"]);
        let boundaries: Vec<u32> = (1..digits.nodes.len() as u32 - 1)
            .filter(|&i| {
                let node = digits.nodes[i as usize];
                node.byte.is_ascii_digit() && node.subtree_end > i + 1
            })
            .collect();
        // From the start (not accepting), `12` and `123` could end earlier: left out, and the
        // two clean ones are too few.
        assert!(boundary_groups(&dfa, dfa.start(), &digits, &boundaries).is_empty());
        // After a digit (accepting), all of them, with where they could end earlier.
        let after = dfa.next(dfa.start(), b'7');
        let groups = boundary_groups(&dfa, after, &digits, &boundaries);
        assert_eq!(groups.len(), 1);
        let ends: Vec<(Vec<u8>, Vec<u16>)> =
            groups[0].iter().map(|m| (m.path.clone(), m.ends_before.clone())).collect();
        assert!(ends.contains(&(b"123".to_vec(), vec![1, 2])), "{ends:?}");
        assert!(ends.contains(&(b"1".to_vec(), vec![])), "{ends:?}");
        // Two end states: two groups (here too small).
        let dfa = ByteDfa::build(r#""a"b?"#, &CompileLimits::default()).unwrap();
        let other_trie = trie(&["\"a\",", "\"a\"}"]);
        assert!(boundary_groups(&dfa, dfa.start(), &other_trie, &[3]).is_empty());
    }
}
