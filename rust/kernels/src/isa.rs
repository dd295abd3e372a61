//! The instruction set the kernels use, detected once per process: every kernel dispatches on
//! [`Isa::detect`] (or on an `Isa` its caller passes, at most the detected one), so one place
//! decides which vector code may run.

use std::sync::OnceLock;

/// The instruction set the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    Portable,
    /// AVX2 with FMA and F16C.
    Avx2,
    /// The above with AVX-512 VNNI, VL and BW (256-bit vectors).
    Avx512Vnni,
}

impl Isa {
    /// The best the running CPU offers (detected on the first call, then remembered).
    pub fn detect() -> Self {
        static DETECTED: OnceLock<Isa> = OnceLock::new();
        *DETECTED.get_or_init(Self::of_this_cpu)
    }

    fn of_this_cpu() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 = std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("f16c");
            if avx2
                && std::arch::is_x86_feature_detected!("avx512vnni")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx512bw")
            {
                return Self::Avx512Vnni;
            }
            if avx2 {
                return Self::Avx2;
            }
        }
        Self::Portable
    }

    /// Every instruction set this CPU can run (the portable one included), for tests.
    pub fn available() -> Vec<Self> {
        let mut all = vec![Self::Portable];
        match Self::detect() {
            Self::Avx512Vnni => all.extend([Self::Avx2, Self::Avx512Vnni]),
            Self::Avx2 => all.push(Self::Avx2),
            Self::Portable => {}
        }
        all
    }

    /// AVX2, FMA and F16C are present: what the f32 kernels (attention, experts, the 8-bit
    /// head's f32 product, SiLU) and the dequantization need.
    pub fn has_avx2(self) -> bool {
        self != Self::Portable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_is_stable_and_listed_last() {
        let detected = Isa::detect();
        assert_eq!(Isa::detect(), detected);
        let available = Isa::available();
        assert_eq!(available.first(), Some(&Isa::Portable));
        assert_eq!(available.last(), Some(&detected));
    }
}
