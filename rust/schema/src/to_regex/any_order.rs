//! An object's declared members in any order, as a regex: every order of every admitted subset
//! spelled out (for a few members only, `MAX_REGEX_ANY_ORDER_PROPERTIES`).

use super::literal::{alternation, NEVER};

/// One declared member's regex (`"key": value`) and whether it must be present.
pub(super) struct Member<'a> {
    pub(super) regex: &'a str,
    pub(super) required: bool,
}

/// The members of an object (between its braces): each of `members` at most once in any
/// order, the required ones all present, and when `extra` is given (an undeclared member's
/// regex) any number of those anywhere among them.
pub(super) fn any_order_body(members: &[Member<'_>], extra: Option<&str>, sep: &str) -> String {
    rest(members, 0, false, extra, sep)
}

/// What may follow once the members in `used` (a bit per member) are written; `started`: some
/// member is written, so a separator comes before the next.
fn rest(members: &[Member<'_>], used: u32, started: bool, extra: Option<&str>, sep: &str) -> String {
    let lead = if started { sep } else { "" };
    let mut next: Vec<String> = (0..members.len())
        .filter(|&j| used >> j & 1 == 0)
        .map(|j| format!("{lead}{}{}", members[j].regex, rest(members, used | 1 << j, true, extra, sep)))
        .collect();
    let extras = match extra {
        // Before any member: an undeclared one may come first, then others anywhere.
        Some(extra) if !started => {
            next.push(format!("{extra}{}", rest(members, used, true, Some(extra), sep)));
            String::new()
        }
        Some(extra) => format!("(?:{sep}{extra})*"),
        None => String::new(),
    };
    let may_end = members.iter().enumerate().all(|(j, m)| !m.required || used >> j & 1 == 1);
    let body = match (next.is_empty(), may_end) {
        (true, true) => String::new(),
        (true, false) => NEVER.to_string(),
        (false, true) => format!("(?:{})?", next.join("|")),
        (false, false) => alternation(next),
    };
    format!("{extras}{body}")
}

#[cfg(test)]
mod tests {
    use super::{any_order_body, Member};
    use sglr_fsm::{ByteDfa, CompileLimits};

    fn matcher(members: &[Member<'_>], extra: Option<&str>) -> ByteDfa {
        let body = any_order_body(members, extra, ",");
        ByteDfa::build(&format!(r"\{{{body}\}}"), &CompileLimits::default()).unwrap()
    }

    /// Every order of every subset holding the required member, nothing twice.
    #[test]
    fn orders_and_subsets() {
        let members = [
            Member { regex: "a", required: false },
            Member { regex: "b", required: true },
            Member { regex: "c", required: false },
        ];
        let dfa = matcher(&members, None);
        for text in ["{b}", "{a,b}", "{b,a}", "{c,b,a}", "{a,c,b}", "{b,c}"] {
            assert!(dfa.matches(text.as_bytes()), "{text}");
        }
        for text in ["{}", "{a}", "{a,c}", "{b,b}", "{a,b,a}", "{b,}", "{,b}"] {
            assert!(!dfa.matches(text.as_bytes()), "{text}");
        }
    }

    /// Undeclared members anywhere, declared ones still once each.
    #[test]
    fn extras_anywhere() {
        let members = [Member { regex: "a", required: true }, Member { regex: "b", required: false }];
        let dfa = matcher(&members, Some("x"));
        for text in ["{a}", "{x,a}", "{a,x,b,x}", "{x,x,b,a}", "{b,x,a}"] {
            assert!(dfa.matches(text.as_bytes()), "{text}");
        }
        for text in ["{}", "{x}", "{x,b}", "{a,x,a}", "{a,b,b}"] {
            assert!(!dfa.matches(text.as_bytes()), "{text}");
        }
    }
}
