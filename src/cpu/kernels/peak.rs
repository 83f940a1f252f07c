//! The machine's int8 multiply-add peak on each kernel instruction set, measured by a loop of
//! independent dot-product chains that never touches memory. Kernel efficiency is reported
//! against this number, measured in the same run. Also what each of the 512-bit kernels' other
//! instructions costs their dot products (`slots_beside_dot`), which sets those kernels'
//! ceilings below the peak.

use std::time::Instant;

use super::Isa;

/// Multiply-adds per second of `threads` threads running `isa`'s int8 dot instruction mix
/// for about `seconds`: the best of three trials, since a shared machine can lose a core
/// for a moment.
pub fn int8_peak(isa: Isa, threads: usize, seconds: f64) -> f64 {
    (0..3).map(|_| int8_rate(isa, threads, seconds / 3.0)).fold(0.0, f64::max)
}

fn int8_rate(isa: Isa, threads: usize, seconds: f64) -> f64 {
    let per_thread = |iters: u64| -> (u64, f64) {
        let start = Instant::now();
        // SAFETY (all three): only called for an available ISA (checked below).
        let macs = match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { x86::avx2_chains(iters) },
            #[cfg(target_arch = "x86_64")]
            Isa::AvxVnni => unsafe { x86::avx_vnni_chains(iters) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vnni => unsafe { x86::avx512_vnni_chains(iters) },
            _ => scalar_chains(iters),
        };
        (macs, start.elapsed().as_secs_f64())
    };
    assert!(isa.is_available());
    // Calibrate on one thread, then run all threads together.
    let mut iters = 1u64 << 16;
    loop {
        let (_, t) = per_thread(iters);
        if t > 0.05 {
            iters = ((iters as f64) * seconds / t).max(1.0) as u64;
            break;
        }
        iters *= 4;
    }
    let start = Instant::now();
    let macs: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(|| per_thread(iters).0)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    macs as f64 / start.elapsed().as_secs_f64()
}

/// An instruction that the 512-bit kernels (`cpu::kernels::avx512`) issue beside their zmm
/// `vpdpbusd`: their scale, minimum and float steps, and the weights' unpacking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BesideDot {
    /// `vpmulld`: the scaling of a sub-block's integer sums.
    MulLo,
    /// `vpmaddwd`: the Q4_K minimums (what `vpdpwssd` compiles to).
    MulAddI16,
    /// `vcvtdq2ps`: a super-block's integer sums to floats.
    ConvertF32,
    /// `vfmadd231ps`: a super-block's float end.
    FmaF32,
    /// `vpaddd`: adding the scaled sums.
    Add,
    /// `vpsrlw` and `vpandq`: unpacking the high nibbles (the pair counts as one).
    ShiftAnd,
}

impl BesideDot {
    pub const ALL: [BesideDot; 6] =
        [Self::MulLo, Self::MulAddI16, Self::ConvertF32, Self::FmaF32, Self::Add, Self::ShiftAnd];

    pub fn name(self) -> &'static str {
        match self {
            Self::MulLo => "vpmulld",
            Self::MulAddI16 => "vpmaddwd",
            Self::ConvertF32 => "vcvtdq2ps",
            Self::FmaF32 => "vfmadd231ps",
            Self::Add => "vpaddd",
            Self::ShiftAnd => "vpsrlw+vpandq",
        }
    }
}

/// What one `op` costs a stream of independent zmm `vpdpbusd`, in `vpdpbusd` issue slots: about
/// 1 when the two share the execution units that bound the kernels (each such instruction
/// delays the dot products by one), about 0 when it runs beside them for free. Measured on
/// one thread for about `seconds`, one `op` per four `vpdpbusd`; `None` without AVX-512 VNNI.
///
/// Why: the 512-bit kernels' fraction of the int8 peak is bounded by the instructions that
/// take `vpdpbusd`'s units, and which those are differs between CPUs (Zen 4 splits a zmm
/// instruction into two halves on its 256-bit units).
pub fn slots_beside_dot(op: BesideDot, seconds: f64) -> Option<f64> {
    if !Isa::Avx512Vnni.is_available() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    {
        const ROUNDS: usize = 8;
        let time = |iters: u64, beside: Option<BesideDot>| {
            let start = Instant::now();
            // SAFETY: AVX-512 VNNI is available (checked above).
            unsafe { x86::avx512_vnni_beside(iters, beside) };
            start.elapsed().as_secs_f64()
        };
        let mut iters = 1u64 << 14;
        while time(iters, None) < 0.02 {
            iters *= 4;
        }
        let iters = ((iters as f64) * seconds / (2 * ROUNDS) as f64 / time(iters, None)).max(1.0) as u64;
        // Alternating rounds, the fastest of each: a shared machine can lose the core, or
        // change its clock, for a moment.
        let (mut alone, mut mixed) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..ROUNDS {
            alone = alone.min(time(iters, None));
            mixed = mixed.min(time(iters, Some(op)));
        }
        // Twelve `vpdpbusd` and three `op` an iteration.
        Some(((mixed / alone - 1.0) * 12.0 / 3.0).max(0.0))
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("AVX-512 VNNI is x86 only")
}

fn scalar_chains(iters: u64) -> u64 {
    let mut acc = [0i32; 8];
    let mut a = [3i8; 8];
    for n in 0..iters {
        for (k, v) in acc.iter_mut().enumerate() {
            *v = v.wrapping_add(a[k] as i32 * 5);
        }
        a[(n % 8) as usize] = std::hint::black_box(a[(n % 8) as usize]);
    }
    std::hint::black_box(acc);
    iters * 8
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::cpu::kernels::int8_dot::{Avx2Dot, AvxVnniDot, Int8Dot};

    /// 12 independent chains of the packed kernels' byte dot product (`Int8Dot::dot_u8i8`: on
    /// AVX2 vpmaddubsw + vpmaddwd + vpaddd, on VNNI one vpdpbusd), 32 multiply-adds each.
    // `avx` for the asm's ymm operand; inlined into each caller, whose features it is within.
    #[target_feature(enable = "avx")]
    #[inline]
    unsafe fn chains<O: Int8Dot>(iters: u64) -> u64 {
        const CHAINS: usize = 12;
        // SAFETY: the callers' target features include the instructions `O` uses.
        unsafe {
            let mut a = _mm256_set1_epi8(3);
            let b = _mm256_set1_epi8(5);
            let mut acc = [_mm256_setzero_si256(); CHAINS];
            for _ in 0..iters {
                for c in acc.iter_mut() {
                    // An empty asm that "changes" `a` keeps the compiler from sharing one
                    // product between the chains.
                    std::arch::asm!("/* {0} */", inout(ymm_reg) a, options(pure, nomem, nostack));
                    *c = O::dot_u8i8(*c, a, b);
                }
            }
            std::hint::black_box(acc);
        }
        iters * (CHAINS as u64) * 32
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn avx2_chains(iters: u64) -> u64 {
        // SAFETY: AVX2 is enabled for this function (the caller's contract).
        unsafe { chains::<Avx2Dot>(iters) }
    }

    #[target_feature(enable = "avx2,avxvnni")]
    pub unsafe fn avx_vnni_chains(iters: u64) -> u64 {
        // SAFETY: as for `avx2_chains`, with AVX-VNNI.
        unsafe { chains::<AvxVnniDot>(iters) }
    }

    /// The AVX-512 VNNI path's peak is that of its widest kernels (`cpu::kernels::avx512`): 12 chains
    /// of zmm `vpdpbusd`, 64 multiply-adds each. (On a CPU that splits zmm into two halves, such
    /// as Zen 4, this equals the ymm rate; on full-width ones, such as Zen 5, it is twice it.)
    #[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub unsafe fn avx512_vnni_chains(iters: u64) -> u64 {
        const CHAINS: usize = 12;
        let mut a = _mm512_set1_epi8(3);
        let b = _mm512_set1_epi8(5);
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        for _ in 0..iters {
            for c in acc.iter_mut() {
                // SAFETY: the empty asm only claims to change `a` (as in `chains`).
                unsafe { std::arch::asm!("/* {0} */", inout(zmm_reg) a, options(pure, nomem, nostack)) };
                *c = _mm512_dpbusd_epi32(*c, a, b);
            }
        }
        std::hint::black_box(acc);
        iters * (CHAINS as u64) * 64
    }

    /// A loop of `$iters` iterations of twelve independent zmm `vpdpbusd` (zmm0..zmm11) with
    /// `$op` (three instances, on chains zmm14..zmm16 of their own) after every fourth. Written
    /// in assembly so that the compiler can neither fold the extra instructions nor move them.
    macro_rules! beside_loop {
        ($iters:expr, $a:literal, $b:literal, $c:literal) => {
            // SAFETY: AVX-512 VNNI is available (the caller's contract); only the named
            // registers are written.
            unsafe {
                std::arch::asm!(
                    "vpxord zmm14, zmm14, zmm14",
                    "vpxord zmm15, zmm15, zmm15",
                    "vpxord zmm16, zmm16, zmm16",
                    "2:",
                    "vpdpbusd zmm0, zmm12, zmm13", "vpdpbusd zmm1, zmm12, zmm13",
                    "vpdpbusd zmm2, zmm12, zmm13", "vpdpbusd zmm3, zmm12, zmm13",
                    $a,
                    "vpdpbusd zmm4, zmm12, zmm13", "vpdpbusd zmm5, zmm12, zmm13",
                    "vpdpbusd zmm6, zmm12, zmm13", "vpdpbusd zmm7, zmm12, zmm13",
                    $b,
                    "vpdpbusd zmm8, zmm12, zmm13", "vpdpbusd zmm9, zmm12, zmm13",
                    "vpdpbusd zmm10, zmm12, zmm13", "vpdpbusd zmm11, zmm12, zmm13",
                    $c,
                    "dec {n}",
                    "jnz 2b",
                    n = inout(reg) $iters => _,
                    in("zmm12") _mm512_set1_epi8(3),
                    in("zmm13") _mm512_set1_epi8(5),
                    in("zmm17") _mm512_set1_ps(1.0),
                    out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _,
                    out("zmm5") _, out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _,
                    out("zmm10") _, out("zmm11") _, out("zmm14") _, out("zmm15") _, out("zmm16") _,
                    options(nomem, nostack),
                )
            }
        };
    }

    /// Runs `beside_loop` with `beside`'s instruction (`None`: none) for `iters` iterations.
    #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub unsafe fn avx512_vnni_beside(iters: u64, beside: Option<super::BesideDot>) {
        use super::BesideDot as B;
        let iters = iters.max(1);
        match beside {
            None => beside_loop!(iters, "", "", ""),
            Some(B::MulLo) => beside_loop!(
                iters,
                "vpmulld zmm14, zmm14, zmm17",
                "vpmulld zmm15, zmm15, zmm17",
                "vpmulld zmm16, zmm16, zmm17"
            ),
            Some(B::MulAddI16) => beside_loop!(
                iters,
                "vpmaddwd zmm14, zmm14, zmm17",
                "vpmaddwd zmm15, zmm15, zmm17",
                "vpmaddwd zmm16, zmm16, zmm17"
            ),
            Some(B::ConvertF32) => {
                beside_loop!(iters, "vcvtdq2ps zmm14, zmm14", "vcvtdq2ps zmm15, zmm15", "vcvtdq2ps zmm16, zmm16")
            }
            Some(B::FmaF32) => beside_loop!(
                iters,
                "vfmadd231ps zmm14, zmm17, zmm17",
                "vfmadd231ps zmm15, zmm17, zmm17",
                "vfmadd231ps zmm16, zmm17, zmm17"
            ),
            Some(B::Add) => beside_loop!(
                iters,
                "vpaddd zmm14, zmm14, zmm17",
                "vpaddd zmm15, zmm15, zmm17",
                "vpaddd zmm16, zmm16, zmm17"
            ),
            Some(B::ShiftAnd) => beside_loop!(
                iters,
                "vpsrlw zmm14, zmm14, 4\nvpandq zmm14, zmm14, zmm17",
                "vpsrlw zmm15, zmm15, 4\nvpandq zmm15, zmm15, zmm17",
                "vpsrlw zmm16, zmm16, 4\nvpandq zmm16, zmm16, zmm17"
            ),
        }
    }
}
