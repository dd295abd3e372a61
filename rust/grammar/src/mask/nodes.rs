//! Steps over the vocabulary trie's nodes shared by the mask walks: a node's children (all, or
//! those on a few bytes), and its tokens.

use sglr_vocab::TokenTrie;

use super::lexeme_mask::set_ids;

/// Most bytes a state takes (or on which two states part) for a walk to look their children up
/// ([`children_on`]); past it, every child is stepped.
pub(super) const MAX_BYTES_APART: usize = 16;

/// Whether some child of trie node `index` has a byte of `bytes` (a 256-bit set).
pub(super) fn children_take(trie: &TokenTrie, index: usize, bytes: &[u64; 4]) -> bool {
    children_on(trie, index, None).any(|child| {
        let byte = trie.nodes[child].byte;
        bytes[byte as usize >> 6] >> (byte & 63) & 1 == 1
    })
}

/// The children of trie node `index`, ascending: those on `bytes` (ascending, looked up) when
/// given, else every one (each subtree skipped in one jump).
pub(super) fn children_on(
    trie: &TokenTrie,
    index: usize,
    bytes: Option<Vec<u8>>,
) -> impl Iterator<Item = usize> + '_ {
    let end = trie.nodes[index].subtree_end as usize;
    let all = bytes.is_none().then(|| {
        std::iter::successors(Some(index + 1).filter(|&child| child < end), move |&child| {
            Some(trie.nodes[child].subtree_end as usize).filter(|&next| next < end)
        })
    });
    let listed = bytes.map(|bytes| bytes.into_iter().filter_map(move |byte| trie.child(index, byte)));
    listed.into_iter().flatten().chain(all.into_iter().flatten())
}

/// ORs the tokens ending at trie node `index` into `allowed` (and lists them in `token_ids`).
pub(super) fn allow_node_tokens(
    trie: &TokenTrie,
    index: usize,
    allowed: &mut [u32],
    token_ids: Option<&mut Vec<u32>>,
) {
    let start = trie.nodes[index].token_start as usize;
    let stop = trie.nodes[index + 1].token_start as usize;
    set_ids(allowed, &trie.token_ids[start..stop]);
    if let Some(token_ids) = token_ids {
        token_ids.extend_from_slice(&trie.token_ids[start..stop]);
    }
}
