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
    /// AVX2 + AVX-VNNI (Intel hybrid desktop and laptop chips): `vpdpbusd` / `vpdpwssd`.
    AvxVnni,
    /// AVX2 + AVX-512 VNNI and VL (server chips): `vpdpbusd` / `vpdpwssd` on 256-bit vectors.
    Avx512Vnni,
}

/// Every path, in the order of the enum (`ALL[isa as usize] == isa`).
const ALL: [Isa; 4] = [Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni];

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avxvnni",
            Isa::Avx512Vnni => "avx512vnni",
        }
    }

    /// Whether the path runs the AVX2 row and f32 kernels and the packed kernels (every x86
    /// SIMD path does: the VNNI paths differ only in the packed kernels' multiply-adds).
    pub fn is_x86_simd(self) -> bool {
        self != Isa::Scalar
    }

    /// Whether this machine can run the path. Detected once: the safe kernel wrappers ask on
    /// every call (tens of thousands per product).
    pub fn is_available(self) -> bool {
        static AVAILABLE: OnceLock<[bool; 4]> = OnceLock::new();
        AVAILABLE.get_or_init(|| ALL.map(Isa::detect))[self as usize]
    }

    fn detect(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma");
            match self {
                Isa::Scalar => true,
                Isa::Avx2 => avx2,
                Isa::AvxVnni => avx2 && has!("avxvnni"),
                Isa::Avx512Vnni => avx2 && has!("avx512f") && has!("avx512vl") && has!("avx512vnni"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Isa::Scalar
        }
    }

    /// Every path this machine can run, slowest first.
    pub fn available() -> Vec<Isa> {
        ALL.into_iter().filter(|i| i.is_available()).collect()
    }
}

/// The path in use: the best available, or the one named by `DLLM_ISA` (`scalar`, `avx2`,
/// `avxvnni`, `avx512vnni`) when that is available (to measure or debug a slower path).
pub fn active_isa() -> Isa {
    static ACTIVE: OnceLock<Isa> = OnceLock::new();
    *ACTIVE.get_or_init(|| {
        let available = Isa::available();
        let best = *available.last().expect("scalar is always available");
        let wanted = std::env::var("DLLM_ISA").ok();
        available.into_iter().find(|i| Some(i.name()) == wanted.as_deref()).unwrap_or(best)
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
