//! A JSON-schema `pattern` (matched against the *decoded* string, anywhere unless anchored)
//! -> a regex over the JSON-encoded string body (full match).
//!
//! Every character the pattern can match is emitted in the forms JSON allows: raw where legal,
//! escaped where required (`"`, `\`, control characters) and, for small classes and literals,
//! also as `\uXXXX` escapes of non-ASCII characters.

use regex_syntax::hir::{Class, ClassUnicodeRange, Hir, HirKind, Look};

use sglr_fsm::json::{class_char, encoded_char, repeat, STRING_CHAR};

use crate::to_regex::NEVER;

/// Classes with more non-ASCII ranges than this match those characters raw only (their
/// `\uXXXX` spellings would make the regex huge); that forbids some valid spellings but never
/// admits an invalid one.
const MAX_ESCAPED_RANGES: usize = 16;

/// A translated pattern: the body regex and the decoded lengths (in characters) it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatternBody {
    pub regex: String,
    pub min_chars: usize,
    /// `None`: unbounded.
    pub max_chars: Option<usize>,
}

/// Regex (without quotes) for string bodies whose decoded value matches `pattern` (search
/// semantics: unanchored ends may be surrounded by any characters); the error is a reason.
pub(crate) fn pattern_body(pattern: &str) -> Result<PatternBody, String> {
    let hir =
        parse(&ascii_perl_classes(pattern)).map_err(|e| format!("cannot parse pattern {pattern:?}: {e}"))?;
    search(&hir)
}

/// Most compiled patterns [`search_regex`] keeps (past it they are dropped and compiled again).
const MAX_SEARCH_REGEXES: usize = 256;

/// `pattern` as a regex over decoded text, matched anywhere unless anchored (to check one
/// string, such as an `enum` value, against it); the error is a reason. Kept for the process:
/// a long `enum` checks every value against the same pattern.
pub(crate) fn search_regex(pattern: &str) -> Result<regex::Regex, String> {
    use std::sync::{Mutex, OnceLock, PoisonError};
    static COMPILED: OnceLock<Mutex<rustc_hash::FxHashMap<String, regex::Regex>>> = OnceLock::new();
    let compiled = COMPILED.get_or_init(Default::default);
    if let Some(regex) = compiled.lock().unwrap_or_else(PoisonError::into_inner).get(pattern) {
        return Ok(regex.clone());
    }
    let regex = regex::Regex::new(&ascii_perl_classes(pattern))
        .map_err(|e| format!("cannot parse pattern {pattern:?}: {e}"))?;
    let mut compiled = compiled.lock().unwrap_or_else(PoisonError::into_inner);
    if compiled.len() >= MAX_SEARCH_REGEXES {
        compiled.clear();
    }
    compiled.insert(pattern.to_string(), regex.clone());
    Ok(regex)
}

/// `pattern` with `\d`, `\D`, `\w` and `\W` spelled as the ASCII classes they are in the
/// ECMA-262 regexes JSON schema patterns are written in (the parser's Unicode mode would read
/// `\d` as every script's digits: wrong, and a class whose UTF-8 automaton, repeated
/// `{24}`, built a DFA past the size limit). `\s` is Unicode whitespace in both.
fn ascii_perl_classes(pattern: &str) -> std::borrow::Cow<'_, str> {
    if !pattern.contains('\\') {
        return pattern.into();
    }
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        // NOTE: nested classes are valid inside a class too (`[\dA-F]` -> `[[0-9]A-F]`).
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[0-9A-Za-z_]"),
            Some('W') => out.push_str("[^0-9A-Za-z_]"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out.into()
}

/// Decoded-length bounds of a regex over plain (unescaped) text, matched as a whole.
pub(crate) fn full_match_char_bounds(regex: &str) -> Option<(usize, Option<usize>)> {
    parse(regex).ok().map(|hir| char_bounds(&hir))
}

fn parse(pattern: &str) -> Result<Hir, String> {
    regex_syntax::ParserBuilder::new()
        .unicode(true)
        .utf8(true)
        .build()
        .parse(pattern)
        .map_err(|e| e.to_string())
}

/// `(min, max)` number of characters of the strings `hir` matches (look-arounds are empty).
fn char_bounds(hir: &Hir) -> (usize, Option<usize>) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(literal) => {
            let n = String::from_utf8_lossy(&literal.0).chars().count();
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Repetition(rep) => {
            let (lo, hi) = char_bounds(&rep.sub);
            let max = match (rep.max, hi) {
                (_, Some(0)) => Some(0),
                (Some(count), Some(hi)) => (count as usize).checked_mul(hi),
                _ => None,
            };
            (lo.saturating_mul(rep.min as usize), max)
        }
        HirKind::Capture(capture) => char_bounds(&capture.sub),
        HirKind::Concat(items) => items.iter().map(char_bounds).fold((0, Some(0)), |a, b| {
            (a.0.saturating_add(b.0), a.1.zip(b.1).and_then(|(x, y)| x.checked_add(y)))
        }),
        HirKind::Alternation(branches) => {
            let all: Vec<_> = branches.iter().map(char_bounds).collect();
            let min = all.iter().map(|b| b.0).min().unwrap_or(0);
            let max = all.iter().map(|b| b.1).try_fold(0, |acc, b| b.map(|b| acc.max(b)));
            (min, max)
        }
    }
}

/// One alternative of a pattern: its regex without the free characters around it, and
/// whether each end is free (unanchored).
struct SearchPart {
    core: String,
    start_free: bool,
    end_free: bool,
    min_chars: usize,
    max_chars: Option<usize>,
}

fn search(hir: &Hir) -> Result<PatternBody, String> {
    let mut parts = Vec::new();
    search_parts(hir, &mut parts)?;
    // NOTE: alternatives with the same free ends share them, `X*(?:a|b)X*` rather than
    // `X*aX*|X*bX*` (the same strings): separate loops make the DFA track every alternative's
    // progress at once, a product of their states (eleven unanchored time-zone prefixes took
    // more than the DFA size limit).
    let mut groups = Vec::new();
    for (start_free, end_free) in [(false, false), (false, true), (true, false), (true, true)] {
        let cores: Vec<&str> = parts
            .iter()
            .filter(|p| p.start_free == start_free && p.end_free == end_free)
            .map(|p| p.core.as_str())
            .collect();
        if cores.is_empty() {
            continue;
        }
        let free = format!("{STRING_CHAR}*");
        let core = if cores.len() == 1 { cores[0].to_string() } else { format!("(?:{})", cores.join("|")) };
        let prefix = if start_free { free.as_str() } else { "" };
        let suffix = if end_free { free.as_str() } else { "" };
        groups.push(format!("{prefix}{core}{suffix}"));
    }
    let regex = if groups.len() == 1 {
        groups.pop().unwrap_or_default()
    } else {
        format!("(?:{})", groups.join("|"))
    };
    Ok(PatternBody {
        regex,
        min_chars: parts.iter().map(|p| p.min_chars).min().unwrap_or(0),
        max_chars: parts.iter().try_fold(0, |acc, p| p.max_chars.map(|m| acc.max(m))),
    })
}

/// The alternatives of `hir` (nested alternations and groups flattened) into `parts`.
fn search_parts(hir: &Hir, parts: &mut Vec<SearchPart>) -> Result<(), String> {
    match hir.kind() {
        HirKind::Alternation(branches) => {
            for branch in branches {
                search_parts(branch, parts)?;
            }
            Ok(())
        }
        HirKind::Capture(capture) => search_parts(&capture.sub, parts),
        HirKind::Concat(items) => {
            parts.push(search_concat(items)?);
            Ok(())
        }
        _ => {
            parts.push(search_concat(std::slice::from_ref(hir))?);
            Ok(())
        }
    }
}

fn search_concat(items: &[Hir]) -> Result<SearchPart, String> {
    let mut items = items;
    let is_look = |hir: &Hir, want: &[Look]| matches!(hir.kind(), HirKind::Look(l) if want.contains(l));
    let anchored_start =
        items.first().is_some_and(|h| is_look(h, &[Look::Start, Look::StartLF, Look::StartCRLF]));
    if anchored_start {
        items = &items[1..];
    }
    let anchored_end = items.last().is_some_and(|h| is_look(h, &[Look::End, Look::EndLF, Look::EndCRLF]));
    if anchored_end {
        items = &items[..items.len() - 1];
    }
    let mut core = String::new();
    let (mut min_chars, mut max_chars) = (0usize, Some(0usize));
    for item in items {
        core.push_str(&encode(item)?);
        let (lo, hi) = char_bounds(item);
        min_chars = min_chars.saturating_add(lo);
        max_chars = max_chars.zip(hi).and_then(|(a, b)| a.checked_add(b));
    }
    if !(anchored_start && anchored_end) {
        max_chars = None;
    }
    Ok(SearchPart { core, start_free: !anchored_start, end_free: !anchored_end, min_chars, max_chars })
}

fn encode(hir: &Hir) -> Result<String, String> {
    Ok(match hir.kind() {
        HirKind::Empty => String::new(),
        HirKind::Literal(literal) => {
            let text =
                std::str::from_utf8(&literal.0).map_err(|_| "pattern matches invalid UTF-8".to_string())?;
            text.chars().map(|c| format!("(?:{})", encoded_char(c))).collect()
        }
        HirKind::Class(Class::Unicode(class)) => encode_class(class.ranges()),
        HirKind::Class(Class::Bytes(_)) => return Err("byte classes are not supported".into()),
        HirKind::Look(_) => return Err("anchors and word boundaries are only supported at the ends".into()),
        HirKind::Repetition(rep) => {
            let sub = encode(&rep.sub)?;
            repeat(&sub, rep.min as usize, rep.max.map(|m| m as usize))
        }
        HirKind::Capture(capture) => format!("(?:{})", encode(&capture.sub)?),
        HirKind::Concat(items) => items.iter().map(encode).collect::<Result<String, _>>()?,
        HirKind::Alternation(branches) => {
            let parts: Result<Vec<String>, String> = branches.iter().map(encode).collect();
            format!("(?:{})", parts?.join("|"))
        }
    })
}

/// A class of decoded characters -> the alternation of their JSON spellings.
fn encode_class(ranges: &[ClassUnicodeRange]) -> String {
    let mut raw = Vec::new();
    let mut escapes = Vec::new();
    let mut non_ascii = Vec::new();
    for range in ranges {
        let (lo, hi) = (range.start() as u32, range.end() as u32);
        // Characters that must be escaped inside a JSON string.
        for special in [0x22u32, 0x5C].into_iter().chain(0..0x20).filter(|c| (lo..=hi).contains(c)) {
            escapes.push(encoded_char(char::from_u32(special).expect("ascii")));
        }
        // Raw characters: the range minus controls, `"` and `\`.
        let mut start = lo.max(0x20);
        for cut in [0x22u32, 0x5C] {
            if start <= cut && cut <= hi {
                if start < cut {
                    raw.push((start, cut - 1));
                }
                start = cut + 1;
            }
        }
        if start <= hi {
            raw.push((start, hi));
        }
        if hi >= 0x80 {
            non_ascii.push((lo.max(0x80), hi));
        }
        if (lo..=hi).contains(&0x2F) {
            escapes.push(r"\\/".to_string());
        }
    }
    if non_ascii.len() <= MAX_ESCAPED_RANGES {
        for (lo, hi) in non_ascii {
            escapes.extend(unicode_escapes(lo, hi));
        }
    }
    let mut parts = Vec::new();
    if !raw.is_empty() {
        let body: String = raw
            .iter()
            .map(|&(lo, hi)| {
                let (lo, hi) = (char::from_u32(lo).expect("valid"), char::from_u32(hi).expect("valid"));
                if lo == hi {
                    class_char(lo)
                } else {
                    format!("{}-{}", class_char(lo), class_char(hi))
                }
            })
            .collect();
        parts.push(format!("[{body}]"));
    }
    parts.extend(escapes);
    if parts.is_empty() {
        return NEVER.to_string();
    }
    format!("(?:{})", parts.join("|"))
}

/// `\uXXXX` spellings of the characters in `lo..=hi` (all >= 0x80): BMP characters as one
/// escape, others as a UTF-16 surrogate pair.
fn unicode_escapes(lo: u32, hi: u32) -> Vec<String> {
    let mut out = Vec::new();
    let bmp_hi = hi.min(0xFFFF);
    if lo <= bmp_hi {
        out.push(format!(r"\\u{}", hex_range(lo, bmp_hi, 4)));
    }
    let (lo, hi) = (lo.max(0x10000), hi);
    if lo <= hi && hi >= 0x10000 {
        let split = |c: u32| {
            let v = c - 0x10000;
            (0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))
        };
        let ((hi_a, lo_a), (hi_b, lo_b)) = (split(lo), split(hi));
        let pair = |h: (u32, u32), l: (u32, u32)| {
            format!(r"\\u{}\\u{}", hex_range(h.0, h.1, 4), hex_range(l.0, l.1, 4))
        };
        if hi_a == hi_b {
            out.push(pair((hi_a, hi_a), (lo_a, lo_b)));
        } else {
            out.push(pair((hi_a, hi_a), (lo_a, 0xDFFF)));
            if hi_a + 1 < hi_b {
                out.push(pair((hi_a + 1, hi_b - 1), (0xDC00, 0xDFFF)));
            }
            out.push(pair((hi_b, hi_b), (0xDC00, lo_b)));
        }
    }
    out
}

/// Regex for `width`-digit hex numbers in `lo..=hi`, letters in either case.
pub(crate) fn hex_range(lo: u32, hi: u32, width: usize) -> String {
    let digits = |v: u32| -> Vec<u32> { (0..width).rev().map(|i| (v >> (4 * i)) & 0xF).collect() };
    hex_same_length(&digits(lo), &digits(hi))
}

fn hex_same_length(lo: &[u32], hi: &[u32]) -> String {
    if lo.is_empty() {
        return String::new();
    }
    if lo.len() == 1 {
        return hex_class(lo[0], hi[0]);
    }
    if lo[0] == hi[0] {
        return format!("{}{}", hex_class(lo[0], lo[0]), hex_same_length(&lo[1..], &hi[1..]));
    }
    let tail = lo.len() - 1;
    let any_tail = || format!("{}{{{tail}}}", hex_class(0, 15));
    let lo_min = lo[1..].iter().all(|&d| d == 0);
    let hi_max = hi[1..].iter().all(|&d| d == 15);
    let mut parts = Vec::new();
    let (mut first, mut last) = (lo[0], hi[0]);
    if !lo_min {
        parts.push(format!("{}(?:{})", hex_class(lo[0], lo[0]), hex_same_length(&lo[1..], &vec![15; tail])));
        first += 1;
    }
    if !hi_max {
        last -= 1;
    }
    if first <= last {
        parts.push(format!("{}{}", hex_class(first, last), any_tail()));
    }
    if !hi_max {
        parts.push(format!("{}(?:{})", hex_class(hi[0], hi[0]), hex_same_length(&vec![0; tail], &hi[1..])));
    }
    format!("(?:{})", parts.join("|"))
}

/// Class of hex digits `lo..=hi` (values 0-15), letters in both cases.
fn hex_class(lo: u32, hi: u32) -> String {
    let mut body = String::new();
    let (dlo, dhi) = (lo.min(9), hi.min(9));
    if lo <= 9 {
        body.push_str(&format!("{dlo}-{dhi}"));
    }
    if hi >= 10 {
        let (alo, ahi) = (lo.max(10) - 10, hi - 10);
        let upper = |v: u32| char::from(b'A' + v as u8);
        let lower = |v: u32| char::from(b'a' + v as u8);
        body.push_str(&format!("{}-{}{}-{}", upper(alo), upper(ahi), lower(alo), lower(ahi)));
    }
    format!("[{body}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_matcher(pattern: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{})$", pattern_body(pattern).unwrap().regex)).unwrap()
    }

    #[test]
    fn search_semantics_unless_anchored() {
        let re = body_matcher("ab");
        assert!(re.is_match("xxabyy") && !re.is_match("a b"));
        let re = body_matcher("^ab$");
        assert!(re.is_match("ab") && !re.is_match("xab"));
        let re = body_matcher("^a|b$");
        assert!(re.is_match("a123") && re.is_match("123b") && !re.is_match("1a2"));
    }

    /// Unanchored alternatives share their free ends: the same strings as each alternative
    /// searched alone, in a DFA that stays small (a schema's eleven time-zone regions built a
    /// DFA past the 128 MiB limit when each carried its own loops).
    #[test]
    fn unanchored_alternatives_share_their_free_ends() {
        let regions =
            ["Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe"];
        let pattern = format!("UTC|{}|^x[0-9]$|^y|z$", regions.map(|r| format!("{r}/[A-Za-z]+")).join("|"));
        let whole = body_matcher(&pattern);
        let alone: Vec<regex::Regex> = pattern.split('|').map(body_matcher).collect();
        for text in [
            "UTC",
            "in Europe/Paris!",
            "Asia/",
            "x1",
            "ax1",
            "yes",
            "no y",
            "fizz",
            "Arctic/Longyearbyen",
            "",
        ] {
            assert_eq!(whole.is_match(text), alone.iter().any(|re| re.is_match(text)), "{text}");
        }
        let body = pattern_body(&pattern).unwrap();
        let dfa = sglr_fsm::ByteDfa::build(&body.regex, &sglr_fsm::CompileLimits::default()).unwrap();
        // Each alternative with loops of its own: 311,334 states (15 s to build); shared: 2,127.
        assert!(dfa.num_states() < 4_000, "{} states", dfa.num_states());
        assert_eq!((body.min_chars, body.max_chars), (1, None));
    }

    /// `\d` and `\w` are ASCII as in ECMA-262, inside and outside classes; escapes stay.
    #[test]
    fn perl_classes_are_ascii() {
        let re = body_matcher(r"^\d+$");
        assert!(re.is_match("0129") && !re.is_match("\u{663}") && !re.is_match("x"));
        let re = body_matcher(r"^[A-Fa-f\d]{4}$");
        assert!(re.is_match("09aF") && !re.is_match("09a\u{663}"));
        let re = body_matcher(r"^\w\W\D$");
        assert!(re.is_match("a-x") && re.is_match("_ ?") && !re.is_match("\u{e9}-x") && !re.is_match("a-1"));
        let re = body_matcher(r"^\\d\s$");
        assert!(re.is_match(r"\\d ") && !re.is_match("1 "));
    }

    #[test]
    fn specials_are_json_escaped() {
        let re = body_matcher(r#"^a"b\\c\nd$"#);
        assert!(re.is_match(r#"a\"b\\c\nd"#));
        assert!(!re.is_match("a\"b"));
        let re = body_matcher("^.$");
        assert!(re.is_match("x") && re.is_match(r#"\""#) && re.is_match(r"\u0001"));
        assert!(!re.is_match("\""));
    }

    #[test]
    fn non_ascii_also_as_unicode_escapes() {
        let re = body_matcher("^caf\u{e9}$");
        assert!(re.is_match("caf\u{e9}") && re.is_match(r"caf\u00e9") && re.is_match(r"caf\u00E9"));
        let re = body_matcher("^[\u{e0}-\u{ff}]+$");
        assert!(re.is_match(r"\u00e0\u00FF") && !re.is_match(r"\u00df"));
        let re = body_matcher("^\u{1F600}$");
        assert!(re.is_match(r"\ud83d\ude00") && re.is_match("\u{1F600}"));
    }

    #[test]
    fn hex_ranges_are_exact() {
        let re = regex::Regex::new(&format!("^(?:{})$", hex_range(0x00E0, 0x1A3F, 4))).unwrap();
        for v in 0..0x2000u32 {
            let inside = (0xE0..=0x1A3F).contains(&v);
            assert_eq!(re.is_match(&format!("{v:04x}")), inside, "{v:x}");
            assert_eq!(re.is_match(&format!("{v:04X}")), inside, "{v:X}");
        }
    }

    #[test]
    fn length_bounds_of_patterns() {
        let body = pattern_body("^[a-z]{2,5}(x|yz)$").unwrap();
        assert_eq!((body.min_chars, body.max_chars), (3, Some(7)));
        let body = pattern_body("^ab").unwrap();
        assert_eq!((body.min_chars, body.max_chars), (2, None));
        assert_eq!(full_match_char_bounds("[0-9]{4}-[0-9]{2}"), Some((7, Some(7))));
    }

    #[test]
    fn unsupported_constructs_are_reasons() {
        assert!(pattern_body(r"(?=a)b").is_err());
        assert!(pattern_body(r"a\bb").is_err());
        assert!(pattern_body(r"(a").is_err());
    }
}
