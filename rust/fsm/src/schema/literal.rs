//! Regexes for JSON text: string bodies, literal values (`const` / `enum`) and unconstrained
//! values (`{}` / `true`), all with the configured whitespace between tokens.

use serde_json::Value;

use super::Ctx;

/// One character of a JSON string body: anything but `"`, `\` and control characters, or an
/// escape sequence.
pub(crate) const STRING_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;

/// A JSON number in any form.
pub(crate) const NUMBER: &str = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?";

/// A JSON integer without fraction or exponent.
pub(crate) const INTEGER: &str = r"-?(?:0|[1-9][0-9]*)";

/// A regex that matches nothing (a branch that can never be taken).
pub const NEVER: &str = r"[^\x00-\x{10FFFF}]";

/// One char as a regex literal outside a class. Escapes use the common dialect (`\.`, `\xHH`)
/// so the same regex also works in other engines.
pub(crate) fn literal_char(c: char) -> String {
    match c {
        '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$' => {
            format!("\\{c}")
        }
        c if (c as u32) < 0x20 || c == '\u{7F}' => format!("\\x{:02X}", c as u32),
        c => c.to_string(),
    }
}

/// One char as a member of a character class.
pub(crate) fn class_char(c: char) -> String {
    match c {
        '\\' | ']' | '[' | '^' | '-' | '&' | '~' => format!("\\{c}"),
        c if (c as u32) < 0x20 || c == '\u{7F}' => format!("\\x{:02X}", c as u32),
        c => c.to_string(),
    }
}

/// `sub` repeated `min..=max` times (`max = None`: unbounded), with the plainest quantifier.
pub(crate) fn repeat(sub: &str, min: usize, max: Option<usize>) -> String {
    let quantifier = match (min, max) {
        (0, None) => "*".to_string(),
        (1, None) => "+".to_string(),
        (0, Some(1)) => "?".to_string(),
        (n, None) => format!("{{{n},}}"),
        (n, Some(m)) if n == m => format!("{{{n}}}"),
        (n, Some(m)) => format!("{{{n},{m}}}"),
    };
    if min == 1 && max == Some(1) {
        return sub.to_string();
    }
    format!("(?:{sub}){quantifier}")
}

/// The JSON-encoded forms of one character inside a string, as a regex: the raw character
/// where JSON allows it, plus its `\uXXXX` escape (any hex case) for non-ASCII characters,
/// because serializers such as Python's `json.dumps` escape them by default.
pub(crate) fn encoded_char(c: char) -> String {
    match c {
        '"' => r#"\\""#.into(),
        '\\' => r"\\\\".into(),
        '\u{08}' => r"\\b|\\u0008".into(),
        '\u{0C}' => r"\\f|\\u000[cC]".into(),
        '\n' => r"\\n|\\u000[aA]".into(),
        '\r' => r"\\r|\\u000[dD]".into(),
        '\t' => r"\\t|\\u0009".into(),
        '/' => r"/|\\/".into(),
        c if (c as u32) < 0x20 => format!(r"\\u00{}", hex_literal(c as u32 & 0xFF, 2)),
        c if c.is_ascii() => literal_char(c),
        c => {
            let mut units = [0u16; 2];
            let escaped: Vec<String> = c
                .encode_utf16(&mut units)
                .iter()
                .map(|&unit| format!(r"\\u{}", hex_literal(unit as u32, 4)))
                .collect();
            format!("{}|{}", literal_char(c), escaped.join(""))
        }
    }
}

/// `value` written as `width` hex digits, each letter matching either case.
fn hex_literal(value: u32, width: usize) -> String {
    format!("{value:0width$X}")
        .chars()
        .map(|d| {
            if d.is_ascii_alphabetic() {
                format!("[{}{}]", d, d.to_ascii_lowercase())
            } else {
                d.to_string()
            }
        })
        .collect()
}

/// A JSON string literal whose decoded value is exactly `text`.
pub fn string_literal(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        let encoded = encoded_char(c);
        if encoded.contains('|') {
            out.push_str(&format!("(?:{encoded})"));
        } else {
            out.push_str(&encoded);
        }
    }
    out.push('"');
    out
}

/// A regex for exactly the JSON value `value` (object keys in the given order).
pub(crate) fn value_literal(ctx: &Ctx, value: &Value) -> String {
    let ws = &ctx.ws;
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_literal(n),
        Value::String(s) => string_literal(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(|v| value_literal(ctx, v)).collect();
            if inner.is_empty() {
                format!(r"\[{ws}\]")
            } else {
                format!(r"\[{ws}{}{ws}\]", inner.join(&format!("{ws},{ws}")))
            }
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}{ws}:{ws}{}", string_literal(k), value_literal(ctx, v)))
                .collect();
            if inner.is_empty() {
                format!(r"\{{{ws}\}}")
            } else {
                format!(r"\{{{ws}{}{ws}\}}", inner.join(&format!("{ws},{ws}")))
            }
        }
    }
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
pub(crate) fn any_value(ctx: &Ctx, depth: usize) -> String {
    let ws = &ctx.ws;
    let string = format!("\"{STRING_CHAR}*\"");
    let primitive = format!("{string}|{NUMBER}|true|false|null");
    if depth == 0 {
        return format!("(?:{primitive})");
    }
    let inner = any_value(ctx, depth - 1);
    let sep = format!("{ws},{ws}");
    let array = format!(r"\[{ws}(?:{inner}(?:{sep}{inner})*)?{ws}\]");
    let member = format!("{string}{ws}:{ws}{inner}");
    let object = format!(r"\{{{ws}(?:{member}(?:{sep}{member})*)?{ws}\}}");
    format!("(?:{primitive}|{array}|{object})")
}
