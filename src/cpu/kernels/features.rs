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

    /// The CPU features the path's kernels enable (`#[target_feature(enable = ...)]`), every
    /// one of which must be present before the path is chosen: `is_x86_feature_detected` reports
    /// each feature on its own (a CPU may report avx512vnni's CPUID bit without avx512bw under
    /// some hypervisors), so none may be taken as implied by another. The test below reads the
    /// kernel sources and fails when a kernel enables a feature its path does not list.
    pub fn required_features(self) -> &'static [&'static str] {
        match self {
            Isa::Scalar => &[],
            Isa::Avx2 => &["avx", "avx2", "fma"],
            Isa::AvxVnni => &["avx", "avx2", "fma", "avxvnni"],
            Isa::Avx512Vnni => &["avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni"],
        }
    }

    /// Whether a CPU reporting the features `has` says it has can run the path.
    fn supported_by(self, has: &dyn Fn(&str) -> bool) -> bool {
        self.required_features().iter().all(|f| has(f))
    }

    fn detect(self) -> bool {
        self.supported_by(&detected)
    }

    /// Every path this machine can run, slowest first.
    pub fn available() -> Vec<Isa> {
        ALL.into_iter().filter(|i| i.is_available()).collect()
    }
}

/// Whether this CPU has `feature` (one of the names `required_features` uses).
fn detected(feature: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::is_x86_feature_detected as has;
        match feature {
            "avx" => has!("avx"),
            "avx2" => has!("avx2"),
            "fma" => has!("fma"),
            "avxvnni" => has!("avxvnni"),
            "avx512f" => has!("avx512f"),
            "avx512bw" => has!("avx512bw"),
            "avx512vl" => has!("avx512vl"),
            "avx512vnni" => has!("avx512vnni"),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = feature;
        false
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every feature list a kernel source enables, by `#[target_feature(enable = "...")]` or as
    /// the feature literal of `packed_entry_points!`.
    fn enabled_feature_lists() -> Vec<(&'static str, Vec<&'static str>)> {
        let sources = [
            ("avx2.rs", include_str!("avx2.rs")),
            ("avx2_f32.rs", include_str!("avx2_f32.rs")),
            ("avx512.rs", include_str!("avx512.rs")),
            ("avx512_f32.rs", include_str!("avx512_f32.rs")),
            ("int8_dot.rs", include_str!("int8_dot.rs")),
            ("peak.rs", include_str!("peak.rs")),
            ("quantize.rs", include_str!("quantize.rs")),
        ];
        let mut lists = Vec::new();
        for (file, text) in sources {
            for line in text.lines() {
                let literal = if let Some(rest) = line.split("enable = \"").nth(1) {
                    rest
                } else if line.starts_with("packed_entry_points!(") {
                    line.split('"').nth(1).unwrap_or_default()
                } else {
                    continue;
                };
                let features = literal.split('"').next().unwrap_or_default();
                lists.push((file, features.split(',').map(str::trim).collect()));
            }
        }
        lists
    }

    /// The path each kernel list runs under: the one named by its widest feature.
    fn path_of(features: &[&str]) -> Isa {
        if features.iter().any(|f| f.starts_with("avx512")) {
            Isa::Avx512Vnni
        } else if features.contains(&"avxvnni") {
            Isa::AvxVnni
        } else {
            Isa::Avx2
        }
    }

    #[test]
    fn every_feature_a_kernel_enables_is_required_by_its_path() {
        let lists = enabled_feature_lists();
        // The scan must see the kernels it checks: 50-odd attributes and the three entry points.
        assert!(lists.len() > 40, "found only {} target_feature lists", lists.len());
        assert!(lists.iter().any(|(_, f)| f.contains(&"avx512bw")));
        for (file, features) in &lists {
            let path = path_of(features);
            for f in features {
                assert!(
                    path.required_features().contains(f),
                    "{file} enables {f} in {features:?}, but the {} path does not require it",
                    path.name()
                );
            }
        }
    }

    #[test]
    fn a_path_is_refused_when_any_required_feature_is_missing() {
        for isa in ALL {
            let all = isa.required_features();
            assert!(isa.supported_by(&|f| all.contains(&f)), "{isa:?}");
            for missing in all {
                let has = |f: &str| all.contains(&f) && f != *missing;
                assert!(!isa.supported_by(&has), "{isa:?} chosen without {missing}");
            }
        }
        // AVX-512 VNNI without BW (the gap this table closes) is not enough.
        let no_bw = |f: &str| Isa::Avx512Vnni.required_features().contains(&f) && f != "avx512bw";
        assert!(!Isa::Avx512Vnni.supported_by(&no_bw));
        assert!(Isa::Avx2.supported_by(&no_bw));
    }
}
