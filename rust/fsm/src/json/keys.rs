//! Regexes for JSON object keys in any spelling: those that decode to one of a set of names,
//! and those that decode to none of them.

use super::text::{class_char, every_encoding, hex4_not_in, short_escape, STRING_CHAR};

/// A regex for JSON-encoded keys (with quotes) whose decoded text is none of `names`, in any
/// spelling: escapes are allowed (`json.dumps` writes non-ASCII characters as `\u` escapes,
/// and keys may hold quotes or backslashes), and a declared name stays excluded however its
/// characters are escaped.
pub fn key_not_in(names: &[&str]) -> String {
    let chars: Vec<Vec<char>> = names.iter().map(|n| n.chars().collect()).collect();
    let refs: Vec<&[char]> = chars.iter().map(Vec::as_slice).collect();
    format!("\"{}\"", not_in_set(&refs))
}

/// A regex for JSON-encoded keys (with quotes) whose decoded text is one of `names`, in any
/// spelling (every character raw, short-escaped or `\u`-escaped): subtracted from any key,
/// it leaves the keys of [`key_not_in`] (and the lone high surrogates that one refuses) with
/// a product DFA about as small as the names' trie, where `key_not_in`'s own DFA grows with
/// every level's negated classes.
pub fn key_in(names: &[&str]) -> String {
    let alternatives: Vec<String> = names
        .iter()
        .map(|name| name.chars().map(|c| format!("(?:{})", every_encoding(c))).collect::<String>())
        .collect();
    format!("\"(?:{})\"", alternatives.join("|"))
}

/// String bodies whose decoded text is none of `words`: a trie walk, one decoded character per
/// level, where each level admits any encoding of a character that leaves every word.
fn not_in_set(words: &[&[char]]) -> String {
    let any = format!("{STRING_CHAR}*");
    if words.is_empty() {
        return any;
    }
    let mut firsts: Vec<char> = words.iter().filter_map(|w| w.first().copied()).collect();
    firsts.sort_unstable();
    firsts.dedup();
    let mut parts = Vec::new();
    if words.iter().all(|w| !w.is_empty()) {
        parts.push(String::new());
    }
    parts.push(format!("{}{any}", char_not_in(&firsts)));
    for &c in &firsts {
        let rests: Vec<&[char]> = words.iter().filter(|w| w.first() == Some(&c)).map(|w| &w[1..]).collect();
        parts.push(format!("(?:{}){}", every_encoding(c), not_in_set(&rests)));
    }
    format!("(?:{})", parts.join("|"))
}

/// One encoded string character whose decoded value is none of `excluded`. An escaped UTF-16
/// high surrogate is refused when an excluded character starts with it (its pair could spell
/// that character): fewer keys, never a declared one.
fn char_not_in(excluded: &[char]) -> String {
    let raw: String = excluded.iter().map(|&c| class_char(c)).collect();
    let mut forms = vec![format!(r#"[^"\\\x00-\x1F{raw}]"#)];
    let shorts: String = ['"', '\\', '/', '\u{08}', '\u{0C}', '\n', '\r', '\t']
        .into_iter()
        .filter(|c| !excluded.contains(c))
        .filter_map(short_escape)
        .map(class_char)
        .collect();
    if !shorts.is_empty() {
        forms.push(format!(r"\\[{shorts}]"));
    }
    let units: Vec<u32> = excluded
        .iter()
        .map(|&c| {
            let mut buffer = [0u16; 2];
            u32::from(c.encode_utf16(&mut buffer)[0])
        })
        .collect();
    if let Some(hex) = hex4_not_in(&units) {
        forms.push(format!(r"\\u{hex}"));
    }
    format!("(?:{})", forms.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::{ByteDfa, CompileLimits};

    fn matches(pattern: &str, text: &str) -> bool {
        ByteDfa::build(pattern, &CompileLimits::default()).unwrap().matches(text.as_bytes())
    }

    #[test]
    fn key_in_and_key_not_in_split_the_keys() {
        let names = ["name", "a/b", "é", "", "q\"t"];
        let inside = key_in(&names);
        let outside = key_not_in(&names);
        let declared = [
            r#""name""#,
            r#""n\u0061me""#,
            r#""\u006Eame""#,
            r#""a/b""#,
            r#""a\/b""#,
            r#""a\u002fb""#,
            r#""é""#,
            r#""\u00e9""#,
            r#""\u00E9""#,
            r#""""#,
            r#""q\"t""#,
            r#""q\u0022t""#,
        ];
        for key in declared {
            assert!(matches(&inside, key) && !matches(&outside, key), "{key}");
        }
        let undeclared = [r#""nam""#, r#""names""#, r#""Name""#, r#""a""#, r#""\u00e8""#, r#""x""#, r#""q""#];
        for key in undeclared {
            assert!(!matches(&inside, key) && matches(&outside, key), "{key}");
        }
    }
}
