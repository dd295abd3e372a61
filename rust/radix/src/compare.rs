use crate::ids::TokenId;

/// Length of the common prefix of `a` and `b`.
///
/// Compares fixed-size chunks first (the compiler turns each chunk compare into a few vector
/// instructions), then finishes element by element inside the first differing chunk.
pub(crate) fn common_prefix_len(a: &[TokenId], b: &[TokenId]) -> usize {
    const CHUNK: usize = 16;
    let limit = a.len().min(b.len());
    let mut matched = 0;
    while matched + CHUNK <= limit && a[matched..matched + CHUNK] == b[matched..matched + CHUNK] {
        matched += CHUNK;
    }
    while matched < limit && a[matched] == b[matched] {
        matched += 1;
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::common_prefix_len;

    #[test]
    fn agrees_with_naive_scan_at_every_split_point() {
        let base: Vec<u32> = (0..70).collect();
        for cut in 0..=base.len() {
            let mut other = base.clone();
            if cut < other.len() {
                other[cut] = 999;
            }
            assert_eq!(common_prefix_len(&base, &other), cut);
            assert_eq!(common_prefix_len(&base[..cut], &base), cut);
        }
        assert_eq!(common_prefix_len(&[], &[1, 2]), 0);
    }
}
