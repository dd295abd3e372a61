//! An object's declared members in any order (`JsonSchemaOptions::properties_any_order`),
//! exactly: each at most once, every required one present. One nonterminal per state "these
//! declared members written, this many undeclared ones": a set of members no context-free
//! grammar can avoid (the orders of n members need exponentially many rules), so the states
//! are built only as reached (`maxProperties` cuts them) and bounded (`MAX_ANY_ORDER_STATES`).
use rustc_hash::FxHashMap;

use super::{unsupported, Piece, SchemaGrammar};
use crate::error::GrammarError;
use crate::grammar::{NonterminalId, Symbol};

/// Most states of one object's members in any order: about n rules each, 2^n states for n
/// members (twice that with undeclared ones), so 13 members (12 with undeclared ones); at the
/// bound compile + first mask takes 10 to 20 ms here, past the 10 ms the MaskBench p99 aims at
/// already (`benches/results/maskbench_any_order.md`), and doubles with each member.
pub(super) const MAX_ANY_ORDER_STATES: usize = 1 << 13;

/// Most declared members one bit set holds.
const MAX_ANY_ORDER_MEMBERS: usize = 63;

/// A state of the members: which declared ones are written (a bit each) and how many
/// undeclared ones (saturated at 1 when no maximum counts them).
type Written = (u64, usize);

impl SchemaGrammar<'_> {
    /// The members of an object: `members` (pieces, required) each at most once in any order,
    /// any number of `extras` anywhere among them, between `min_count` and `max_count` members
    /// in all (extras count once towards the minimum, as in `members`).
    pub(super) fn members_any_order(
        &mut self,
        members: Vec<(Vec<Piece>, bool)>,
        extras: Vec<Vec<Piece>>,
        min_count: usize,
        max_count: Option<usize>,
        path: &str,
    ) -> Result<NonterminalId, GrammarError> {
        let too_many = || {
            let reason = format!(
                "more than {MAX_ANY_ORDER_STATES} sets of properties to tell apart in any order \
                 (each property at most once); list them in schema order instead"
            );
            let keyword = if max_count.is_some() { "maxProperties" } else { "properties" };
            unsupported(keyword, path, &reason)
        };
        if members.len() > MAX_ANY_ORDER_MEMBERS {
            return Err(too_many());
        }
        let required: u64 = members.iter().enumerate().filter(|(_, (_, r))| *r).map(|(j, _)| 1 << j).sum();
        let member_rules: Vec<NonterminalId> =
            members.into_iter().map(|(pieces, _)| self.choice("member", vec![pieces])).collect();
        let extra_rule = (!extras.is_empty()).then(|| self.choice("extra_member", extras));
        let separator = format!("{ws},{ws}", ws = self.ws);
        let never = self.never();
        // Whether the required members still missing fit under the maximum.
        let fits = |used: u64, written: usize| {
            max_count.is_none_or(|max| written + (required & !used).count_ones() as usize <= max)
        };
        let mut states: FxHashMap<Written, NonterminalId> = FxHashMap::default();
        let start = self.builder.fresh("any_order_members");
        states.insert((0, 0), start);
        let mut pending: Vec<Written> = vec![(0, 0)];
        let separator = Symbol::Lexeme(self.builder.lexeme(&separator));
        // Rules of each state, written once all are known: states with more members first,
        // so that the builder's pass over the rules finds every state productive at once
        // (successors first) instead of one member count per pass.
        let mut written_rules: Vec<(usize, NonterminalId, Vec<Vec<Symbol>>)> = Vec::new();
        while let Some((used, num_extras)) = pending.pop() {
            let written = used.count_ones() as usize + num_extras;
            let mut successors: Vec<(NonterminalId, Written)> = Vec::new();
            if max_count.is_none_or(|max| written < max) {
                for (j, &rule) in member_rules.iter().enumerate() {
                    let next = (used | 1 << j, num_extras);
                    if used >> j & 1 == 0 && fits(next.0, written + 1) {
                        successors.push((rule, next));
                    }
                }
                let next = (used, if max_count.is_some() { num_extras + 1 } else { 1 });
                if let Some(rule) = extra_rule.filter(|_| fits(used, written + 1)) {
                    successors.push((rule, next));
                }
            }
            let mut alternatives: Vec<Vec<Symbol>> = Vec::new();
            if required & !used == 0 && used.count_ones() as usize + num_extras.min(1) >= min_count {
                alternatives.push(Vec::new());
            }
            for (rule, next) in successors {
                let next_rule = match states.get(&next) {
                    Some(&known) => known,
                    None => {
                        if states.len() >= MAX_ANY_ORDER_STATES {
                            return Err(too_many());
                        }
                        let fresh = self.builder.fresh("any_order_members");
                        states.insert(next, fresh);
                        pending.push(next);
                        fresh
                    }
                };
                let lead = (written > 0).then_some(separator);
                let rest = [Symbol::Nonterminal(rule), Symbol::Nonterminal(next_rule)];
                alternatives.push(lead.into_iter().chain(rest).collect());
            }
            written_rules.push((written, states[&(used, num_extras)], alternatives));
        }
        written_rules.sort_by_key(|(written, _, _)| std::cmp::Reverse(*written));
        for (_, nonterminal, alternatives) in written_rules {
            if alternatives.is_empty() {
                self.builder.rule(nonterminal, vec![Symbol::Nonterminal(never)]);
            }
            for rhs in alternatives {
                self.builder.rule(nonterminal, rhs);
            }
        }
        Ok(start)
    }
}
