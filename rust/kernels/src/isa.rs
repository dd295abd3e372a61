//! The instruction set the kernels use, decided once per process: every kernel dispatches on
//! [`Isa::detect`] (or on an `Isa` its caller passes, at most the detected one), so one place
//! decides which vector code may run.
//!
//! `SGLR_CPU_ISA` (`portable`, `avx2` or `avx512vnni`) caps it, so that one machine can run the
//! code paths of a lesser CPU: a cap above what the CPU offers is lowered to the CPU's (see
//! [`IsaChoice::is_clamped`]: vector code the CPU lacks never runs), and any other value is an
//! [`UnknownIsa`] error.

use std::sync::OnceLock;

/// The variable that caps the instruction set.
pub const ISA_VAR: &str = "SGLR_CPU_ISA";

/// The instruction set the kernels use, in increasing order of what it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    Portable,
    /// AVX2 with FMA and F16C.
    Avx2,
    /// The above with AVX-512 VNNI, VL and BW (256-bit vectors).
    Avx512Vnni,
}

/// An `SGLR_CPU_ISA` value that names no instruction set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{ISA_VAR}={0:?} is not one of portable, avx2, avx512vnni (unset: the best this CPU offers)")]
pub struct UnknownIsa(pub String);

/// What the process runs: the CPU's best, the cap asked for, and the one the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsaChoice {
    pub cpu: Isa,
    pub requested: Option<Isa>,
    pub isa: Isa,
}

impl IsaChoice {
    /// The kernels' instruction set for a CPU offering `cpu` when `requested` caps it.
    pub fn new(cpu: Isa, requested: Option<Isa>) -> Self {
        Self { cpu, requested, isa: requested.map_or(cpu, |cap| cap.min(cpu)) }
    }

    /// The cap asked for more than the CPU has (the kernels use the CPU's best instead).
    pub fn is_clamped(&self) -> bool {
        self.requested.is_some_and(|cap| cap > self.cpu)
    }
}

impl Isa {
    pub const ALL: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512Vnni];

    /// The name `SGLR_CPU_ISA` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::Avx2 => "avx2",
            Self::Avx512Vnni => "avx512vnni",
        }
    }

    /// An `SGLR_CPU_ISA` value: None for an empty (or all-blank) one, which sets no cap.
    pub fn parse(value: &str) -> Result<Option<Self>, UnknownIsa> {
        let name = value.trim();
        if name.is_empty() {
            return Ok(None);
        }
        Self::ALL
            .into_iter()
            .find(|isa| isa.name().eq_ignore_ascii_case(name))
            .map(Some)
            .ok_or_else(|| UnknownIsa(value.to_string()))
    }

    /// The process's choice: the CPU's best capped by `SGLR_CPU_ISA`, both read on the first
    /// call, then remembered.
    pub fn configured() -> Result<IsaChoice, UnknownIsa> {
        static CHOICE: OnceLock<Result<IsaChoice, UnknownIsa>> = OnceLock::new();
        CHOICE
            .get_or_init(|| {
                let value = std::env::var(ISA_VAR).unwrap_or_default();
                Ok(IsaChoice::new(Self::of_this_cpu(), Self::parse(&value)?))
            })
            .clone()
    }

    /// The instruction set every kernel uses (see [`Isa::configured`]).
    ///
    /// # Panics
    /// When `SGLR_CPU_ISA` names no instruction set; callers that can report an error check
    /// [`Isa::configured`] first (sglr's model runner does before loading a model).
    pub fn detect() -> Self {
        match Self::configured() {
            Ok(choice) => choice.isa,
            Err(error) => panic!("{error}"),
        }
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

    /// Every instruction set the kernels may use in this process, up to [`Isa::detect`]'s (the
    /// portable one first), for tests.
    pub fn available() -> Vec<Self> {
        let detected = Self::detect();
        Self::ALL.into_iter().filter(|&isa| isa <= detected).collect()
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

    #[test]
    fn the_process_runs_at_most_what_the_cpu_offers() {
        let choice = Isa::configured().expect("the test run's SGLR_CPU_ISA is valid");
        assert!(choice.isa <= choice.cpu);
        assert_eq!(Isa::detect(), choice.isa);
        assert_eq!(choice, IsaChoice::new(choice.cpu, choice.requested));
    }

    #[test]
    fn names_parse_back_and_blank_sets_no_cap() {
        for isa in Isa::ALL {
            assert_eq!(Isa::parse(isa.name()), Ok(Some(isa)));
            assert_eq!(Isa::parse(&isa.name().to_uppercase()), Ok(Some(isa)));
        }
        assert_eq!(Isa::parse(" avx2\n"), Ok(Some(Isa::Avx2)));
        assert_eq!(Isa::parse(""), Ok(None));
        assert_eq!(Isa::parse("  "), Ok(None));
    }

    #[test]
    fn unknown_names_are_errors_naming_the_variable_and_the_choices() {
        for bad in ["avx-2", "avx512", "avx512_vnni", "amx", "sse4", "native", "0"] {
            let error = Isa::parse(bad).unwrap_err();
            assert_eq!(error, UnknownIsa(bad.to_string()));
            let message = error.to_string();
            assert!(message.contains("SGLR_CPU_ISA") && message.contains(&format!("{bad:?}")), "{message}");
            assert!(message.contains("portable, avx2, avx512vnni"), "{message}");
        }
    }

    #[test]
    fn a_cap_lowers_the_cpu_isa_and_never_raises_it() {
        for cpu in Isa::ALL {
            assert_eq!(IsaChoice::new(cpu, None).isa, cpu);
            assert!(!IsaChoice::new(cpu, None).is_clamped());
            for cap in Isa::ALL {
                let choice = IsaChoice::new(cpu, Some(cap));
                assert_eq!(choice.isa, cap.min(cpu), "cpu {cpu:?}, cap {cap:?}");
                assert!(choice.isa <= cpu);
                assert_eq!(choice.is_clamped(), cap > cpu);
            }
        }
    }
}
