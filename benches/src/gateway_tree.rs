//! A stand-in for SGLang's Rust router tree core, for benchmarking only.
//!
//! This is a *reconstruction* written from a public description of the approximate radix tree
//! that SGLang's model gateway (sgl-model-gateway, `policies/tree.rs`) keeps per worker pool;
//! no SGLang source was used. It follows the described data-structure choices, since they set
//! the cost of every operation:
//!
//! - the tree is over characters of the request text (here: one char per token id, see
//!   [`token_text`]); each node's text sits under an `RwLock` together with its cached char
//!   count;
//! - children are a `DashMap<char, Arc<Node>>` keyed by the first char of the child's text
//!   (32 shards at the root, 8 elsewhere); nodes are reference counted and keep a parent link;
//! - a node records, per tenant (a worker URL), the epoch of its last access in a
//!   `DashMap<TenantId, u64>`; a global atomic epoch orders accesses, and a match refreshes
//!   the timestamps only once in 8 calls (to cut contention on the shared counters);
//! - `insert(text, tenant)` splits a node whose text the new text only partly shares, and adds
//!   the tenant to every node on the path (counting the chars it newly owns per tenant);
//! - `prefix_match_with_counts(text)` returns a tenant owning the deepest matched node, the
//!   matched char count and the input's char count.
//!
//! Left out: eviction (`evict_tenant_by_size`), which the gateway runs in the background every
//! 30 s, and per-tenant matching; neither is on the per-request path measured here. The code
//! is written for correctness under the same concurrency model (entry locks on insert) but is
//! only exercised single-threaded by the benches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;

/// A tenant: the URL of the worker a request was routed to.
pub type TenantId = Arc<str>;

const ROOT_SHARDS: usize = 32;
const NODE_SHARDS: usize = 8;
/// A match refreshes access timestamps once in this many calls.
const MATCH_TOUCH_PERIOD: u64 = 8;

struct NodeText {
    text: String,
    char_count: usize,
}

struct Node {
    children: DashMap<char, Arc<Node>>,
    text: RwLock<NodeText>,
    tenant_last_access: DashMap<TenantId, u64>,
    parent: RwLock<Option<Weak<Node>>>,
}

impl Node {
    fn new(text: &str, char_count: usize, shards: usize, parent: Option<&Arc<Node>>) -> Self {
        Self {
            children: DashMap::with_shard_amount(shards),
            text: RwLock::new(NodeText { text: text.to_owned(), char_count }),
            tenant_last_access: DashMap::with_shard_amount(NODE_SHARDS),
            parent: RwLock::new(parent.map(Arc::downgrade)),
        }
    }
}

/// The multi-tenant approximate radix tree (see the module docs).
pub struct GatewayTree {
    root: Arc<Node>,
    epoch: AtomicU64,
    num_matches: AtomicU64,
    tenant_char_count: DashMap<TenantId, usize>,
}

impl Default for GatewayTree {
    fn default() -> Self {
        Self::new()
    }
}

/// Chars shared at the start of `a` and `b`, and their length in bytes.
fn shared_prefix(a: &str, b: &str) -> (usize, usize) {
    let (mut chars, mut bytes) = (0, 0);
    for (x, y) in a.chars().zip(b.chars()) {
        if x != y {
            break;
        }
        chars += 1;
        bytes += x.len_utf8();
    }
    (chars, bytes)
}

impl GatewayTree {
    pub fn new() -> Self {
        Self {
            root: Arc::new(Node::new("", 0, ROOT_SHARDS, None)),
            epoch: AtomicU64::new(0),
            num_matches: AtomicU64::new(0),
            tenant_char_count: DashMap::new(),
        }
    }

    fn next_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Marks `node` as accessed by `tenant`; a tenant new to the node now owns its chars.
    fn record(&self, node: &Node, tenant: &TenantId, now: u64) {
        if node.tenant_last_access.insert(tenant.clone(), now).is_none() {
            let char_count = node.text.read().unwrap().char_count;
            *self.tenant_char_count.entry(tenant.clone()).or_insert(0) += char_count;
        }
    }

    /// Adds `text` to the tree on behalf of `tenant`.
    pub fn insert(&self, text: &str, tenant: &TenantId) {
        let now = self.next_epoch();
        let mut node = Arc::clone(&self.root);
        self.record(&node, tenant, now);
        let mut rest = text;
        while let Some(first) = rest.chars().next() {
            let next = match node.children.entry(first) {
                Entry::Vacant(vacant) => {
                    let leaf = Arc::new(Node::new(rest, rest.chars().count(), NODE_SHARDS, Some(&node)));
                    self.record(&leaf, tenant, now);
                    vacant.insert(leaf);
                    return;
                }
                Entry::Occupied(mut occupied) => {
                    let child = Arc::clone(occupied.get());
                    let (shared_chars, shared_bytes, child_chars) = {
                        let child_text = child.text.read().unwrap();
                        let (chars, bytes) = shared_prefix(&child_text.text, rest);
                        (chars, bytes, child_text.char_count)
                    };
                    rest = &rest[shared_bytes..];
                    if shared_chars == child_chars {
                        child
                    } else {
                        // Split: a new node takes the shared part and inherits the child's
                        // tenants; the child keeps the rest below it.
                        let upper = {
                            let mut child_text = child.text.write().unwrap();
                            let suffix = child_text.text.split_off(shared_bytes);
                            let upper = Node::new(&child_text.text, shared_chars, NODE_SHARDS, Some(&node));
                            child_text.text = suffix;
                            child_text.char_count -= shared_chars;
                            upper
                        };
                        for entry in child.tenant_last_access.iter() {
                            upper.tenant_last_access.insert(entry.key().clone(), *entry.value());
                        }
                        let upper = Arc::new(upper);
                        *child.parent.write().unwrap() = Some(Arc::downgrade(&upper));
                        let suffix_first = child.text.read().unwrap().text.chars().next().expect("non-empty");
                        upper.children.insert(suffix_first, child);
                        occupied.insert(Arc::clone(&upper));
                        upper
                    }
                }
            };
            self.record(&next, tenant, now);
            node = next;
        }
    }

    /// The longest stored prefix of `text`: a tenant that holds it, the matched chars and the
    /// chars of `text`. The tenant is empty when nothing was ever inserted.
    pub fn prefix_match_with_counts(&self, text: &str) -> (TenantId, usize, usize) {
        let input_chars = text.chars().count();
        let mut node = Arc::clone(&self.root);
        let mut matched_chars = 0;
        let mut rest = text;
        while let Some(first) = rest.chars().next() {
            let Some(child) = node.children.get(&first).map(|child| Arc::clone(child.value())) else {
                break;
            };
            let (shared_chars, shared_bytes, child_chars) = {
                let child_text = child.text.read().unwrap();
                let (chars, bytes) = shared_prefix(&child_text.text, rest);
                (chars, bytes, child_text.char_count)
            };
            matched_chars += shared_chars;
            rest = &rest[shared_bytes..];
            // A partly matched child still ends the match: its tenants hold the matched part.
            node = child;
            if shared_chars < child_chars {
                break;
            }
        }
        let tenant = node.tenant_last_access.iter().next().map(|entry| entry.key().clone());
        let Some(tenant) = tenant else {
            return (Arc::from(""), matched_chars, input_chars);
        };
        if self.num_matches.fetch_add(1, Ordering::Relaxed) % MATCH_TOUCH_PERIOD == 0 {
            let now = self.next_epoch();
            let mut current = Some(node);
            while let Some(at) = current {
                at.tenant_last_access.insert(tenant.clone(), now);
                current = at.parent.read().unwrap().as_ref().and_then(Weak::upgrade);
            }
        }
        (tenant, matched_chars, input_chars)
    }

    /// Chars stored on behalf of `tenant` (its share of the tree).
    pub fn tenant_char_count(&self, tenant: &str) -> usize {
        self.tenant_char_count.get(tenant).map_or(0, |count| *count)
    }
}

/// Token ids as text, one char per id (surrogate code points skipped), the way the gateway
/// would see a prompt of that many characters.
pub fn token_text(tokens: &[u32]) -> String {
    tokens
        .iter()
        .map(|&id| {
            let code = if id < 0xD800 { id } else { id + 0x800 };
            char::from_u32(code).expect("token ids stay below 0x10F800")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(name: &str) -> TenantId {
        Arc::from(name)
    }

    #[test]
    fn matches_the_longest_shared_prefix() {
        let tree = GatewayTree::new();
        let worker = tenant("http://worker-0");
        let shared: Vec<u32> = (1..=300).collect();
        let mut first = shared.clone();
        first.extend(1000..1100);
        let mut second = shared.clone();
        second.extend(2000..2050);
        tree.insert(&token_text(&first), &worker);
        tree.insert(&token_text(&second), &worker);

        let mut probe = shared.clone();
        probe.extend([2000, 2001, 9999, 9998]);
        let (owner, matched, input) = tree.prefix_match_with_counts(&token_text(&probe));
        assert_eq!((&*owner, matched, input), ("http://worker-0", 302, 304));
        // A match ending inside an edge counts the matched part of it.
        let (_, matched, _) = tree.prefix_match_with_counts(&token_text(&shared[..150]));
        assert_eq!(matched, 150);
        let (_, matched, _) = tree.prefix_match_with_counts(&token_text(&[7777]));
        assert_eq!(matched, 0);
        // Both keys are stored in full (300 shared + 100 + 50 own chars, counted once).
        assert_eq!(tree.tenant_char_count("http://worker-0"), 450);
        assert_eq!(tree.prefix_match_with_counts(&token_text(&first)).1, first.len());
    }

    #[test]
    fn attributes_matches_to_the_tenant_that_holds_them() {
        let tree = GatewayTree::new();
        let (a, b) = (tenant("http://worker-a"), tenant("http://worker-b"));
        let shared: Vec<u32> = (100..200).collect();
        let mut for_a = shared.clone();
        for_a.extend(5000..5040);
        let mut for_b = shared.clone();
        for_b.extend(6000..6060);
        tree.insert(&token_text(&for_a), &a);
        tree.insert(&token_text(&for_b), &b);

        for _ in 0..MATCH_TOUCH_PERIOD + 1 {
            let (owner, matched, _) = tree.prefix_match_with_counts(&token_text(&for_a));
            assert_eq!((&*owner, matched), ("http://worker-a", 140));
            let (owner, matched, _) = tree.prefix_match_with_counts(&token_text(&for_b));
            assert_eq!((&*owner, matched), ("http://worker-b", 160));
        }
        // The shared part counts for both tenants; each own part for its tenant only.
        assert_eq!(tree.tenant_char_count("http://worker-a"), 140);
        assert_eq!(tree.tenant_char_count("http://worker-b"), 160);
        let (owner, matched, _) = tree.prefix_match_with_counts(&token_text(&shared[..50]));
        assert!(matches!(&*owner, "http://worker-a" | "http://worker-b"));
        assert_eq!(matched, 50);
    }

    #[test]
    fn agrees_with_the_kv_cache_tree_on_a_seeded_trace() {
        let trace = crate::grouped_trace(7, 4, 6, (20, 60), (5, 40));
        let tree = GatewayTree::new();
        let worker = tenant("w");
        let mut reference = sglr_radix::RadixTree::new();
        let mut next_slot = 0u32;
        for request in &trace {
            let expected = reference.peek_match_len(None, request);
            let (_, matched, input) = tree.prefix_match_with_counts(&token_text(request));
            assert_eq!((matched, input), (expected, request.len()));
            tree.insert(&token_text(request), &worker);
            let slots: Vec<u32> = (next_slot..next_slot + request.len() as u32).collect();
            next_slot += request.len() as u32;
            reference.insert(None, request, &slots).unwrap();
        }
        assert_eq!(tree.tenant_char_count("w"), reference.total_size());
    }

    #[test]
    fn token_text_is_one_char_per_token() {
        let tokens = [1, 0xD7FF, 0xD800, 49_999];
        let text = token_text(&tokens);
        assert_eq!(text.chars().count(), 4);
        assert_ne!(token_text(&[0xD800]), token_text(&[0xD7FF]));
    }
}
