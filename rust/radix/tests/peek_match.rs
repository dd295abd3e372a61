//! `peek_match_len` answers what `match_prefix_len` answers, and leaves the tree as it was:
//! the same nodes, and the same leaves evicted in the same order.

use proptest::prelude::*;
use sglr_radix::{RadixTree, TokenId};

fn seq() -> impl Strategy<Value = Vec<TokenId>> {
    // A 3-letter alphabet makes shared prefixes and mid-edge ends common.
    prop::collection::vec(0u32..3, 0..12)
}

fn build(inserted: &[Vec<TokenId>]) -> RadixTree {
    let mut tree = RadixTree::new();
    let mut next_slot = 1;
    for tokens in inserted {
        let slots: Vec<u32> = (0..tokens.len() as u32).map(|i| next_slot + i).collect();
        next_slot += tokens.len() as u32;
        tree.insert(None, tokens, &slots).unwrap();
    }
    tree
}

proptest! {
    #[test]
    fn peek_equals_match_and_changes_nothing(
        inserted in prop::collection::vec(seq(), 0..12),
        queries in prop::collection::vec(seq(), 1..8),
    ) {
        let mut peeked = build(&inserted);
        let mut matched = build(&inserted);
        let mut untouched = build(&inserted);
        let before = peeked.dump(None);
        for query in &queries {
            prop_assert_eq!(peeked.peek_match_len(None, query), matched.match_prefix_len(None, query).0);
        }
        prop_assert_eq!(peeked.dump(None), before);
        peeked.check_invariants().unwrap();
        for _ in 0..peeked.total_size() {
            prop_assert_eq!(peeked.evict(1), untouched.evict(1));
        }
    }
}

#[test]
fn peek_on_an_empty_namespace_is_zero() {
    let tree = RadixTree::new();
    assert_eq!(tree.peek_match_len(None, &[1, 2]), 0);
    assert_eq!(tree.peek_match_len(Some(7), &[]), 0);
}
