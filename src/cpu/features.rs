//! Which SIMD instruction set the kernels use, detected once per process.

use std::sync::OnceLock;

/// Instruction sets with their own kernels, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Isa {
    /// Portable Rust; the reference every other path is tested against.
    Scalar,
    /// x86-64 AVX2 + FMA: `vpmaddubsw` / `vpmaddwd` integer dot products.
    Avx2,
}

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
        }
    }

    /// Whether this machine can run the path.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 => false,
        }
    }

    /// Every path this machine can run.
    pub fn available() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2].into_iter().filter(|i| i.is_available()).collect()
    }
}

/// The path in use: the best available, or the one named by `DLLM_ISA` (`scalar`, `avx2`)
/// when that is available (to measure or debug a slower path).
pub fn active_isa() -> Isa {
    static ACTIVE: OnceLock<Isa> = OnceLock::new();
    *ACTIVE.get_or_init(|| {
        let best = *Isa::available().last().expect("scalar is always available");
        match std::env::var("DLLM_ISA").ok().as_deref() {
            Some("scalar") => Isa::Scalar,
            Some("avx2") if Isa::Avx2.is_available() => Isa::Avx2,
            _ => best,
        }
    })
}

/// CPU features worth reporting (for `dllm bench`, the About box and bug reports).
pub fn cpu_flags() -> Vec<&'static str> {
    let mut flags = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! probe {
            ($($f:tt),*) => { $( if std::is_x86_feature_detected!($f) { flags.push($f); } )* };
        }
        probe!("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avxvnni");
    }
    flags
}
