//! Arrays: `items` with `minItems` / `maxItems` unrolled into optional tails.
use serde_json::{Map, Value};

use super::{unsupported, Piece, SchemaGrammar, MAX_ITEMS_BOUND};
use crate::error::GrammarError;
use crate::grammar::{NonterminalId, Symbol};

impl SchemaGrammar<'_> {
    /// `[ item (, item)* ]` with `minItems` / `maxItems` (both at most `MAX_ITEMS_BOUND`).
    pub(super) fn array(&mut self, map: &Map<String, Value>, path: &str) -> Result<Vec<Piece>, GrammarError> {
        for keyword in
            ["prefixItems", "additionalItems", "contains", "minContains", "maxContains", "unevaluatedItems"]
        {
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
        let item = match map.get("items") {
            Some(Value::Array(_)) => {
                return Err(unsupported("items", path, "tuple 'items' are not supported by the grammar path"))
            }
            Some(schema) => self.schema(schema, &format!("{path}/items"))?,
            None => vec![Piece::Rule(self.any()?)],
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
        let mut separated = vec![Piece::Regex(format!("{ws},{ws}"))];
        separated.extend(item.iter().cloned());
        // item, then (", " item) between max(min, 1) - 1 and max - 1 times.
        let mut list = item;
        for _ in 1..min_items.max(1) {
            list.extend(separated.iter().cloned());
        }
        match max_items {
            None => {
                // more -> ε | more , item
                let more = self.builder.fresh("items");
                self.builder.rule(more, Vec::new());
                let mut rhs = vec![Symbol::Nonterminal(more)];
                rhs.extend(self.symbols(separated.clone()));
                self.builder.rule(more, rhs);
                list.push(Piece::Rule(more));
            }
            Some(max) => {
                // optional_k -> ε | , item optional_{k-1}
                let mut tail: Option<NonterminalId> = None;
                for _ in min_items.max(1)..max {
                    let optional = self.builder.fresh("more_items");
                    self.builder.rule(optional, Vec::new());
                    let mut pieces = separated.clone();
                    pieces.extend(tail.map(Piece::Rule));
                    let rhs = self.symbols(pieces);
                    self.builder.rule(optional, rhs);
                    tail = Some(optional);
                }
                list.extend(tail.map(Piece::Rule));
            }
        }
        let mut alternatives = vec![list];
        if min_items == 0 {
            alternatives.push(Vec::new());
        }
        let body = self.choice("array", alternatives);
        Ok(vec![open, Piece::Rule(body), close])
    }
}
