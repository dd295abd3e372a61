//! Seeded synthetic request traces shared by the criterion benches.

/// A tiny deterministic generator (xorshift64*), so benches need no RNG crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    pub fn tokens(&mut self, len: usize) -> Vec<u32> {
        (0..len).map(|_| (self.next_u64() % 50_000) as u32 + 1).collect()
    }
}

/// Requests built as `shared prefix of their group + own tokens`.
pub fn grouped_trace(
    seed: u64,
    num_groups: usize,
    per_group: usize,
    shared_len: (usize, usize),
    own_len: (usize, usize),
) -> Vec<Vec<u32>> {
    let mut rng = Rng::new(seed);
    let mut trace = Vec::with_capacity(num_groups * per_group);
    for _ in 0..num_groups {
        let shared_len = rng.range(shared_len.0, shared_len.1);
        let shared = rng.tokens(shared_len);
        for _ in 0..per_group {
            let own_len = rng.range(own_len.0, own_len.1);
            let mut request = shared.clone();
            request.extend(rng.tokens(own_len));
            trace.push(request);
        }
    }
    // Interleave groups the way concurrent traffic arrives.
    for i in (1..trace.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        trace.swap(i, j);
    }
    trace
}

/// The SGLang paper's overhead scenario: 128 requests in 16 groups of 8 branches, shared
/// length 256, unshared 256.
pub fn paper_overhead_trace() -> Vec<Vec<u32>> {
    grouped_trace(1, 16, 8, (256, 256), (256, 256))
}

/// A heavy trace: 10k requests of 1-4k tokens (64 shared prefixes of 512-2,048 tokens plus
/// 512-2,048 own tokens).
pub fn heavy_trace() -> Vec<Vec<u32>> {
    grouped_trace(2, 64, 157, (512, 2048), (512, 2048))
}

/// The heavy trace of `benches/radix_overhead.py` (same shape, this crate's generator): 2,000
/// requests over 32 shared prefixes of 512-2,048 tokens plus 256-2,048 own tokens.
pub fn heavy_2k_trace() -> Vec<Vec<u32>> {
    let mut trace = grouped_trace(2, 32, 63, (512, 2048), (256, 2048));
    trace.truncate(2000);
    trace
}

pub mod fsm_inputs;
pub mod gateway_tree;
pub mod radix_compare;
pub mod sched_trace;
