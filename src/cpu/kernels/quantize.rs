//! Activation quantization (`quant::q8`, the portable reference) compiled for the SIMD paths
//! and dispatched on the active one: the baseline x86-64 target has SSE2 only, and 8- or
//! 16-wide vectors halve the time of a pass that is a third of a small product (Dream's 512-row
//! K/V projections). The same code, so the same numbers bit for bit (tested).

use super::Isa;
use crate::quant::q8::{BlockQ8_0, BlockQ8K};

/// ggml's Q8_K quantization on the active path.
pub fn quantize_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    #[cfg(target_arch = "x86_64")]
    match super::active_isa() {
        // SAFETY: the AVX-512 VNNI path needs AVX-512 F and BW, which `active_isa` checked.
        Isa::Avx512Vnni => return unsafe { quantize_q8_k_avx512(x, out) },
        // SAFETY: every x86 SIMD path needs AVX2, which `active_isa` checked.
        isa if isa.is_x86_simd() => return unsafe { quantize_q8_k_avx2(x, out) },
        _ => {}
    }
    crate::quant::q8::quantize_q8_k(x, out)
}

/// ggml's Q8_0 quantization on the active path.
pub fn quantize_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    #[cfg(target_arch = "x86_64")]
    if super::active_isa().is_x86_simd() {
        // SAFETY: as in `quantize_q8_k`.
        return unsafe { quantize_q8_0_avx2(x, out) };
    }
    crate::quant::q8::quantize_q8_0(x, out)
}

/// The portable Q8_K quantizer compiled for AVX-512 (16 lanes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
unsafe fn quantize_q8_k_avx512(x: &[f32], out: &mut [BlockQ8K]) {
    crate::quant::q8::quantize_q8_k(x, out)
}

/// The portable Q8_K quantizer compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_q8_k_avx2(x: &[f32], out: &mut [BlockQ8K]) {
    crate::quant::q8::quantize_q8_k(x, out)
}

/// The portable Q8_0 quantizer compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_q8_0_avx2(x: &[f32], out: &mut [BlockQ8_0]) {
    crate::quant::q8::quantize_q8_0(x, out)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::quant::blocks::{QK, QK_K};

    #[test]
    fn simd_quantizers_equal_the_portable_ones() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for case in 0..64 {
            let x = crate::quant::q8::awkward_activations(&mut rng, case);
            let mut portable = vec![BlockQ8K::default(); 4];
            crate::quant::q8::quantize_q8_k(&x, &mut portable);
            let mut portable_0 = vec![BlockQ8_0::default(); 4 * QK_K / QK];
            crate::quant::q8::quantize_q8_0(&x, &mut portable_0);
            let same = |wide: &[BlockQ8K], what: &str| {
                for (w, p) in wide.iter().zip(&portable) {
                    assert!(
                        w.d.to_bits() == p.d.to_bits()
                            && w.qs == p.qs
                            && w.bsums == p.bsums
                            && w.sub_sums == p.sub_sums
                            && w.q6_k_offsets == p.q6_k_offsets,
                        "{what}, case {case}"
                    );
                }
            };
            if Isa::Avx2.is_available() {
                let mut wide = vec![BlockQ8K::default(); 4];
                let mut wide_0 = vec![BlockQ8_0::default(); 4 * QK_K / QK];
                // SAFETY: AVX2 checked just above.
                unsafe {
                    quantize_q8_k_avx2(&x, &mut wide);
                    quantize_q8_0_avx2(&x, &mut wide_0);
                }
                same(&wide, "avx2");
                for (w, p) in wide_0.iter().zip(&portable_0) {
                    assert!(w.d.to_bits() == p.d.to_bits() && w.qs == p.qs && w.sum == p.sum, "case {case}");
                }
            }
            if Isa::Avx512Vnni.is_available() {
                let mut wide = vec![BlockQ8K::default(); 4];
                // SAFETY: AVX-512 F, BW and VL checked just above.
                unsafe { quantize_q8_k_avx512(&x, &mut wide) };
                same(&wide, "avx512");
            }
        }
    }
}
