//! Arrays: `items` with `minItems` / `maxItems` unrolled into optional tails; tuples
//! (`prefixItems`, or draft-4 `items: [...]` with `additionalItems`) as one optional tail per
//! position, the rest's items after them.
use serde_json::{Map, Value};

use super::{unsupported, Piece, SchemaGrammar, MAX_ITEMS_BOUND};
use crate::error::GrammarError;
use crate::grammar::{NonterminalId, Symbol};

impl SchemaGrammar<'_> {
    /// `[ item (, item)* ]` with `minItems` / `maxItems` (both at most `MAX_ITEMS_BOUND`).
    pub(super) fn array(&mut self, map: &Map<String, Value>, path: &str) -> Result<Vec<Piece>, GrammarError> {
        for keyword in ["contains", "minContains", "maxContains", "unevaluatedItems"] {
            if map.contains_key(keyword) {
                return Err(unsupported(keyword, path, "not supported by the grammar path"));
            }
        }
        let bound = |keyword: &str| -> Result<Option<u64>, GrammarError> {
            match map.get(keyword) {
                None => Ok(None),
                Some(value) => match value.as_u64() {
                    Some(n) if n <= MAX_ITEMS_BOUND => Ok(Some(n)),
                    _ => Err(unsupported(
                        keyword,
                        path,
                        &format!("at most {MAX_ITEMS_BOUND} in the grammar path"),
                    )),
                },
            }
        };
        let min_items = bound("minItems")?.unwrap_or(0);
        let max_items = bound("maxItems")?;
        if map.get("uniqueItems") == Some(&Value::Bool(true)) && max_items.is_none_or(|m| m > 1) {
            return Err(unsupported(
                "uniqueItems",
                path,
                "uniqueness of items is not expressible in a grammar",
            ));
        }
        // Tuple positions and the schema of the items after them (`additionalItems` only
        // follows an `items` array; next to a single `items` schema it means nothing).
        let (tuple, rest): (&[Value], Option<&Value>) = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(prefix)), None) => (prefix, None),
            (Some(Value::Array(prefix)), Some(items)) if !items.is_array() => (prefix, Some(items)),
            (Some(_), _) => {
                return Err(unsupported("prefixItems", path, "an array, beside an 'items' schema if any"))
            }
            (None, Some(Value::Array(prefix))) => (prefix, map.get("additionalItems")),
            (None, items) => (&[], items),
        };
        let ws = self.ws.clone();
        let open = Piece::Regex(format!("\\[{ws}"));
        let close = Piece::Regex(format!("{ws}\\]"));
        if max_items.is_some_and(|max| max < min_items) {
            return Ok(vec![Piece::Rule(self.never())]);
        }
        if max_items == Some(0) {
            return Ok(vec![open, close]);
        }
        if !tuple.is_empty() {
            let body = self.tuple(tuple, rest, min_items, max_items, path)?;
            return Ok(vec![open, Piece::Rule(body), close]);
        }
        let item = match rest {
            Some(schema) => self.schema(schema, &format!("{path}/items"))?,
            None => vec![Piece::Rule(self.any()?)],
        };
        let mut separated = vec![Piece::Regex(format!("{ws},{ws}"))];
        separated.extend(item.iter().cloned());
        // item, then (", " item) between max(min, 1) - 1 and max - 1 times.
        let mut list = item;
        let more = self.repeated(&separated, min_items.max(1) - 1, max_items.map(|max| max - 1));
        list.extend(more);
        let mut alternatives = vec![list];
        if min_items == 0 {
            alternatives.push(Vec::new());
        }
        let body = self.choice("array", alternatives);
        Ok(vec![open, Piece::Rule(body), close])
    }

    /// The inside of a tuple array: position i's schema, then (required below `min_items`,
    /// else optional) a separator and the positions after it, then the rest's items (`rest`:
    /// any value when absent, none when `false`) up to `max_items` in all.
    fn tuple(
        &mut self,
        tuple: &[Value],
        rest: Option<&Value>,
        min_items: u64,
        max_items: Option<u64>,
        path: &str,
    ) -> Result<NonterminalId, GrammarError> {
        let ws = self.ws.clone();
        let separator = Piece::Regex(format!("{ws},{ws}"));
        let num_tuple = tuple.len() as u64;
        let rest_allowed = rest != Some(&Value::Bool(false));
        let max_items =
            if rest_allowed { max_items } else { Some(max_items.unwrap_or(num_tuple).min(num_tuple)) };
        if max_items.is_some_and(|max| max < min_items) {
            return Ok(self.never());
        }
        let num_positions = max_items.map_or(num_tuple, |max| max.min(num_tuple)) as usize;
        // After the last position: the rest's items, each after a separator.
        let rest_min = min_items.saturating_sub(num_tuple);
        let rest_max = max_items.map(|max| max.saturating_sub(num_tuple));
        let mut tail: Vec<Piece> = Vec::new();
        if num_positions == tuple.len() && rest_max != Some(0) && rest_allowed {
            let item = match rest {
                Some(schema) => self.schema(schema, &format!("{path}/items"))?,
                None => vec![Piece::Rule(self.any()?)],
            };
            let mut separated = vec![separator.clone()];
            separated.extend(item);
            tail = self.repeated(&separated, rest_min, rest_max);
        }
        // Positions from the last to the first, each followed by what comes after it.
        for index in (0..num_positions).rev() {
            let mut sequence = self.schema(&tuple[index], &format!("{path}/prefixItems/{index}"))?;
            sequence.extend(tail);
            if index > 0 {
                sequence.insert(0, separator.clone());
            }
            tail = if (index as u64) < min_items {
                sequence
            } else {
                vec![Piece::Rule(self.choice("tuple_tail", vec![sequence, Vec::new()]))]
            };
        }
        Ok(self.choice("tuple", vec![tail]))
    }

    /// `separated` between `min` and `max` times (unbounded: a left-recursive list).
    fn repeated(&mut self, separated: &[Piece], min: u64, max: Option<u64>) -> Vec<Piece> {
        let mut pieces: Vec<Piece> = Vec::new();
        for _ in 0..min {
            pieces.extend(separated.iter().cloned());
        }
        match max {
            None => {
                // more -> ε | more separated
                let more = self.builder.fresh("items");
                self.builder.rule(more, Vec::new());
                let mut rhs = vec![Symbol::Nonterminal(more)];
                rhs.extend(self.symbols(separated.to_vec()));
                self.builder.rule(more, rhs);
                pieces.push(Piece::Rule(more));
            }
            Some(max) => {
                // optional_k -> ε | separated optional_{k-1}
                let mut tail: Option<NonterminalId> = None;
                for _ in min..max {
                    let optional = self.builder.fresh("more_items");
                    self.builder.rule(optional, Vec::new());
                    let mut rhs = separated.to_vec();
                    rhs.extend(tail.map(Piece::Rule));
                    let rhs = self.symbols(rhs);
                    self.builder.rule(optional, rhs);
                    tail = Some(optional);
                }
                pieces.extend(tail.map(Piece::Rule));
            }
        }
        pieces
    }
}
