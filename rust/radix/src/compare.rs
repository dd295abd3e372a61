use crate::ids::TokenId;

/// Length of the common prefix of `a` and `b`.
///
/// Walks mostly compare whole edges that match in full, so one slice comparison (a single
/// `memcmp`) settles the common case. On a mismatch, halving narrows the first differing
/// position with further `memcmp`s (at most twice the bytes of one pass), then a short scan
/// finishes it.
pub fn common_prefix_len(a: &[TokenId], b: &[TokenId]) -> usize {
    const SCAN: usize = 16;
    let limit = a.len().min(b.len());
    if a[..limit] == b[..limit] {
        return limit;
    }
    // Invariant: a[..start] == b[..start] and the first mismatch is in start..start + len.
    let (mut start, mut len) = (0, limit);
    while len > SCAN {
        let half = len / 2;
        if a[start..start + half] == b[start..start + half] {
            start += half;
            len -= half;
        } else {
            len = half;
        }
    }
    while a[start] == b[start] {
        start += 1;
    }
    start
}

#[cfg(test)]
mod tests {
    use super::common_prefix_len;

    #[test]
    fn agrees_with_naive_scan_at_every_split_point() {
        for total in [0usize, 1, 15, 16, 17, 33, 70, 257] {
            let base: Vec<u32> = (0..total as u32).collect();
            for cut in 0..=total {
                let mut other = base.clone();
                if cut < other.len() {
                    other[cut] = 999_999;
                }
                assert_eq!(common_prefix_len(&base, &other), cut);
                assert_eq!(common_prefix_len(&base[..cut], &base), cut);
                assert_eq!(common_prefix_len(&base, &base[..cut]), cut);
            }
        }
        assert_eq!(common_prefix_len(&[], &[1, 2]), 0);
    }
}
