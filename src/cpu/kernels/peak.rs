//! The machine's int8 multiply-add peak on each kernel instruction set, measured by a loop of
//! independent dot-product chains that never touches memory. Kernel efficiency is reported
//! against this number, measured in the same run.

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
}
