//! A regex whose language is a few short strings (an `enum` or `const` value, a literal with
//! optional whitespace around it) built as the minimal DFA of those strings, directly: a trie
//! whose equivalent states are merged bottom-up. A grammar builds such lexemes on first use,
//! inside a token mask, where the general NFA + subset construction costs several times more.

use regex_syntax::hir::{Class, Hir, HirKind};
use rustc_hash::FxHashMap;

use super::{ByteDfa, CompileLimits, DEAD};

/// Most strings the fast path enumerates (an `enum`'s values, times optional whitespace).
const MAX_STRINGS: usize = 256;
/// Most bytes over all strings enumerated.
const MAX_TOTAL_BYTES: usize = 16 * 1024;
/// Most characters one class may stand for (`[ ]`, `[eE]`: a few alternatives, not a range).
const MAX_CLASS_CHARS: usize = 4;

/// The DFA of `hir`'s language when it is a small finite set of strings, else `None` (the
/// caller takes the general path, which also reports every error).
pub(crate) fn finite_language_dfa(hir: &Hir, limits: &CompileLimits) -> Option<ByteDfa> {
    let strings = strings_of(hir)?;
    if strings.is_empty() {
        return None;
    }
    strings_dfa(&strings, limits)
}

/// The minimal DFA of `strings` (not empty), within `limits`.
pub(crate) fn strings_dfa(strings: &[Vec<u8>], limits: &CompileLimits) -> Option<ByteDfa> {
    let dfa = minimal_dfa(strings);
    (dfa.memory_bytes() <= limits.dfa_size_limit).then_some(dfa)
}

/// The strings of `pattern` when it is written in the plain subset the schema compiler uses
/// for literals (characters and escaped punctuation, `(?:...)`, `|`, `?`, classes of a few
/// listed characters) and they are few; `None` for anything else (the caller parses it in
/// full: this skips a parse that costs more than the rest of such a lexeme's build).
pub(crate) fn plain_pattern_strings(pattern: &str) -> Option<Vec<Vec<u8>>> {
    let mut parser = PlainParser { chars: pattern.chars().collect(), at: 0 };
    let strings = parser.alternation()?;
    (parser.at == parser.chars.len() && !strings.is_empty()).then_some(strings)
}

/// Punctuation an escape makes a literal in the plain subset (a subset of what `regex-syntax`
/// reads that way: letters, digits, `<` and `>` escape something else).
const PLAIN_ESCAPES: &str = "\\.+*?()|[]{}^$-\"/:,#&~";

struct PlainParser {
    chars: Vec<char>,
    at: usize,
}

impl PlainParser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn alternation(&mut self) -> Option<Vec<Vec<u8>>> {
        let mut all = self.concatenation()?;
        while self.peek() == Some('|') {
            self.at += 1;
            all.extend(self.concatenation()?);
            if all.len() > MAX_STRINGS {
                return None;
            }
        }
        Some(all)
    }

    fn concatenation(&mut self) -> Option<Vec<Vec<u8>>> {
        let mut all = vec![Vec::new()];
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let mut atom = self.atom()?;
            if self.peek() == Some('?') {
                self.at += 1;
                if matches!(self.peek(), Some('?' | '+' | '*' | '{')) {
                    return None;
                }
                atom.push(Vec::new());
            }
            if matches!(self.peek(), Some('+' | '*' | '{')) {
                return None;
            }
            all = product(&all, &atom)?;
        }
        Some(all)
    }

    fn atom(&mut self) -> Option<Vec<Vec<u8>>> {
        let c = self.peek()?;
        self.at += 1;
        let literal = |c: char| Some(vec![c.encode_utf8(&mut [0u8; 4]).as_bytes().to_vec()]);
        match c {
            '(' => {
                if self.chars.get(self.at..self.at + 2) != Some(&['?', ':'][..]) {
                    return None;
                }
                self.at += 2;
                let inner = self.alternation()?;
                (self.peek() == Some(')')).then(|| self.at += 1)?;
                Some(inner)
            }
            '[' => {
                let mut members = Vec::new();
                while let Some(member) = self.peek() {
                    self.at += 1;
                    if member == ']' && !members.is_empty() {
                        return (members.len() <= MAX_CLASS_CHARS).then_some(members);
                    }
                    if !(member.is_ascii_alphanumeric() || member == ' ') {
                        return None;
                    }
                    let bytes = vec![member as u8];
                    if !members.contains(&bytes) {
                        members.push(bytes);
                    }
                }
                None
            }
            '\\' => {
                let escaped = self.peek()?;
                self.at += 1;
                PLAIN_ESCAPES.contains(escaped).then(|| literal(escaped))?
            }
            '.' | '+' | '*' | '?' | ')' | '|' | ']' | '{' | '}' | '^' | '$' => None,
            c => literal(c),
        }
    }
}

/// Every string of `hir`'s language, when it is finite and small.
fn strings_of(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let strings = match hir.kind() {
        HirKind::Empty => vec![Vec::new()],
        HirKind::Literal(literal) => vec![literal.0.to_vec()],
        HirKind::Class(class) => class_strings(class)?,
        HirKind::Look(_) => return None,
        HirKind::Repetition(repetition) => {
            let max = repetition.max?;
            let item = strings_of(&repetition.sub)?;
            let mut all = Vec::new();
            let mut power = vec![Vec::new()];
            for count in 0..=max {
                if count >= repetition.min {
                    all.extend(power.iter().cloned());
                }
                if count < max {
                    power = product(&power, &item)?;
                }
                if all.len() > MAX_STRINGS {
                    return None;
                }
            }
            all
        }
        HirKind::Capture(capture) => strings_of(&capture.sub)?,
        HirKind::Concat(parts) => {
            let mut all = vec![Vec::new()];
            for part in parts {
                all = product(&all, &strings_of(part)?)?;
            }
            all
        }
        HirKind::Alternation(alternatives) => {
            let mut all = Vec::new();
            for alternative in alternatives {
                all.extend(strings_of(alternative)?);
                if all.len() > MAX_STRINGS {
                    return None;
                }
            }
            all
        }
    };
    let total: usize = strings.iter().map(Vec::len).sum();
    (strings.len() <= MAX_STRINGS && total <= MAX_TOTAL_BYTES).then_some(strings)
}

/// Each string of `left` followed by each of `right`, within the bounds.
fn product(left: &[Vec<u8>], right: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    if left.len().saturating_mul(right.len()) > MAX_STRINGS {
        return None;
    }
    let mut all = Vec::with_capacity(left.len() * right.len());
    let mut total = 0usize;
    for head in left {
        for tail in right {
            total += head.len() + tail.len();
            if total > MAX_TOTAL_BYTES {
                return None;
            }
            all.push([head.as_slice(), tail.as_slice()].concat());
        }
    }
    Some(all)
}

/// The UTF-8 (or byte) strings a class of a few characters matches.
fn class_strings(class: &Class) -> Option<Vec<Vec<u8>>> {
    let mut strings = Vec::new();
    match class {
        Class::Unicode(class) => {
            for range in class.iter() {
                let (start, end) = (range.start() as u32, range.end() as u32);
                if (end - start) as usize >= MAX_CLASS_CHARS || strings.len() >= MAX_CLASS_CHARS {
                    return None;
                }
                for code in start..=end {
                    let c = char::from_u32(code)?;
                    strings.push(c.encode_utf8(&mut [0u8; 4]).as_bytes().to_vec());
                }
            }
        }
        Class::Bytes(class) => {
            for range in class.iter() {
                if (range.end() - range.start()) as usize >= MAX_CLASS_CHARS
                    || strings.len() >= MAX_CLASS_CHARS
                {
                    return None;
                }
                strings.extend((range.start()..=range.end()).map(|byte| vec![byte]));
            }
        }
    }
    (strings.len() <= MAX_CLASS_CHARS).then_some(strings)
}

/// The minimal DFA of a finite set of strings: their trie, with states of equal futures
/// merged from the leaves up (in an acyclic DFA, a state's future is its acceptance and its
/// already merged successors).
fn minimal_dfa(strings: &[Vec<u8>]) -> ByteDfa {
    // Byte classes as the general path numbers them: maximal runs of bytes no string tells
    // apart, numbered in byte order.
    let mut used = [false; 256];
    for string in strings {
        for &byte in string {
            used[byte as usize] = true;
        }
    }
    let mut classes = [0u8; 256];
    let mut class = 0u8;
    for byte in 1..256 {
        if used[byte] || used[byte - 1] {
            class += 1;
        }
        classes[byte] = class;
    }
    let num_classes = class as usize + 1;
    let mut class_len = vec![0u16; num_classes];
    let mut class_byte = vec![0u8; num_classes];
    for byte in (0..256).rev() {
        class_len[classes[byte] as usize] += 1;
        class_byte[classes[byte] as usize] = byte as u8;
    }

    // The trie: node 0 is the root; children by class.
    let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
    let mut accepting = vec![false];
    for string in strings {
        let mut node = 0usize;
        for &byte in string {
            let class = classes[byte as usize];
            node = match children[node].iter().find(|&&(c, _)| c == class) {
                Some(&(_, child)) => child as usize,
                None => {
                    let child = children.len();
                    children[node].push((class, child as u32));
                    children.push(Vec::new());
                    accepting.push(false);
                    child
                }
            };
        }
        accepting[node] = true;
    }

    // Children always come after their parent: merging from the last node back sees every
    // child's merged state first.
    let mut merged = vec![0u32; children.len()];
    let mut states: FxHashMap<(bool, Vec<(u8, u32)>), u32> = FxHashMap::default();
    let mut rows: Vec<(bool, Vec<(u8, u32)>)> = Vec::new();
    for node in (0..children.len()).rev() {
        let mut row: Vec<(u8, u32)> =
            children[node].iter().map(|&(class, child)| (class, merged[child as usize])).collect();
        row.sort_unstable();
        let key = (accepting[node], row);
        merged[node] = *states.entry(key.clone()).or_insert_with(|| {
            rows.push(key);
            (rows.len() - 1) as u32
        });
    }
    // Raw table with the root first (`from_raw` renumbers breadth-first from state 0).
    let root = merged[0] as usize;
    let raw_id = |state: u32| -> u32 {
        match state as usize {
            s if s == root => 0,
            0 => root as u32,
            s => s as u32,
        }
    };
    let mut raw_trans = vec![DEAD; rows.len() * num_classes];
    let mut raw_accepting = vec![false; rows.len()];
    for (state, (accepts, row)) in rows.iter().enumerate() {
        let raw = raw_id(state as u32) as usize;
        raw_accepting[raw] = *accepts;
        for &(class, next) in row {
            raw_trans[raw * num_classes + class as usize] = raw_id(next);
        }
    }
    ByteDfa::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &raw_accepting)
        .expect("a non-empty set of strings is a non-empty language")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::CompileLimits;

    fn hir(pattern: &str) -> Hir {
        regex_syntax::ParserBuilder::new().unicode(true).utf8(true).build().parse(pattern).unwrap()
    }

    /// Both DFAs agree on every string up to `len` bytes over `alphabet` (and reject the rest).
    fn same_language(a: &ByteDfa, b: &ByteDfa, alphabet: &[u8], len: usize) {
        let mut frontier = vec![(Vec::<u8>::new(), 0u32, 0u32)];
        for _ in 0..=len {
            let mut next = Vec::new();
            for (text, sa, sb) in frontier {
                assert_eq!(a.is_accepting(sa), b.is_accepting(sb), "{:?}", String::from_utf8_lossy(&text));
                for &byte in alphabet {
                    let (na, nb) = (a.next(sa, byte), b.next(sb, byte));
                    assert_eq!(na == DEAD, nb == DEAD, "{:?} then {byte}", String::from_utf8_lossy(&text));
                    if na != DEAD {
                        let mut longer = text.clone();
                        longer.push(byte);
                        next.push((longer, na, nb));
                    }
                }
            }
            frontier = next;
        }
        assert!(frontier.is_empty() || len > 0);
    }

    #[test]
    fn small_finite_languages_take_the_fast_path_and_match_the_general_one() {
        let limits = CompileLimits::default();
        for pattern in [
            r#"(?:[ ]?)(?:(?:"low"|"medium"|"high"))"#,
            r#"(?:[ ]?),(?:[ ]?)(?:"nifti")"#,
            r#"(?:(?:true|false))"#,
            r#"(?:"a\.b"|"ab"|"")[eE]?x{0,2}"#,
            "é|e|",
        ] {
            let fast = finite_language_dfa(&hir(pattern), &CompileLimits::default()).expect(pattern);
            let general = ByteDfa::build_general(pattern, &limits).unwrap();
            let mut alphabet: Vec<u8> = pattern.bytes().collect();
            alphabet.extend([b' ', 0xc3, 0xa9, b'z']);
            alphabet.sort_unstable();
            alphabet.dedup();
            same_language(&fast, &general, &alphabet, 12);
            same_language(&ByteDfa::build(pattern, &limits).unwrap(), &general, &alphabet, 12);
            assert!(fast.num_states() <= general.num_states(), "{pattern}: minimal");
        }
    }

    #[test]
    fn infinite_or_large_languages_are_left_to_the_general_path() {
        for pattern in ["a*", "[a-z]", "[0-9]{1,3}x", "(?:ab|cd){0,20}", r"\b"] {
            assert!(finite_language_dfa(&hir(pattern), &CompileLimits::default()).is_none(), "{pattern}");
        }
    }

    fn sorted(mut strings: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        strings.sort();
        strings.dedup();
        strings
    }

    #[test]
    fn every_plain_escape_is_the_literal_for_the_full_parser_too() {
        for c in PLAIN_ESCAPES.chars() {
            let pattern = format!("\\{c}");
            assert_eq!(strings_of(&hir(&pattern)), Some(vec![c.to_string().into_bytes()]), "{pattern}");
            assert_eq!(plain_pattern_strings(&pattern), Some(vec![c.to_string().into_bytes()]), "{pattern}");
        }
    }

    #[test]
    fn the_plain_reader_refuses_what_it_does_not_know() {
        for pattern in [
            r"\d", r"\<", "a+", "(?i:a)", "(a)", "[a-z]", "[^a]", "a{2}", "^a", "a.", "(?:a", "a)", "[a",
            "a??",
        ] {
            assert_eq!(plain_pattern_strings(pattern), None, "{pattern}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_plain_reader_agrees_with_the_full_parser(
            pieces in proptest::collection::vec(0usize..12, 0..10),
        ) {
            // Patterns from the subset the schema compiler writes, nested and alternated.
            const ATOMS: [&str; 12] =
                ["a", "\"", "(?:[ ]?)", ",", "(?:", ")", "|", "é", "\\.", "[eE]", "?", "x"];
            let pattern: String = pieces.iter().map(|&i| ATOMS[i]).collect();
            let full = regex_syntax::ParserBuilder::new().unicode(true).utf8(true).build().parse(&pattern);
            match (plain_pattern_strings(&pattern), full) {
                (Some(plain), Ok(hir)) => {
                    let full = strings_of(&hir).expect("a plain pattern's language is finite");
                    proptest::prop_assert_eq!(sorted(plain), sorted(full), "{}", pattern);
                }
                (Some(plain), Err(error)) => {
                    proptest::prop_assert!(false, "{pattern}: read as {plain:?}, but {error}");
                }
                (None, _) => {}
            }
        }
    }

    #[test]
    fn suffixes_are_shared() {
        // "Monday" .. "Sunday" share "day\"": far fewer states than their trie.
        let dfa =
            finite_language_dfa(&hir(r#""Monday"|"Tuesday"|"Sunday""#), &CompileLimits::default()).unwrap();
        let trie_nodes = 1 + 1 + "Monday\"".len() + "Tuesday\"".len() + "Sunday\"".len();
        assert!(dfa.num_states() < trie_nodes - 8, "{}", dfa.num_states());
    }
}
