//! The tokens below a parse state's boundaries that the parser takes: one Earley byte step
//! per trie node (only where a lexeme may end does a set need closing), every other subtree
//! skipped in one jump.

use std::cell::RefCell;
use std::sync::Arc;

use sglr_fsm::DEAD;
use sglr_vocab::TokenTrie;

use super::nodes::{allow_node_tokens, children_take};
use super::seed_closures::{merge_items, Kept, Layered, SeedClosures, OWN_SET};
use crate::earley::{step_byte, ByteStep, Item, ScanScratch};
use crate::error::GrammarError;
use crate::grammar::Symbol;
use crate::lexeme_dfa::LexemeDfa;
use crate::matcher::{GrammarMatcher, ParseState};

impl GrammarMatcher {
    /// ORs into `allowed` (and lists in `token_ids`, if given) the tokens below the `boundaries`
    /// (sorted trie nodes) that the parser takes: one byte step per node of their subtrees and
    /// of their ancestors (whose sets the subtrees need), every other subtree skipped in one jump.
    ///
    /// A node where a lexeme ends needs the closure of the items advanced past it, but only
    /// for children whose byte starts something that closure predicts: the closure is kept
    /// per seed list for the whole walk (seeds from committed sets close the same way at every
    /// depth, up to the new set's own number) with the bytes it can take first, and a node's
    /// set holds only its in-lexeme items until a child needs more. Inside numbers and strings
    /// (a lexeme that may end at every byte) most nodes are leaves or have only in-lexeme
    /// children, so most steps never close a set.
    pub(super) fn walk_boundaries(
        &self,
        state: &ParseState,
        trie: &TokenTrie,
        boundaries: &[u32],
        closures: &mut SeedClosures,
        allowed: &mut [u32],
        mut token_ids: Option<&mut Vec<u32>>,
    ) -> Result<(), GrammarError> {
        let base: &[Arc<[Item]>] = &state.sets;
        let num_base = base.len();
        // NOTE: the per-depth state lives in a thread's buffers, reused by every walk (a mask
        // walks once per suffix group and once for the rest); a depth's entries are written when
        // a node at that depth is entered, before a child reads them, so only depth 0 is reset.
        let mut vecs = WALK_VECS.with(|vecs| std::mem::take(&mut *vecs.borrow_mut()));
        vecs.prepare(trie.max_depth + 1);
        let WalkVecs { extra, pending, inside_only, lone_follow, entered, set_first, num_stepped } =
            &mut vecs;
        // `pending[d]`: the closure `extra[d]` still lacks (added when a child needs it).
        let mut scratch = ScanScratch::default();
        let mut step = ByteStep::default();
        let end = trie.nodes[0].subtree_end as usize;
        // `inside_only[d]`: `extra[d]` (the base's last set at 0) holds only the committed
        // in-lexeme items advanced along the path, no item of a lexeme's end (a pending closure
        // aside). Below such a set, a node whose step ends no lexeme and takes no pending
        // closure holds those items alone: its tokens are in the lexeme masks, and its subtree
        // needs a walk only down to the boundaries in it.
        // `lone[d]`: `extra[d]` is one in-lexeme item (of a lexeme begun inside the walk) and no
        // pending closure, with its lexeme's automaton: below it, until the lexeme may end, a
        // node needs one automaton step, not a parser step (a string's characters after ` "`).
        let mut lone: Vec<Option<&LexemeDfa>> = vec![None; trie.max_depth + 1];
        // `lone_follow[d]`: with `lone[d]`, the bytes the closure after that item's lexeme can
        // take first, once known (the same along the lexeme: the item's completion does not
        // change): where the lexeme may end, a node none of whose children starts a follower
        // stays lone (a number's digits after ` 1`).
        // `entered[d]`: a number for the node whose set is `extra[d]` (each node a new one).
        let mut num_entered = 0u32;
        // `set_first[d]`: the bytes some item of `extra[d]` takes first, found once a few of the
        // node's children were stepped (reset whenever the set changes): a byte none takes
        // gives an empty step, skipped without one (after ` `, most of the space's children
        // start no value). `num_stepped[d]`: children of the node at depth d stepped so far.
        // `boundaries[next_boundary]` is the first boundary at or after `index` (the walk only
        // moves forward, so a cursor replaces a search per node).
        let mut next_boundary = 0;
        let mut index = 1;
        while index < end {
            let node = trie.nodes[index];
            let depth = node.depth as usize;
            let parent = depth - 1;
            let from_inside = inside_only[parent];
            if from_inside {
                while boundaries.get(next_boundary).is_some_and(|&b| (b as usize) < index) {
                    next_boundary += 1;
                }
                let boundary_below =
                    boundaries.get(next_boundary).is_some_and(|&b| (b as usize) < node.subtree_end as usize);
                let closure_takes = pending[parent].is_some_and(|id| closures.takes_first(id, node.byte));
                if !boundary_below && !closure_takes {
                    index = node.subtree_end as usize;
                    continue;
                }
            }
            num_entered += 1;
            entered[depth] = num_entered;
            set_first[depth] = None;
            num_stepped[depth] = 0;
            if let Some(dfa) = lone[parent] {
                let item = extra[parent][0];
                let next = dfa.next(item.lex, node.byte);
                if next == DEAD {
                    index = node.subtree_end as usize;
                    continue;
                }
                // NOTE: where the lexeme may end, the parser steps (below), unless what may
                // follow it is known and no child starts it.
                let has_children = node.subtree_end as usize > index + 1;
                let stays = !dfa.is_accepting(next)
                    || lone_follow[parent]
                        .is_some_and(|follow| !has_children || !children_take(trie, index, &follow));
                if stays {
                    allow_node_tokens(trie, index, allowed, token_ids.as_deref_mut());
                    let goes_on = !dfa.is_accepting(next) || dfa.successors(next).next().is_some();
                    if has_children && goes_on {
                        extra[depth].clear();
                        extra[depth].push(Item { lex: next, ..item });
                        lone[depth] = Some(dfa);
                        lone_follow[depth] = lone_follow[parent];
                        pending[depth] = None;
                        inside_only[depth] = false;
                        index += 1;
                    } else {
                        index = node.subtree_end as usize;
                    }
                    continue;
                }
            }
            let parent_index = (num_base - 1 + parent) as u32;
            // The parent's pending closure on this byte, stepped once per walk (kept with the
            // closure), unless it ends a lexeme predicted in the parent set itself: completing
            // that needs the parent's whole set.
            let mut closure_step = None;
            if let Some(id) = pending[parent] {
                if closures.takes_first(id, node.byte) {
                    let closed = closures.step(self, id, node.byte)?;
                    if closed.seeds.iter().any(|&(_, _, origin)| origin == OWN_SET) {
                        pending[parent] = None;
                        closures.add_to(id, parent_index, &mut extra[parent]);
                        set_first[parent] = None;
                        inside_only[parent] = false;
                    } else {
                        closure_step = Some(id);
                    }
                }
            }
            let parent_set: &[Item] = if parent == 0 { &base[num_base - 1] } else { &extra[parent] };
            num_stepped[parent] += 1;
            if closure_step.is_none() && num_stepped[parent] > MIN_STEPPED_FOR_FIRST_BYTES {
                let first = match set_first[parent] {
                    Some(first) => first,
                    None => *set_first[parent].insert(self.first_bytes(parent_set)?),
                };
                if first[node.byte as usize >> 6] >> (node.byte & 63) & 1 == 0 {
                    index = node.subtree_end as usize;
                    continue;
                }
            }
            step_byte(&self.grammar, &self.lexemes, parent_set, node.byte, &mut step)?;
            if let Some(id) = closure_step {
                step.add_relative(closures.stepped(id, node.byte), OWN_SET, parent_index);
            }
            if step.is_empty() {
                index = node.subtree_end as usize;
                continue;
            }
            if from_inside && step.seeds.is_empty() && closure_step.is_none() {
                // NOTE: only the committed lexemes go on here; their tokens are in the masks.
                if node.subtree_end as usize > index + 1 {
                    pending[depth] = None;
                    inside_only[depth] = true;
                    lone[depth] = None;
                    std::mem::swap(&mut extra[depth], &mut step.inside);
                }
                index += 1;
                continue;
            }
            allow_node_tokens(trie, index, allowed, token_ids.as_deref_mut());
            if node.subtree_end as usize == index + 1 {
                // A leaf: its tokens are all this node decides.
                index += 1;
                continue;
            }
            let set_index = (num_base - 1 + depth) as u32;
            pending[depth] = None;
            // NOTE: swapped, not moved: the set's old buffer becomes the next step's.
            inside_only[depth] = false;
            lone[depth] = None;
            if step.seeds.is_empty() {
                std::mem::swap(&mut extra[depth], &mut step.inside);
                if let [item] = extra[depth][..] {
                    if let Symbol::Lexeme(lexeme) =
                        self.grammar.rules[item.rule as usize].rhs[item.dot as usize]
                    {
                        lone[depth] = Some(self.lexemes.get(&self.grammar, lexeme)?);
                        lone_follow[depth] = None;
                    }
                }
            } else if step.seeds.iter().all(|&(_, _, origin)| (origin as usize) < num_base) {
                let chart = Layered { base, extra: &[] };
                let id = closures.get_or_close(
                    self,
                    &chart,
                    set_index,
                    &step.seeds,
                    Kept::Committed,
                    &mut scratch,
                )?;
                std::mem::swap(&mut extra[depth], &mut step.inside);
                pending[depth] = Some(id);
                inside_only[depth] = from_inside && closure_step.is_none();
            } else {
                // NOTE: at most one item going on in its lexeme, and seeds from one set of the
                // walk: when no child starts what follows the lexeme, the node stays lone (or
                // its subtree holds nothing more) and the closure's set is not built. The item
                // going on must be the one ending here (its completion is then what may follow
                // it at every later end too).
                let origin = step.seeds[0].2;
                let one_origin = step.seeds.iter().all(|seed| seed.2 == origin);
                let alone = match step.inside[..] {
                    [] => one_origin,
                    [item] => step.seeds[..] == [(item.rule, item.dot + 1, item.origin)],
                    _ => false,
                };
                // NOTE: completing a lexeme that began inside the walk reads the sets it began
                // in (and, through what they wait for, their origins): every ancestor whole.
                for ancestor in 1..depth {
                    if let Some(id) = pending[ancestor].take() {
                        closures.add_to(id, (num_base - 1 + ancestor) as u32, &mut extra[ancestor]);
                        set_first[ancestor] = None;
                        inside_only[ancestor] = false;
                    }
                }
                // NOTE: seeds from one set of the walk close the same way at every node below
                // it (the closure reads that set and what it waits on, never a deeper one), up
                // to the new set's own number: kept per walk by (seeds, that set's `entered`).
                let kept = if one_origin {
                    Kept::BelowWalkSet(entered[origin as usize + 1 - num_base])
                } else {
                    Kept::No
                };
                let (parents, _) = extra.split_at(depth);
                let chart = Layered { base, extra: parents };
                let id = closures.get_or_close(self, &chart, set_index, &step.seeds, kept, &mut scratch)?;
                let follow = closures.first_bytes[id];
                if alone && !children_take(trie, index, &follow) {
                    if !self.go_lone(&mut step.inside, depth, extra, &mut lone)? {
                        index = node.subtree_end as usize;
                        continue;
                    }
                    lone_follow[depth] = Some(follow);
                    index += 1;
                    continue;
                }
                let mut set = Vec::new();
                closures.add_to(id, set_index, &mut set);
                merge_items(&mut set, &step.inside);
                extra[depth] = set;
            }
            index += 1;
        }
        WALK_VECS.with(|kept| *kept.borrow_mut() = vecs);
        Ok(())
    }

    /// Makes `inside` (at most one in-lexeme item) the set at `depth`, walked lone; false when
    /// it is empty (nothing goes on below).
    fn go_lone<'a>(
        &'a self,
        inside: &mut Vec<Item>,
        depth: usize,
        extra: &mut [Vec<Item>],
        lone: &mut [Option<&'a LexemeDfa>],
    ) -> Result<bool, GrammarError> {
        let Some(&item) = inside.first() else { return Ok(false) };
        let Symbol::Lexeme(lexeme) = self.grammar.rules[item.rule as usize].rhs[item.dot as usize] else {
            return Ok(false);
        };
        lone[depth] = Some(self.lexemes.get(&self.grammar, lexeme)?);
        std::mem::swap(&mut extra[depth], inside);
        Ok(true)
    }
}

/// Children of a walk's node stepped one by one before the bytes its set takes first are found
/// and the rest are filtered by them (most nodes have a few children).
const MIN_STEPPED_FOR_FIRST_BYTES: u32 = 4;

/// [`GrammarMatcher::walk_boundaries`]'s state per trie depth (see there), kept between walks.
#[derive(Default)]
struct WalkVecs {
    extra: Vec<Vec<Item>>,
    pending: Vec<Option<usize>>,
    inside_only: Vec<bool>,
    lone_follow: Vec<Option<[u64; 4]>>,
    entered: Vec<u32>,
    set_first: Vec<Option<[u64; 4]>>,
    num_stepped: Vec<u32>,
}

impl WalkVecs {
    /// Sized for at least depths `0..num_depths`, with depth 0 (the committed chart's last set)
    /// reset.
    fn prepare(&mut self, num_depths: usize) {
        // NOTE: grown, never shrunk: a mask's walks alternate between the vocabulary's trie and
        // shallower suffix tries, and deeper entries are only read below a node that wrote them.
        if self.extra.len() < num_depths {
            self.extra.resize_with(num_depths, Vec::new);
            self.pending.resize(num_depths, None);
            self.inside_only.resize(num_depths, true);
            self.lone_follow.resize(num_depths, None);
            self.entered.resize(num_depths, 0);
            self.set_first.resize(num_depths, None);
            self.num_stepped.resize(num_depths, 0);
        }
        self.pending[0] = None;
        self.inside_only[0] = true;
        self.lone_follow[0] = None;
        self.entered[0] = 0;
        self.set_first[0] = None;
        self.num_stepped[0] = 0;
    }
}

thread_local! {
    static WALK_VECS: RefCell<WalkVecs> = RefCell::new(WalkVecs::default());
}
