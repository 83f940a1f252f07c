//! The two integer multiply-accumulate steps the packed kernels are built from, on each x86
//! instruction set with packed kernels. The kernels are written once, generic over these, and
//! compiled once per instruction set (`avx2::packed_entry_points!`), so the loop structure the
//! AVX2 tests check is the same code the VNNI paths run; only these two steps differ.
//!
//! Both VNNI variants work at 256-bit width: the packed layouts hold eight columns per 32-byte
//! vector, and 256-bit VNNI (AVX-VNNI, or AVX-512 VNNI with AVX-512VL) runs the same layout.
//! The AVX-512 VNNI path also has 512-bit forms of the packed kernels (`cpu::kernels::avx512`).

use std::arch::x86_64::*;

/// Safety contract of both methods: the CPU supports the implementing type's instruction set.
pub trait Int8Dot {
    /// `acc + sum over each lane's four bytes of u * s` (u unsigned, s signed). On AVX2 the
    /// byte pairs are first summed in i16 with saturation: callers keep every pair sum within
    /// i16 (|u| <= 128 with |s| <= 127 does), so that every path gives the same exact sum.
    unsafe fn dot_u8i8(acc: __m256i, u: __m256i, s: __m256i) -> __m256i;
    /// `acc + sum over each lane's two i16 of a * b`.
    unsafe fn dot_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i;
}

/// AVX2: `vpmaddubsw` + `vpmaddwd` against ones + `vpaddd`, and `vpmaddwd` + `vpaddd`.
pub struct Avx2Dot;

impl Int8Dot for Avx2Dot {
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX2 present).
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))) }
    }

    #[inline(always)]
    unsafe fn dot_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX2 present).
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)) }
    }
}

/// AVX-VNNI (VEX-encoded, Intel hybrid desktop and laptop chips): `vpdpbusd`, `vpdpwssd`.
pub struct AvxVnniDot;

impl Int8Dot for AvxVnniDot {
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX-VNNI present).
        unsafe { _mm256_dpbusd_avx_epi32(acc, u, s) }
    }

    #[inline(always)]
    unsafe fn dot_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX-VNNI present).
        unsafe { _mm256_dpwssd_avx_epi32(acc, a, b) }
    }
}

/// AVX-512 VNNI with AVX-512VL (EVEX-encoded, server chips): `vpdpbusd`, `vpdpwssd` on ymm.
pub struct Avx512VnniDot;

impl Int8Dot for Avx512VnniDot {
    #[inline(always)]
    unsafe fn dot_u8i8(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX-512 VNNI and VL present).
        unsafe { _mm256_dpbusd_epi32(acc, u, s) }
    }

    #[inline(always)]
    unsafe fn dot_i16(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: the trait's contract (AVX-512 VNNI and VL present).
        unsafe { _mm256_dpwssd_epi32(acc, a, b) }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::cpu::kernels::Isa;

    #[target_feature(enable = "avx2")]
    fn load<T>(v: &[T]) -> __m256i {
        assert_eq!(std::mem::size_of_val(v), 32);
        // SAFETY: 32 readable bytes (checked).
        unsafe { _mm256_loadu_si256(v.as_ptr() as *const __m256i) }
    }

    #[target_feature(enable = "avx2")]
    fn lanes(v: __m256i) -> [i32; 8] {
        let mut out = [0i32; 8];
        // SAFETY: 32 writable bytes.
        unsafe { _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, v) };
        out
    }

    /// Both steps on `O` against their definitions, on random inputs within the contract
    /// (unsigned bytes up to 128, signed down to -127, i16 anywhere).
    #[target_feature(enable = "avx2")]
    unsafe fn check<O: Int8Dot>(rng: &mut ChaCha8Rng) {
        for _ in 0..1000 {
            let acc: [i32; 8] = std::array::from_fn(|_| rng.random_range(-1 << 20..1 << 20));
            let u: [u8; 32] = std::array::from_fn(|_| rng.random_range(0..=128));
            let s: [i8; 32] = std::array::from_fn(|_| rng.random_range(-127..=127));
            let a: [i16; 16] = std::array::from_fn(|_| rng.random());
            let b: [i16; 16] = std::array::from_fn(|_| rng.random());
            // SAFETY: the caller checked the ISA.
            let (bytes, words) =
                unsafe { (O::dot_u8i8(load(&acc), load(&u), load(&s)), O::dot_i16(load(&acc), load(&a), load(&b))) };
            let (bytes, words) = (lanes(bytes), lanes(words));
            for l in 0..8 {
                let want_bytes: i32 = (0..4).map(|k| u[4 * l + k] as i32 * s[4 * l + k] as i32).sum();
                let want_words = (0..2).map(|k| a[2 * l + k] as i32 * b[2 * l + k] as i32).fold(0, i32::wrapping_add);
                assert_eq!(bytes[l], acc[l] + want_bytes, "dot_u8i8 lane {l}");
                assert_eq!(words[l], acc[l].wrapping_add(want_words), "dot_i16 lane {l}");
            }
        }
    }

    #[test]
    fn every_available_step_matches_its_definition() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for isa in [Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni] {
            if !isa.is_available() {
                eprintln!("skipped: {} (not on this CPU)", isa.name());
                continue;
            }
            // SAFETY: the ISA (and with it AVX2) is available.
            unsafe {
                match isa {
                    Isa::Avx2 => check::<Avx2Dot>(&mut rng),
                    Isa::AvxVnni => check::<AvxVnniDot>(&mut rng),
                    _ => check::<Avx512VnniDot>(&mut rng),
                }
            }
        }
    }
}
