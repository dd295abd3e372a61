//! Integer and number regexes with `minimum` / `maximum` bounds.
//!
//! Integer ranges are exact (digit-by-digit range splitting). Numbers with bounds, integral or
//! fractional, are exact too: integer part by range splitting, fraction digit by digit against
//! the bound's digits. A bounded number is written without exponent (with one, the values above
//! a bound are no regular language).

use sglr_fsm::json::{repeat, INTEGER, NUMBER};

/// Inclusive integer bounds; `None` is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntBounds {
    pub lo: Option<i128>,
    pub hi: Option<i128>,
}

/// Regex for the decimal integers in `bounds` (no leading zeros, no `-0`); `None` if empty.
pub(crate) fn integer_in(bounds: IntBounds) -> Option<String> {
    let IntBounds { lo, hi } = bounds;
    if let (Some(lo), Some(hi)) = (lo, hi) {
        if lo > hi {
            return None;
        }
    }
    if lo.is_none() && hi.is_none() {
        return Some(INTEGER.to_string());
    }
    let mut parts = Vec::new();
    // Negative part: -x with x in [max(1, -hi), -lo].
    if lo.is_none_or(|lo| lo < 0) {
        let x_lo = hi.map_or(1, |hi| (-hi).max(1));
        let x_hi = lo.map(|lo| -lo);
        if x_hi.is_none_or(|x_hi| x_lo <= x_hi) {
            parts.push(format!("-(?:{})", natural_in(x_lo as u128, x_hi.map(|h| h as u128))));
        }
    }
    // Non-negative part: [max(0, lo), hi].
    if hi.is_none_or(|hi| hi >= 0) {
        let n_lo = lo.map_or(0, |lo| lo.max(0));
        parts.push(natural_in(n_lo as u128, hi.map(|h| h as u128)));
    }
    Some(format!("(?:{})", parts.join("|")))
}

/// Regex for natural numbers in `[lo, hi]` (`hi = None`: unbounded).
fn natural_in(lo: u128, hi: Option<u128>) -> String {
    let lo_len = digits(lo);
    let mut parts = Vec::new();
    let max_len = hi.map_or(lo_len, digits);
    for len in lo_len..=max_len {
        let len_lo = if len == lo_len { lo } else { pow10(len - 1) };
        let len_max = pow10(len) - 1;
        let len_hi = hi.map_or(len_max, |hi| hi.min(len_max));
        if len_lo <= len_hi {
            parts.push(same_length(&len_lo.to_string(), &len_hi.to_string()));
        }
    }
    if hi.is_none() {
        // Every number with more digits than `lo`.
        parts.push(format!("[1-9]{}", repeat("[0-9]", lo_len, None)));
    }
    parts.join("|")
}

fn digits(n: u128) -> usize {
    n.to_string().len()
}

fn pow10(exp: usize) -> u128 {
    10u128.pow(exp as u32)
}

/// Regex for the numbers between two digit strings of equal length.
fn same_length(lo: &str, hi: &str) -> String {
    let (lo, hi) = (lo.as_bytes(), hi.as_bytes());
    if lo.len() == 1 {
        return digit_class(lo[0], hi[0]);
    }
    if lo[0] == hi[0] {
        let rest = same_length(
            std::str::from_utf8(&lo[1..]).expect("ascii"),
            std::str::from_utf8(&hi[1..]).expect("ascii"),
        );
        return format!("{}(?:{rest})", lo[0] as char);
    }
    let tail = lo.len() - 1;
    let lo_rest = std::str::from_utf8(&lo[1..]).expect("ascii");
    let hi_rest = std::str::from_utf8(&hi[1..]).expect("ascii");
    let lo_rest_is_min = lo_rest.bytes().all(|d| d == b'0');
    let hi_rest_is_max = hi_rest.bytes().all(|d| d == b'9');
    let mut parts = Vec::new();
    let mut first_full = lo[0];
    let mut last_full = hi[0];
    if !lo_rest_is_min {
        parts.push(format!("{}(?:{})", lo[0] as char, same_length(lo_rest, &"9".repeat(tail))));
        first_full += 1;
    }
    if !hi_rest_is_max {
        last_full -= 1;
    }
    if first_full <= last_full {
        parts.push(format!("{}[0-9]{{{tail}}}", digit_class(first_full, last_full)));
    }
    if !hi_rest_is_max {
        parts.push(format!("{}(?:{})", hi[0] as char, same_length(&"0".repeat(tail), hi_rest)));
    }
    parts.join("|")
}

fn digit_class(lo: u8, hi: u8) -> String {
    if lo == hi {
        (lo as char).to_string()
    } else {
        format!("[{}-{}]", lo as char, hi as char)
    }
}

/// A bound on a number: a finite decimal (sign, integer part, fraction digits) and whether it
/// is strict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NumBound {
    /// Below zero (zero itself is never negative).
    pub negative: bool,
    /// Integer part of the magnitude.
    pub int: i128,
    /// Fraction digits of the magnitude, without trailing zeros (empty for an integer).
    pub frac: String,
    pub strict: bool,
}

/// Decimal text `-?[0-9]+(\.[0-9]+)?` (what `f64`'s `Display` writes: never an exponent) as
/// (negative, integer digits, fraction digits without trailing zeros).
pub fn split_decimal(text: &str) -> Option<(bool, &str, &str)> {
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = magnitude.split_once('.').unwrap_or((magnitude, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    (!int.is_empty() && digits(int) && digits(frac)).then(|| (negative, int, frac.trim_end_matches('0')))
}

impl NumBound {
    /// From decimal text ([`split_decimal`]).
    pub fn parse(text: &str, strict: bool) -> Option<Self> {
        let (negative, int, frac) = split_decimal(text)?;
        let int: i128 = int.parse().ok()?;
        let negative = negative && (int != 0 || !frac.is_empty());
        Some(Self { negative, int, frac: frac.to_string(), strict })
    }

    fn is_zero(&self) -> bool {
        self.int == 0 && self.frac.is_empty()
    }

    /// The same magnitude and strictness, non-negative.
    fn magnitude(&self) -> Self {
        Self { negative: false, ..self.clone() }
    }

    fn zero(strict: bool) -> Self {
        Self { negative: false, int: 0, frac: String::new(), strict }
    }
}

const FRACTION: &str = r"(?:\.[0-9]+)?";

/// A number (fraction and exponent allowed) when unbounded; with bounds, a number without
/// exponent whose value satisfies them exactly (decimal digit by digit, fractional bounds too).
/// `None` if no number does.
pub(crate) fn number_in(lo: Option<NumBound>, hi: Option<NumBound>) -> Option<String> {
    if lo.is_none() && hi.is_none() {
        return Some(NUMBER.to_string());
    }
    let mut parts = Vec::new();
    // x >= 0 written as magnitude m = x.
    if hi.as_ref().is_none_or(|h| !(h.negative || h.is_zero() && h.strict)) {
        let m_lo = match &lo {
            Some(l) if !l.negative => l.magnitude(),
            _ => NumBound::zero(false),
        };
        if let Some(m) = magnitude(&m_lo, hi.as_ref()) {
            parts.push(m);
        }
    }
    // x < 0 written as "-" m with m = -x > 0 (m = 0 spells "-0", equal to zero).
    if lo.as_ref().is_none_or(|l| l.negative) {
        let m_lo = match &hi {
            Some(h) if h.negative => h.magnitude(),
            Some(h) if h.is_zero() && h.strict => NumBound::zero(true),
            _ => NumBound::zero(false),
        };
        let m_hi = lo.as_ref().map(NumBound::magnitude);
        if let Some(m) = magnitude(&m_lo, m_hi.as_ref()) {
            parts.push(format!("-(?:{m})"));
        }
    }
    (!parts.is_empty()).then(|| format!("(?:{})", parts.join("|")))
}

/// Non-negative decimals `k(.f)?` between `lo` and `hi` (non-negative bounds).
fn magnitude(lo: &NumBound, hi: Option<&NumBound>) -> Option<String> {
    let int = |from: i128, to: Option<i128>| integer_in(IntBounds { lo: Some(from), hi: to });
    let mut parts = Vec::new();
    match hi {
        None => {
            parts.push(format!("{}{FRACTION}", int(lo.int + 1, None)?));
            push_with_fraction(&mut parts, lo.int, fraction_at_least(lo.frac.as_bytes(), lo.strict));
        }
        Some(hi) => {
            // NOTE: fraction digits without trailing zeros compare as text.
            if (lo.int, lo.frac.as_str()) > (hi.int, hi.frac.as_str()) {
                return None;
            }
            if lo.int == hi.int {
                let between = fraction_between(lo.frac.as_bytes(), lo.strict, hi.frac.as_bytes(), hi.strict);
                push_with_fraction(&mut parts, lo.int, between);
            } else {
                if let Some(middle) = int(lo.int + 1, Some(hi.int - 1)) {
                    parts.push(format!("{middle}{FRACTION}"));
                }
                push_with_fraction(&mut parts, lo.int, fraction_at_least(lo.frac.as_bytes(), lo.strict));
                push_with_fraction(&mut parts, hi.int, fraction_at_most(hi.frac.as_bytes(), hi.strict));
            }
        }
    }
    (!parts.is_empty()).then(|| format!("(?:{})", parts.join("|")))
}

/// Fraction digit strings D (read as 0.D, so `5` = `50`) meeting a bound: a regex of the
/// non-empty ones, and whether no fraction at all (value 0.0) meets it.
#[derive(Debug)]
struct Fractions {
    non_empty: Option<String>,
    empty: bool,
}

/// Appends integer part `int` followed by the written fractions of `fractions` (`.D`, or
/// nothing where an absent fraction qualifies).
fn push_with_fraction(parts: &mut Vec<String>, int: i128, fractions: Fractions) {
    match (fractions.non_empty, fractions.empty) {
        (Some(digits), true) => parts.push(format!(r"{int}(?:\.(?:{digits}))?")),
        (Some(digits), false) => parts.push(format!(r"{int}\.(?:{digits})")),
        (None, true) => parts.push(int.to_string()),
        (None, false) => {}
    }
}

/// Digit `digit` followed by `rest` (ending right after it where `rest` admits nothing more).
fn then(digit: u8, rest: Fractions) -> Option<String> {
    let digit = digit as char;
    match (rest.non_empty, rest.empty) {
        (Some(tail), true) => Some(format!("{digit}(?:{tail})?")),
        (Some(tail), false) => Some(format!("{digit}(?:{tail})")),
        (None, true) => Some(digit.to_string()),
        (None, false) => None,
    }
}

fn alternation(alternatives: Vec<String>) -> Option<String> {
    (!alternatives.is_empty()).then(|| alternatives.join("|"))
}

/// Fractions D with 0.D >= 0.F (> when `strict`); `bound` is F's digits, no trailing zeros.
fn fraction_at_least(bound: &[u8], strict: bool) -> Fractions {
    let Some((&first, rest)) = bound.split_first() else {
        return match strict {
            true => Fractions { non_empty: Some("[0-9]*[1-9][0-9]*".into()), empty: false },
            false => Fractions { non_empty: Some("[0-9]+".into()), empty: true },
        };
    };
    let mut alternatives = Vec::new();
    if first < b'9' {
        alternatives.push(format!("{}[0-9]*", digit_class(first + 1, b'9')));
    }
    alternatives.extend(then(first, fraction_at_least(rest, strict)));
    Fractions { non_empty: alternation(alternatives), empty: false }
}

/// Fractions D with 0.D <= 0.F (< when `strict`).
fn fraction_at_most(bound: &[u8], strict: bool) -> Fractions {
    let Some((&first, rest)) = bound.split_first() else {
        return match strict {
            true => Fractions { non_empty: None, empty: false },
            false => Fractions { non_empty: Some("0+".into()), empty: true },
        };
    };
    let mut alternatives = Vec::new();
    if first > b'0' {
        alternatives.push(format!("{}[0-9]*", digit_class(b'0', first - 1)));
    }
    alternatives.extend(then(first, fraction_at_most(rest, strict)));
    Fractions { non_empty: alternation(alternatives), empty: true }
}

/// Fractions D with 0.L <= 0.D <= 0.H (each `<` when strict), given 0.L <= 0.H.
fn fraction_between(lo: &[u8], lo_strict: bool, hi: &[u8], hi_strict: bool) -> Fractions {
    // No fraction (0.0) is at least 0.L only when L is zero, at most 0.H unless H is a strict zero:
    // the `empty` of `fraction_at_least` and `fraction_at_most`.
    let empty = lo.is_empty() && !lo_strict && !(hi.is_empty() && hi_strict);
    if lo.is_empty() && hi.is_empty() {
        let non_empty = (!lo_strict && !hi_strict).then(|| "0+".to_string());
        return Fractions { non_empty, empty };
    }
    // A bound's digits end in implicit zeros.
    let (lo_first, lo_rest) = lo.split_first().map_or((b'0', &[][..]), |(d, rest)| (*d, rest));
    let (hi_first, hi_rest) = hi.split_first().map_or((b'0', &[][..]), |(d, rest)| (*d, rest));
    let mut alternatives = Vec::new();
    if lo_first == hi_first {
        alternatives.extend(then(lo_first, fraction_between(lo_rest, lo_strict, hi_rest, hi_strict)));
    } else {
        alternatives.extend(then(lo_first, fraction_at_least(lo_rest, lo_strict)));
        if lo_first + 1 < hi_first {
            alternatives.push(format!("{}[0-9]*", digit_class(lo_first + 1, hi_first - 1)));
        }
        alternatives.extend(then(hi_first, fraction_at_most(hi_rest, hi_strict)));
    }
    Fractions { non_empty: alternation(alternatives), empty }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(pattern: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{pattern})$")).unwrap()
    }

    #[test]
    fn integer_ranges_match_exactly() {
        let cases: &[(Option<i128>, Option<i128>)] = &[
            (Some(0), Some(0)),
            (Some(-17), Some(123)),
            (Some(5), None),
            (None, Some(-3)),
            (Some(-1000), Some(-10)),
            (Some(99), Some(1001)),
            (None, Some(42)),
            (Some(-5), None),
        ];
        for &(lo, hi) in cases {
            let re = full(&integer_in(IntBounds { lo, hi }).unwrap());
            for n in -2000i128..2000 {
                let inside = lo.is_none_or(|lo| n >= lo) && hi.is_none_or(|hi| n <= hi);
                assert_eq!(re.is_match(&n.to_string()), inside, "{n} in {lo:?}..{hi:?}");
            }
            assert!(!re.is_match("-0") && !re.is_match("007"));
        }
        assert!(integer_in(IntBounds { lo: Some(3), hi: Some(2) }).is_none());
    }

    fn bound(text: &str, strict: bool) -> NumBound {
        NumBound::parse(text, strict).unwrap()
    }

    /// `text` (a decimal without exponent, at most 12 fraction digits) times 10^12, exactly.
    fn scaled(text: &str) -> i128 {
        let (negative, magnitude) = text.strip_prefix('-').map_or((false, text), |rest| (true, rest));
        let (int, frac) = magnitude.split_once('.').unwrap_or((magnitude, ""));
        let frac = format!("{frac:0<12}");
        let value = int.parse::<i128>().unwrap() * 1_000_000_000_000 + frac.parse::<i128>().unwrap();
        if negative {
            -value
        } else {
            value
        }
    }

    /// A bound as (decimal text, strict).
    type TextBound = Option<(&'static str, bool)>;

    fn check_bounds(cases: &[(TextBound, TextBound)], samples: &[String]) {
        for &(lo, hi) in cases {
            let pattern = number_in(lo.map(|(t, s)| bound(t, s)), hi.map(|(t, s)| bound(t, s)));
            let re = pattern.as_deref().map(full);
            for text in samples {
                let x = scaled(text);
                let above = lo.is_none_or(|(l, strict)| if strict { x > scaled(l) } else { x >= scaled(l) });
                let below = hi.is_none_or(|(h, strict)| if strict { x < scaled(h) } else { x <= scaled(h) });
                let inside = above && below;
                let matched = re.as_ref().is_some_and(|re| re.is_match(text));
                if text.starts_with("-0") && x == 0 {
                    // "-0" spells zero; admitting it is optional, admitting it wrongly is not.
                    assert!(!matched || inside, "{text} in {lo:?}..{hi:?}");
                    continue;
                }
                assert_eq!(matched, inside, "{text} in {lo:?}..{hi:?}: {pattern:?}");
            }
        }
    }

    /// Decimals from -12.5 to 12.5 in steps of 0.005, written plain and with trailing zeros,
    /// plus a few with more fraction digits.
    fn samples() -> Vec<String> {
        let mut samples = Vec::new();
        for thousandths in (-12_500i64..=12_500).step_by(5) {
            let sign = if thousandths < 0 { "-" } else { "" };
            let (int, frac) = (thousandths.abs() / 1000, thousandths.abs() % 1000);
            samples.push(format!("{sign}{int}.{frac:03}"));
            let short = format!("{frac:03}");
            let short = short.trim_end_matches('0');
            samples.push(if short.is_empty() {
                format!("{sign}{int}")
            } else {
                format!("{sign}{int}.{short}")
            });
        }
        for extra in
            ["0.2500001", "0.2499999", "-1.0000001", "2.7500000001", "-0", "-0.0", "0.0", "10.1", "-3.14159"]
        {
            samples.push(extra.to_string());
        }
        samples
    }

    #[test]
    fn number_ranges_with_integral_bounds() {
        let cases: &[(TextBound, TextBound)] = &[
            (Some(("0", false)), Some(("1", false))),
            (Some(("-2", false)), Some(("3", false))),
            (Some(("0", false)), None),
            (Some(("0", true)), None),
            (None, Some(("-1", false))),
            (None, Some(("0", true))),
            (Some(("-5", true)), Some(("-2", true))),
            (Some(("-5", false)), Some(("-2", false))),
            (Some(("3", false)), Some(("3", false))),
            (Some(("-1", true)), Some(("1", true))),
        ];
        check_bounds(cases, &samples());
    }

    #[test]
    fn number_ranges_with_fractional_bounds() {
        let cases: &[(TextBound, TextBound)] = &[
            (Some(("0.25", false)), None),
            (Some(("0.25", true)), None),
            (None, Some(("2.75", false))),
            (None, Some(("2.75", true))),
            (Some(("-1.5", false)), Some(("1.5", false))),
            (Some(("-1.5", true)), Some(("1.5", true))),
            (Some(("0.1", false)), Some(("0.105", false))),
            (Some(("0.1", true)), Some(("0.105", true))),
            (Some(("2.05", false)), Some(("2.5", false))),
            (Some(("2.05", false)), Some(("2.05", false))),
            (Some(("2.05", true)), Some(("2.05", false))),
            (Some(("-3.7", false)), Some(("-3.2", true))),
            (Some(("-0.5", false)), Some(("0", true))),
            (Some(("0", true)), Some(("0.005", false))),
            (Some(("-10.125", false)), Some(("-9.9", false))),
            (Some(("0.5", false)), Some(("0.25", false))),
            (Some(("1.999", true)), Some(("2.001", true))),
            (None, Some(("-0.75", false))),
        ];
        check_bounds(cases, &samples());
        // An empty range has no regex; a bound parses from what `f64` writes.
        assert!(number_in(Some(bound("0.5", true)), Some(bound("0.5", false))).is_none());
        assert_eq!(NumBound::parse("-0", false), NumBound::parse("0.000", false));
        assert_eq!(bound(&0.1f64.to_string(), false).frac, "1");
        assert!(NumBound::parse("1e-7", false).is_none());
    }
}
