//! Number automata no short regex can say, built by hand: decimal multiples.

use super::classes::digit_classes;
use super::{ByteDfa, DEAD};
use crate::error::FsmError;

impl ByteDfa {
    /// Decimal integers in JSON spelling (no leading zeros, no `-0`) divisible by `divisor`
    /// (at least 1): a remainder automaton, which no short regex can say.
    pub fn decimal_multiples(divisor: u32) -> Result<Self, FsmError> {
        if divisor == 0 {
            return Err(FsmError::InvalidRegex("a divisor must be positive".into()));
        }
        // Classes: each digit, '-', everything else.
        let (classes, num_classes, class_len, class_byte) = digit_classes(b"-");
        // States: 0 start, 1 after '-', 2 a lone "0", 3 + r digits read with remainder r.
        let k = divisor as u64;
        let remainder = |r: u64| 3 + r as u32;
        let num_states = 3 + divisor as usize;
        let mut raw_trans = vec![DEAD; num_states * num_classes];
        let mut accepting = vec![false; num_states];
        raw_trans[10] = 1;
        raw_trans[0] = 2;
        accepting[2] = true;
        for digit in 1..10u64 {
            raw_trans[digit as usize] = remainder(digit % k);
            raw_trans[num_classes + digit as usize] = remainder(digit % k);
        }
        for r in 0..k {
            let state = remainder(r) as usize;
            accepting[state] = r == 0;
            for digit in 0..10u64 {
                raw_trans[state * num_classes + digit as usize] = remainder((r * 10 + digit) % k);
            }
        }
        Self::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
    }

    /// JSON numbers without exponent that are multiples of `divisor` / 10^`scale`
    /// (`multipleOf: 0.25` is divisor 25, scale 2; `multipleOf: 5` on a number is 5, scale 0,
    /// which admits `10.0`): the value times 10^`scale` must be an integer divisible by
    /// `divisor`, so past `scale` fraction digits only zeros follow. States: the integer part's
    /// remainder, then the remainder and the number of fraction digits read (capped).
    pub fn decimal_multiples_scaled(divisor: u32, scale: u32) -> Result<Self, FsmError> {
        if divisor == 0 || scale > 18 {
            return Err(FsmError::InvalidRegex(
                "a scaled divisor needs a positive divisor and a scale up to 18".into(),
            ));
        }
        // Classes: each digit, '-', '.', everything else.
        let (classes, num_classes, class_len, class_byte) = digit_classes(b"-.");
        let (d, k) = (u64::from(divisor), scale as usize);
        // Fraction digits read are counted up to `top` (at least 1, so that a fraction of zeros
        // past the scale is told apart from a bare ".").
        let top = k.max(1);
        // States: 0 start, 1 after '-', 2 a lone "0", then the integer part's remainders, then
        // (remainder, fraction digits read 0..=top).
        let integer = |r: u64| 3 + r as usize;
        let fraction = |r: u64, read: usize| 3 + d as usize + r as usize * (top + 1) + read;
        let num_states = 3 + d as usize * (top + 2);
        let mut raw_trans = vec![DEAD; num_states * num_classes];
        let mut accepting = vec![false; num_states];
        let mut set =
            |state: usize, class: usize, next: usize| raw_trans[state * num_classes + class] = next as u32;
        // (r * 10^e) mod d, for the value's remaining shift.
        let shifted = |r: u64, e: usize| (0..e).fold(r, |acc, _| acc * 10 % d);
        set(0, 10, 1);
        for start in [0, 1] {
            set(start, 0, 2);
            for digit in 1..10u64 {
                set(start, digit as usize, integer(digit % d));
            }
        }
        accepting[2] = true;
        set(2, 11, fraction(0, 0));
        for r in 0..d {
            accepting[integer(r)] = shifted(r, k) == 0;
            for digit in 0..10u64 {
                set(integer(r), digit as usize, integer((r * 10 + digit) % d));
            }
            set(integer(r), 11, fraction(r, 0));
            for read in 0..=top {
                // NOTE: "." needs a digit after it; past `scale` digits only zeros keep the value.
                accepting[fraction(r, read)] = read > 0 && shifted(r, k - read.min(k)) == 0;
                if read < k {
                    for digit in 0..10u64 {
                        set(fraction(r, read), digit as usize, fraction((r * 10 + digit) % d, read + 1));
                    }
                } else {
                    set(fraction(r, read), 0, fraction(r, (read + 1).min(top)));
                }
            }
        }
        Self::from_raw(classes, num_classes, class_len, class_byte, &raw_trans, &accepting)
    }
}
