//! Integer and number regexes with `minimum` / `maximum` bounds.
//!
//! Integer ranges are exact (digit-by-digit range splitting). Numbers with bounds are exact for
//! integral bounds; a fractional bound on a non-integer number is refused rather than
//! approximated.

use super::literal::{INTEGER, NUMBER};

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
        parts.push(format!("[1-9]{}", super::literal::repeat("[0-9]", lo_len, None)));
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

/// A bound on a number: `(value, strict)`.
pub(crate) type NumBound = (i128, bool);

const FRACTION: &str = r"(?:\.[0-9]+)?";
const ZERO_FRACTION: &str = r"(?:\.0+)?";
const NONZERO_FRACTION: &str = r"\.[0-9]*[1-9][0-9]*";

/// A number (fraction and exponent allowed) when unbounded; with integral bounds, a number
/// without exponent whose value satisfies them. `None` if no number does.
pub(crate) fn number_in(lo: Option<NumBound>, hi: Option<NumBound>) -> Option<String> {
    if lo.is_none() && hi.is_none() {
        return Some(NUMBER.to_string());
    }
    let mut parts = Vec::new();
    // x >= 0 written as magnitude m = x.
    if hi.is_none_or(|(h, strict)| h > 0 || (h == 0 && !strict)) {
        let m_lo = match lo {
            Some((l, strict)) if l >= 0 => (l, strict),
            _ => (0, false),
        };
        if let Some(m) = magnitude(m_lo, hi) {
            parts.push(m);
        }
    }
    // x < 0 written as "-" m with m = -x > 0 (m = 0 spells "-0", equal to zero).
    if lo.is_none_or(|(l, _)| l < 0) {
        let m_lo = match hi {
            Some((h, strict)) if h < 0 => (-h, strict),
            Some((0, true)) => (0, true),
            _ => (0, false),
        };
        let m_hi = lo.map(|(l, strict)| (-l, strict));
        if let Some(m) = magnitude(m_lo, m_hi) {
            parts.push(format!("-(?:{m})"));
        }
    }
    (!parts.is_empty()).then(|| format!("(?:{})", parts.join("|")))
}

/// Non-negative decimals `k(.f)?` between `lo` and `hi` (integers, each possibly strict).
fn magnitude((lo, lo_strict): NumBound, hi: Option<NumBound>) -> Option<String> {
    let int = |from: i128, to: Option<i128>| integer_in(IntBounds { lo: Some(from), hi: to });
    let mut parts = Vec::new();
    let at_lo = if lo_strict { NONZERO_FRACTION } else { FRACTION };
    match hi {
        None => {
            parts.push(format!("{}{FRACTION}", int(lo + 1, None)?));
            parts.push(format!("{lo}{at_lo}"));
        }
        Some((hi, hi_strict)) => {
            if lo > hi {
                return None;
            }
            if lo == hi {
                if lo_strict || hi_strict {
                    return None;
                }
                return Some(format!("{lo}{ZERO_FRACTION}"));
            }
            if let Some(middle) = int(lo + 1, Some(hi - 1)) {
                parts.push(format!("{middle}{FRACTION}"));
            }
            parts.push(format!("{lo}{at_lo}"));
            if !hi_strict {
                parts.push(format!("{hi}{ZERO_FRACTION}"));
            }
        }
    }
    Some(format!("(?:{})", parts.join("|")))
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

    #[test]
    fn number_ranges_with_integral_bounds() {
        let cases: &[(Option<NumBound>, Option<NumBound>)] = &[
            (Some((0, false)), Some((1, false))),
            (Some((-2, false)), Some((3, false))),
            (Some((0, false)), None),
            (Some((0, true)), None),
            (None, Some((-1, false))),
            (None, Some((0, true))),
            (Some((-5, true)), Some((-2, true))),
            (Some((-5, false)), Some((-2, false))),
            (Some((3, false)), Some((3, false))),
            (Some((-1, true)), Some((1, true))),
        ];
        let samples = [
            "0", "0.5", "1", "1.0", "1.5", "-0.5", "-1", "-1.5", "-2", "-2.0", "-2.5", "3", "3.00", "3.01",
            "2.999", "-5", "-5.1", "-4.9", "10", "-10.25", "-0", "-0.0", "0.0", "-0.25",
        ];
        for &(lo, hi) in cases {
            let re = full(&number_in(lo, hi).unwrap());
            for text in samples {
                let x: f64 = text.parse().unwrap();
                let above = lo.is_none_or(|(l, strict)| if strict { x > l as f64 } else { x >= l as f64 });
                let below = hi.is_none_or(|(h, strict)| if strict { x < h as f64 } else { x <= h as f64 });
                let inside = above && below;
                if text.starts_with("-0") && x == 0.0 {
                    // "-0" spells zero; admitting it is optional, admitting it wrongly is not.
                    assert!(!re.is_match(text) || inside, "{text} in {lo:?}..{hi:?}");
                    continue;
                }
                assert_eq!(re.is_match(text), inside, "{text} in {lo:?}..{hi:?}");
            }
        }
    }
}
