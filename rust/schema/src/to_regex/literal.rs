//! Regexes for JSON values: literal values (`const` / `enum`) and unconstrained values
//! (`{}` / `true`), with the configured whitespace between tokens.

use serde_json::Value;

use sglr_fsm::json::{string_literal, NUMBER, STRING_CHAR};

use crate::options::MAX_REGEX_ANY_ORDER_PROPERTIES;

/// A regex that matches nothing (a branch that can never be taken).
pub const NEVER: &str = r"[^\x00-\x{10FFFF}]";

/// A regex for exactly the JSON value `value`: object keys in the given order, or with
/// `any_order` in every order (None past `MAX_REGEX_ANY_ORDER_PROPERTIES` keys in one object).
pub(super) fn value_literal(ws: &str, value: &Value, any_order: bool) -> Option<String> {
    Some(match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_literal(n),
        Value::String(s) => string_literal(s),
        Value::Array(items) => {
            let inner: Vec<String> =
                items.iter().map(|v| value_literal(ws, v, any_order)).collect::<Option<_>>()?;
            if inner.is_empty() {
                format!(r"\[{ws}\]")
            } else {
                format!(r"\[{ws}{}{ws}\]", inner.join(&format!("{ws},{ws}")))
            }
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    Some(format!("{}{ws}:{ws}{}", string_literal(k), value_literal(ws, v, any_order)?))
                })
                .collect::<Option<_>>()?;
            let separator = format!("{ws},{ws}");
            if inner.is_empty() {
                format!(r"\{{{ws}\}}")
            } else if any_order && inner.len() > 1 {
                if inner.len() > MAX_REGEX_ANY_ORDER_PROPERTIES {
                    return None;
                }
                let orders: Vec<String> = permutations(inner.len())
                    .iter()
                    .map(|order| {
                        order.iter().map(|&i| inner[i].as_str()).collect::<Vec<_>>().join(&separator)
                    })
                    .collect();
                format!(r"\{{{ws}{}{ws}\}}", alternation(orders))
            } else {
                format!(r"\{{{ws}{}{ws}\}}", inner.join(&separator))
            }
        }
    })
}

/// Every order of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut all = Vec::new();
    for shorter in permutations(n - 1) {
        for at in 0..n {
            let mut order = shorter.clone();
            order.insert(at, n - 1);
            all.push(order);
        }
    }
    all
}

/// A number equal to `n`: integral values also match with a zero fraction (`1` == `1.0`).
fn number_literal(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return format!(r"{}(?:\.0+)?", regex_syntax::escape(&i.to_string()));
    }
    if let Some(u) = n.as_u64() {
        return format!(r"{u}(?:\.0+)?");
    }
    let f = n.as_f64().unwrap_or(0.0);
    if f.fract() == 0.0 && f.abs() < 1e15 {
        return format!(r"{}(?:\.0+)?", regex_syntax::escape(&format!("{}", f as i64)));
    }
    regex_syntax::escape(&n.to_string())
}

/// Any JSON value, with arrays and objects nested at most `depth` levels.
pub(super) fn any_value(ws: &str, depth: usize) -> String {
    let string = format!("\"{STRING_CHAR}*\"");
    let primitive = format!("{string}|{NUMBER}|true|false|null");
    if depth == 0 {
        return format!("(?:{primitive})");
    }
    let inner = any_value(ws, depth - 1);
    let sep = format!("{ws},{ws}");
    let array = format!(r"\[{ws}(?:{inner}(?:{sep}{inner})*)?{ws}\]");
    let member = format!("{string}{ws}:{ws}{inner}");
    let object = format!(r"\{{{ws}(?:{member}(?:{sep}{member})*)?{ws}\}}");
    format!("(?:{primitive}|{array}|{object})")
}

/// `(?:a|b|...)`, or the never-matching regex for no alternatives.
pub(super) fn alternation(parts: Vec<String>) -> String {
    match parts.len() {
        0 => NEVER.into(),
        1 => parts.into_iter().next().expect("one part"),
        _ => format!("(?:{})", parts.join("|")),
    }
}
