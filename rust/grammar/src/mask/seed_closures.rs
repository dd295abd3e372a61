//! The closures a mask walk needs where a lexeme ends: the items advanced past it (seeds)
//! closed into a new Earley set, kept per seed list for the walk with the bytes the closure
//! can take first, and stepped on a byte once per walk.

use std::sync::Arc;

use crate::earley::{close_seeds, step_byte, ByteStep, Chart, Item, ScanScratch, NO_LEX};
use crate::error::GrammarError;
use crate::grammar::Symbol;
use crate::matcher::GrammarMatcher;

/// The committed chart followed by the walk's sets for depths `1..=depth`.
pub(super) struct Layered<'a> {
    pub(super) base: &'a [Arc<[Item]>],
    /// `extra[d]` is the set after the first d bytes of the current trie path (`extra[0]` unused).
    pub(super) extra: &'a [Vec<Item>],
}

impl Chart for Layered<'_> {
    fn num_sets(&self) -> usize {
        self.base.len() + self.extra.len().saturating_sub(1)
    }
    fn set(&self, index: usize) -> &[Item] {
        if index < self.base.len() {
            &self.base[index]
        } else {
            &self.extra[index - self.base.len() + 1]
        }
    }
}

/// An item advanced past a lexeme, before its set is closed: (rule, dot, origin).
pub(super) type Seed = (u32, u32, u32);

/// Which closures of a walk a seed list's closure is kept with ([`SeedClosures::get_or_close`]).
#[derive(Clone, Copy)]
pub(super) enum Kept {
    /// Seeds from committed sets: the same closure at every depth.
    Committed,
    /// Seeds from one set of the walk, the one entered as this number (`entered` in
    /// `walk_boundaries`): the same closure at every node below it.
    BelowWalkSet(u32),
    /// Seeds from several sets of the walk: not kept.
    No,
}

/// Origin that stands for "the set being built" in a closure kept for several depths.
pub(super) const OWN_SET: u32 = u32::MAX;

/// A walk's closures of seed lists whose origins are committed sets: the same items at every
/// depth except the origin of what the new set predicts itself (stored as [`OWN_SET`]).
#[derive(Default)]
pub(super) struct SeedClosures {
    ids: rustc_hash::FxHashMap<Vec<(u32, u32, u32)>, usize>,
    /// Closures of seeds whose origin is one set of the walk, by that set's `entered` (in
    /// `walk_boundaries`), then seeds.
    walk_ids: rustc_hash::FxHashMap<u32, rustc_hash::FxHashMap<Vec<Seed>, usize>>,
    items: Vec<Vec<Item>>,
    /// Per closure, the bytes some item's lexeme can take first (a 256-bit set).
    pub(super) first_bytes: Vec<[u64; 4]>,
    /// Closures stepped on a byte, by (closure, byte).
    steps: rustc_hash::FxHashMap<(usize, u8), ByteStep>,
}

impl SeedClosures {
    /// The closure of `seeds` in a new set numbered `set_index` (its own predictions' origin
    /// kept as [`OWN_SET`]) with the bytes it takes first, kept as `kept` says.
    pub(super) fn get_or_close(
        &mut self,
        matcher: &GrammarMatcher,
        chart: &dyn Chart,
        set_index: u32,
        seeds: &[Seed],
        kept: Kept,
        scratch: &mut ScanScratch,
    ) -> Result<usize, GrammarError> {
        let found = match kept {
            Kept::Committed => self.ids.get(seeds).copied(),
            Kept::BelowWalkSet(entered) => {
                self.walk_ids.get(&entered).and_then(|ids| ids.get(seeds)).copied()
            }
            Kept::No => None,
        };
        if let Some(id) = found {
            return Ok(id);
        }
        let mut items = close_seeds(
            &matcher.grammar,
            &matcher.lexemes,
            matcher.limits,
            chart,
            set_index,
            seeds,
            scratch,
        )?;
        for item in &mut items {
            if item.origin == set_index {
                item.origin = OWN_SET;
            }
        }
        let id = self.items.len();
        self.first_bytes.push(matcher.first_bytes(&items)?);
        self.items.push(items);
        match kept {
            Kept::Committed => {
                self.ids.insert(seeds.to_vec(), id);
            }
            Kept::BelowWalkSet(entered) => {
                self.walk_ids.entry(entered).or_default().insert(seeds.to_vec(), id);
            }
            Kept::No => {}
        }
        Ok(id)
    }

    /// Closure `id` stepped on `byte` (origins of its own predictions still [`OWN_SET`]).
    pub(super) fn step(
        &mut self,
        matcher: &GrammarMatcher,
        id: usize,
        byte: u8,
    ) -> Result<&ByteStep, GrammarError> {
        match self.steps.entry((id, byte)) {
            std::collections::hash_map::Entry::Occupied(found) => Ok(found.into_mut()),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let mut step = ByteStep::default();
                step_byte(&matcher.grammar, &matcher.lexemes, &self.items[id], byte, &mut step)?;
                Ok(slot.insert(step))
            }
        }
    }

    /// [`SeedClosures::step`] already taken.
    pub(super) fn stepped(&self, id: usize, byte: u8) -> &ByteStep {
        &self.steps[&(id, byte)]
    }

    pub(super) fn takes_first(&self, id: usize, byte: u8) -> bool {
        self.first_bytes[id][byte as usize >> 6] >> (byte & 63) & 1 == 1
    }

    /// Adds closure `id`, numbered `set_index`, to `set` (sorted in-lexeme items).
    pub(super) fn add_to(&self, id: usize, set_index: u32, set: &mut Vec<Item>) {
        let closure: Vec<Item> = self.items[id]
            .iter()
            .map(|&item| if item.origin == OWN_SET { Item { origin: set_index, ..item } } else { item })
            .collect();
        let inside = std::mem::replace(set, closure);
        merge_items(set, &inside);
    }
}

impl GrammarMatcher {
    /// The bytes some in-lexeme item of `items` takes first (a 256-bit set).
    pub(super) fn first_bytes(&self, items: &[Item]) -> Result<[u64; 4], GrammarError> {
        let mut first = [0u64; 4];
        for item in items.iter().filter(|item| item.lex != NO_LEX) {
            let Symbol::Lexeme(lexeme) = self.grammar.rules[item.rule as usize].rhs[item.dot as usize] else {
                continue;
            };
            let bytes = self.lexemes.first_bytes(&self.grammar, lexeme, item.lex)?;
            for (word, bits) in first.iter_mut().zip(bytes) {
                *word |= bits;
            }
        }
        Ok(first)
    }
}

/// Appends `more` to `set` without repeating an item.
pub(super) fn merge_items(set: &mut Vec<Item>, more: &[Item]) {
    if more.is_empty() {
        return;
    }
    set.extend_from_slice(more);
    set.sort_unstable_by_key(|i| (i.rule, i.dot, i.origin, i.lex));
    set.dedup();
}
