//! Regexes for JSON text (not JSON Schema): one string character, numbers, a character in
//! each form a JSON string may spell it, string literals and strings of a length. The schema
//! compiler writes its regexes from these; the automata of this module read the same language.

/// One character of a JSON string body: anything but `"`, `\` and control characters, or an
/// escape sequence.
pub const STRING_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;

/// A JSON number in any form.
pub const NUMBER: &str = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?";

/// A JSON integer without fraction or exponent.
pub const INTEGER: &str = r"-?(?:0|[1-9][0-9]*)";

/// One char as a regex literal outside a class. Escapes use the common dialect (`\.`, `\xHH`)
/// so the same regex also works in other engines.
pub(super) fn literal_char(c: char) -> String {
    match c {
        '\\' | '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$' => {
            format!("\\{c}")
        }
        c if (c as u32) < 0x20 || c == '\u{7F}' => format!("\\x{:02X}", c as u32),
        c => c.to_string(),
    }
}

/// One char as a member of a character class.
pub fn class_char(c: char) -> String {
    match c {
        '\\' | ']' | '[' | '^' | '-' | '&' | '~' => format!("\\{c}"),
        c if (c as u32) < 0x20 || c == '\u{7F}' => format!("\\x{:02X}", c as u32),
        c => c.to_string(),
    }
}

/// `sub` repeated `min..=max` times (`max = None`: unbounded), with the plainest quantifier.
pub fn repeat(sub: &str, min: usize, max: Option<usize>) -> String {
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
pub fn encoded_char(c: char) -> String {
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

/// Every JSON encoding of one character inside a string, as a regex: the raw character where
/// JSON allows it, its short escape if it has one, and its `\uXXXX` escape (UTF-16 units, any
/// hex case). Used where a spelling must be excluded in all its forms.
pub(super) fn every_encoding(c: char) -> String {
    let mut forms = Vec::new();
    if c != '"' && c != '\\' && (c as u32) >= 0x20 {
        forms.push(literal_char(c));
    }
    if let Some(short) = short_escape(c) {
        forms.push(format!(r"\\{}", literal_char(short)));
    }
    let mut units = [0u16; 2];
    let escaped: String = c
        .encode_utf16(&mut units)
        .iter()
        .map(|&unit| format!(r"\\u{}", hex_literal(unit as u32, 4)))
        .collect();
    forms.push(escaped);
    forms.join("|")
}

/// The letter after `\` in a short escape of `c` (`\n` for a newline, ...), if it has one.
pub(super) fn short_escape(c: char) -> Option<char> {
    match c {
        '"' => Some('"'),
        '\\' => Some('\\'),
        '/' => Some('/'),
        '\u{08}' => Some('b'),
        '\u{0C}' => Some('f'),
        '\n' => Some('n'),
        '\r' => Some('r'),
        '\t' => Some('t'),
        _ => None,
    }
}

/// Four hex digits (any case) whose value is none of `excluded`, or `None` if nothing is left.
pub(super) fn hex4_not_in(excluded: &[u32]) -> Option<String> {
    let digits: Vec<Vec<u8>> =
        excluded.iter().filter(|&&v| v <= 0xFFFF).map(|v| format!("{v:04X}").into_bytes()).collect();
    let refs: Vec<&[u8]> = digits.iter().map(Vec::as_slice).collect();
    hex_digits_not_in(&refs, 4)
}

fn hex_digits_not_in(excluded: &[&[u8]], len: usize) -> Option<String> {
    let any = |n: usize| if n == 0 { String::new() } else { format!("[0-9a-fA-F]{{{n}}}") };
    if excluded.is_empty() {
        return Some(any(len));
    }
    if len == 0 {
        return None;
    }
    let mut firsts: Vec<u8> = excluded.iter().map(|d| d[0]).collect();
    firsts.sort_unstable();
    firsts.dedup();
    let mut parts = Vec::new();
    let others: String = b"0123456789ABCDEF"
        .iter()
        .filter(|d| !firsts.contains(d))
        .flat_map(|&d| {
            let d = d as char;
            if d.is_ascii_alphabetic() {
                vec![d, d.to_ascii_lowercase()]
            } else {
                vec![d]
            }
        })
        .collect();
    if !others.is_empty() {
        parts.push(format!("[{others}]{}", any(len - 1)));
    }
    for &first in &firsts {
        let rests: Vec<&[u8]> = excluded.iter().filter(|d| d[0] == first).map(|d| &d[1..]).collect();
        if let Some(rest) = hex_digits_not_in(&rests, len - 1) {
            let digit = first as char;
            let digit = if digit.is_ascii_alphabetic() {
                format!("[{digit}{}]", digit.to_ascii_lowercase())
            } else {
                digit.to_string()
            };
            parts.push(format!("{digit}{rest}"));
        }
    }
    (!parts.is_empty()).then(|| format!("(?:{})", parts.join("|")))
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

/// The regex of JSON strings (with quotes) of `min_len` to `max_len` characters.
pub fn json_string_regex(min_len: usize, max_len: Option<usize>) -> String {
    let body = match max_len {
        Some(max) => repeat(STRING_CHAR, min_len, Some(max)),
        None if min_len == 0 => format!("{STRING_CHAR}*"),
        None => repeat(STRING_CHAR, min_len, None),
    };
    format!("\"{body}\"")
}
