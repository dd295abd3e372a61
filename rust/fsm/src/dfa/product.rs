//! Products of byte DFAs: the strings all of some accept and none of others do, built as a
//! table or only searched for one string.

use super::classes::product_classes;
use super::{ByteDfa, DEAD};
use crate::error::FsmError;

impl ByteDfa {
    /// The DFA of the strings every one of `all` accepts and none of `none` does (a product
    /// construction, so regexes can be intersected and subtracted, which their syntax cannot
    /// say). `AutomatonTooLarge` past `max_states` product states; `EmptyLanguage` if empty.
    pub fn intersect(all: &[&ByteDfa], none: &[&ByteDfa], max_states: usize) -> Result<Self, FsmError> {
        let product = Product::new(all, none)?;
        let (classes, num_classes, class_len, class_byte) = product_classes(&product.parts);
        let mut number_of: std::collections::HashMap<Vec<u32>, u32> = std::collections::HashMap::new();
        let mut states: Vec<Vec<u32>> = vec![product.start()];
        number_of.insert(states[0].clone(), 0);
        let mut raw_trans: Vec<u32> = Vec::new();
        let mut accepting = Vec::new();
        let mut head = 0;
        while head < states.len() {
            let tuple = states[head].clone();
            head += 1;
            accepting.push(product.accepts(&tuple));
            for &byte in &class_byte {
                let Some(next) = product.next(&tuple, byte) else {
                    raw_trans.push(DEAD);
                    continue;
                };
                let id = match number_of.get(&next) {
                    Some(&id) => id,
                    None => {
                        if states.len() >= max_states {
                            return Err(FsmError::AutomatonTooLarge {
                                what: "intersection DFA",
                                limit: max_states,
                            });
                        }
                        let id = states.len() as u32;
                        number_of.insert(next.clone(), id);
                        states.push(next);
                        id
                    }
                };
                raw_trans.push(id);
            }
        }
        Self::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
    }

    /// Whether some string every one of `all` accepts and none of `none` does exists: the
    /// product of [`ByteDfa::intersect`] searched breadth first up to its first accepting
    /// state, without its table (a lexeme checked for emptiness at compile, built on first use).
    /// `AutomatonTooLarge` past `max_states` product states visited.
    pub fn intersection_is_empty(
        all: &[&ByteDfa],
        none: &[&ByteDfa],
        max_states: usize,
    ) -> Result<bool, FsmError> {
        let product = Product::new(all, none)?;
        let (_, _, _, class_byte) = product_classes(&product.parts);
        let start = product.start();
        let mut seen: rustc_hash::FxHashSet<Vec<u32>> = rustc_hash::FxHashSet::default();
        let mut queue = std::collections::VecDeque::from([start.clone()]);
        seen.insert(start);
        while let Some(tuple) = queue.pop_front() {
            if product.accepts(&tuple) {
                return Ok(false);
            }
            for &byte in &class_byte {
                let Some(next) = product.next(&tuple, byte) else { continue };
                if seen.contains(&next) {
                    continue;
                }
                if seen.len() >= max_states {
                    return Err(FsmError::AutomatonTooLarge { what: "intersection DFA", limit: max_states });
                }
                seen.insert(next.clone());
                queue.push_back(next);
            }
        }
        Ok(true)
    }
}

/// The automata of a product: those of `all`, then those of `none`; a product state is a
/// tuple of their states ([`DEAD`] for a part of `none` that died).
struct Product<'a> {
    all: &'a [&'a ByteDfa],
    none: &'a [&'a ByteDfa],
    parts: Vec<&'a ByteDfa>,
}

impl<'a> Product<'a> {
    fn new(all: &'a [&'a ByteDfa], none: &'a [&'a ByteDfa]) -> Result<Self, FsmError> {
        if all.is_empty() {
            return Err(FsmError::InvalidRegex("an intersection needs at least one language".into()));
        }
        Ok(Self { all, none, parts: all.iter().chain(none).copied().collect() })
    }

    fn start(&self) -> Vec<u32> {
        self.parts.iter().map(|d| d.start()).collect()
    }

    /// Whether every part of `all` accepts in `tuple` and no part of `none` does.
    fn accepts(&self, tuple: &[u32]) -> bool {
        let accepts = |(d, &s): (&&ByteDfa, &u32)| s != DEAD && d.is_accepting(s);
        self.all.iter().zip(tuple).all(accepts)
            && !self.none.iter().zip(&tuple[self.all.len()..]).any(accepts)
    }

    /// The tuple after `byte`; `None` when a part of `all` dies (nothing of the product goes on).
    fn next(&self, tuple: &[u32], byte: u8) -> Option<Vec<u32>> {
        let next: Vec<u32> = self
            .parts
            .iter()
            .zip(tuple)
            .map(|(d, &s)| if s == DEAD { DEAD } else { d.next(s, byte) })
            .collect();
        (!next[..self.all.len()].contains(&DEAD)).then_some(next)
    }
}
