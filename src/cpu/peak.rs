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
        let macs = match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: only called for an available ISA (checked below).
            Isa::Avx2 => unsafe { avx2_chains(iters) },
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

/// 12 independent chains of vpmaddubsw + vpmaddwd + vpaddd: 32 multiply-adds each.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2_chains(iters: u64) -> u64 {
    use std::arch::x86_64::*;
    const CHAINS: usize = 12;
    let a = _mm256_set1_epi8(3);
    let b = _mm256_set1_epi8(5);
    let one = _mm256_set1_epi16(1);
    let mut a = a;
    let mut acc = [_mm256_setzero_si256(); CHAINS];
    for _ in 0..iters {
        for c in acc.iter_mut() {
            // An empty asm that "changes" `a` keeps the compiler from sharing one product
            // between the chains.
            // SAFETY: the asm is empty; it only marks the register as modified.
            unsafe { std::arch::asm!("/* {0} */", inout(ymm_reg) a, options(pure, nomem, nostack)) };
            *c = _mm256_add_epi32(*c, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one));
        }
    }
    std::hint::black_box(acc);
    iters * (CHAINS as u64) * 32
}
