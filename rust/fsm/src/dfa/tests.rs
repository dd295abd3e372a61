//! The byte DFA: its language, acceptance, table reads, products and number automata.

use super::*;

fn dfa(pattern: &str) -> ByteDfa {
    ByteDfa::build(pattern, &CompileLimits::default()).unwrap()
}

fn full_match(dfa: &ByteDfa, text: &str) -> bool {
    dfa.matches(text.as_bytes())
}

#[test]
fn language_semantics_not_leftmost_first() {
    let d = dfa("a|ab");
    assert!(full_match(&d, "a") && full_match(&d, "ab"));
    let d = dfa("a+?");
    assert!(full_match(&d, "aaa"));
    let d = dfa("a(b)??");
    assert!(full_match(&d, "ab"));
}

#[test]
fn acceptance_is_not_delayed() {
    let d = dfa("a(bc)?");
    let after_a = d.walk(d.start(), b"a");
    assert!(d.is_accepting(after_a));
    let after_ab = d.walk(d.start(), b"ab");
    assert!(after_ab != DEAD && !d.is_accepting(after_ab));
    assert!(full_match(&d, "abc"));
    let d = dfa(r"[1-9][0-9]*(\.[0-9]+)?");
    assert!(full_match(&d, "1.5") && !full_match(&d, "1."));
}

#[test]
fn bytes_apart_are_the_bytes_two_states_step_differently() {
    let d = dfa("ab(cd)?|xyz|[0-9]+");
    let after_a = d.next(d.start(), b'a');
    // From the start against nothing: the bytes it takes, if each is a class alone.
    assert_eq!(d.bytes_apart(after_a, DEAD, 4), Some(b"b".to_vec()));
    // The digits share a class: not listed.
    assert_eq!(d.bytes_apart(d.start(), DEAD, 16), None);
    let after_ab = d.next(after_a, b'b');
    let after_x = d.next(d.start(), b'x');
    assert_eq!(d.bytes_apart(after_ab, after_x, 4), Some(b"cy".to_vec()));
    assert_eq!(d.bytes_apart(after_ab, after_x, 1), None);
    assert_eq!(d.bytes_apart(after_ab, after_ab, 0), Some(Vec::new()));
    for (a, b) in [(after_ab, after_x), (after_a, DEAD)] {
        let apart = d.bytes_apart(a, b, 8).unwrap();
        for byte in 0..=255u8 {
            let other = if b == DEAD { DEAD } else { d.next(b, byte) };
            assert_eq!(d.next(a, byte) != other, apart.contains(&byte), "{byte}");
        }
    }
}

#[test]
fn accept_distances_count_bytes_to_the_nearest_match() {
    let d = dfa("ab(cd)?|xyz");
    let distances = d.accept_distances();
    assert_eq!(distances[d.start() as usize], 2);
    let after_a = d.next(d.start(), b'a');
    assert_eq!(distances[after_a as usize], 1);
    let after_ab = d.next(after_a, b'b');
    assert_eq!(distances[after_ab as usize], 0);
    assert_eq!(distances[d.next(after_ab, b'c') as usize], 1);
    assert_eq!(distances[d.walk(d.start(), b"xy") as usize], 1);
}

#[test]
fn full_match_is_anchored_both_ends() {
    let d = dfa("[0-9]+");
    assert!(full_match(&d, "123"));
    assert!(!full_match(&d, "x123"));
    assert_eq!(d.walk(d.start(), b"12x"), DEAD);
}

#[test]
fn unsatisfiable_branches_are_pruned() {
    // After "a" the only continuation ("b" after end of text) is impossible.
    let d = dfa("a$b|c");
    assert_eq!(d.walk(d.start(), b"a"), DEAD);
    assert!(full_match(&d, "c"));
    assert!(matches!(ByteDfa::build("a$b", &CompileLimits::default()), Err(FsmError::EmptyLanguage)));
}

#[test]
fn forced_bytes() {
    let d = dfa("abc|abd");
    assert_eq!(d.forced_byte(d.start()), Some(b'a'));
    let after_ab = d.walk(d.start(), b"ab");
    assert_eq!(d.forced_byte(after_ab), None);
}

#[test]
fn errors_are_typed() {
    let limits = CompileLimits::default();
    assert!(matches!(ByteDfa::build("(ab", &limits), Err(FsmError::InvalidRegex(_))));
    assert!(matches!(ByteDfa::build(r"\bfoo\b", &limits), Err(FsmError::UnsupportedRegex(_))));
    let small = CompileLimits { nfa_size_limit: 1 << 16, ..CompileLimits::default() };
    assert!(matches!(ByteDfa::build(r"\w{1000}", &small), Err(FsmError::AutomatonTooLarge { .. })));
}

#[test]
fn intersection_and_difference_match_the_set_algebra() {
    let (words, short, ab) = (dfa("[a-c]+"), dfa("[a-z]{1,2}"), dfa("ab|ba"));
    let both = ByteDfa::intersect(&[&words, &short], &[&ab], 1000).unwrap();
    for text in ["a", "c", "aa", "ab", "ba", "bc", "abc", "d", "", "cd"] {
        let expected = full_match(&words, text) && full_match(&short, text) && !full_match(&ab, text);
        assert_eq!(full_match(&both, text), expected, "{text:?}");
    }
    assert_eq!(ByteDfa::intersect(&[&ab], &[&words], 1000).unwrap_err(), FsmError::EmptyLanguage);
    assert!(matches!(
        ByteDfa::intersect(&[&dfa("[a-z]{0,50}")], &[], 10),
        Err(FsmError::AutomatonTooLarge { .. })
    ));
}

#[test]
fn emptiness_search_agrees_with_the_product() {
    let (words, short, ab, digits) = (dfa("[a-c]+"), dfa("[a-z]{1,2}"), dfa("ab|ba"), dfa("[0-9]+"));
    let cases: [(&[&ByteDfa], &[&ByteDfa]); 5] = [
        (&[&words, &short], &[&ab]),
        (&[&ab], &[&words]),
        (&[&words, &digits], &[]),
        (&[&short], &[&words, &digits]),
        (&[&ab], &[]),
    ];
    for (all, none) in cases {
        let built = ByteDfa::intersect(all, none, 1000);
        let empty = ByteDfa::intersection_is_empty(all, none, 1000).unwrap();
        assert_eq!(empty, matches!(built, Err(FsmError::EmptyLanguage)), "{built:?}");
    }
    assert!(matches!(
        ByteDfa::intersection_is_empty(&[&dfa("[a-z]{20}")], &[], 10),
        Err(FsmError::AutomatonTooLarge { .. })
    ));
}

#[test]
fn decimal_multiples_are_exact() {
    for divisor in [1u32, 3, 7, 10, 12] {
        let d = ByteDfa::decimal_multiples(divisor).unwrap();
        for n in -300i64..300 {
            assert_eq!(full_match(&d, &n.to_string()), n % divisor as i64 == 0, "{n} / {divisor}");
        }
        for text in ["-0", "00", "012", "", "-", "1.0", "+3"] {
            assert!(!full_match(&d, text), "{text}");
        }
    }
}

#[test]
fn scaled_decimal_multiples_are_exact() {
    // multipleOf 0.25, 0.01, 2.5 (25 / 10), 0.3 (3 / 10), 0.125 (125 / 1000), 3 and 1 on a number.
    for (divisor, scale) in [(25u32, 2u32), (1, 2), (25, 1), (3, 1), (125, 3), (3, 0), (1, 0)] {
        let d = ByteDfa::decimal_multiples_scaled(divisor, scale).unwrap();
        // Every value -4..4 in steps of 0.001, as 3 fraction digits, trimmed, and padded.
        for thousandths in -4000i64..=4000 {
            let (sign, magnitude) = (if thousandths < 0 { "-" } else { "" }, thousandths.abs());
            let padded = format!("{sign}{}.{:03}", magnitude / 1000, magnitude % 1000);
            let trimmed = padded.trim_end_matches('0').trim_end_matches('.').to_string();
            // value * 10^scale = thousandths * 10^scale / 1000, an integer divisible by `divisor`?
            let scaled = i128::from(thousandths) * 10i128.pow(scale);
            let inside = scaled % 1000 == 0 && (scaled / 1000) % i128::from(divisor) == 0;
            for text in [padded.clone(), trimmed.clone(), format!("{padded}00")] {
                assert_eq!(full_match(&d, &text), inside, "{text} / {divisor}e-{scale}");
            }
        }
        for text in ["", "-", ".5", "1.", "01.5", "1e2", "0.25e0", "+0.5", "--1"] {
            assert!(!full_match(&d, text), "{text}");
        }
    }
    assert!(ByteDfa::decimal_multiples_scaled(0, 1).is_err());
}
