//! Dot products of one quantized weight row with a group of 8-bit activation rows, on the
//! chosen instruction set. The scalar path is `quant::vec_dot`, the reference.

use super::Isa;
#[cfg(target_arch = "x86_64")]
use super::avx2::{self, packed_avx_vnni, packed_avx2, packed_avx512_vnni};
#[cfg(target_arch = "x86_64")]
use super::avx512;
use crate::quant::q8::{BlockQ8_0, BlockQ8K};
use crate::quant::{GgmlType, vec_dot};

/// Activation rows handled together by one row-kernel call (each weight vector is unpacked
/// once for them).
pub const ROW_GROUP: usize = 4;

/// Activation rows handled together by one packed-kernel call: the 512-bit kernels take all of
/// them at once (they have 32 registers, and the more rows an unpacked weight vector meets, the
/// fewer instructions per multiply-add); the 256-bit kernels take them `ROW_GROUP` at a time.
pub const PACKED_ROW_GROUP: usize = 8;

/// Calls the SIMD kernel `$m::$f::<R>` with the first R rows of `$acts`, R = `$acts.len()`,
/// for each R in the list.
macro_rules! by_rows {
    ($m:ident::$f:ident, $w:expr, $acts:expr, $out:expr, [$($n:literal),*]) => {{
        let (w, a, out) = ($w, $acts, $out);
        // SAFETY: the caller checked that the ISA is available and that the lengths match
        // (see the safety contracts in cpu::avx2 and cpu::avx512).
        unsafe {
            match a.len() {
                $( $n => out.copy_from_slice(&$m::$f::<$n>(w, &std::array::from_fn(|i| a[i]))), )*
                _ => unreachable!("checked by the caller"),
            }
        }
    }};
    ($m:ident::$f:ident, $w:expr, $acts:expr, $out:expr) => {
        by_rows!($m::$f, $w, $acts, $out, [1, 2, 3, 4])
    };
}

/// `by_rows!` on the 256-bit packed kernel `$f` compiled for `$isa`, `ROW_GROUP` rows a call.
macro_rules! packed_by_rows {
    ($isa:expr, $f:ident, $w:expr, $acts:expr, $out:expr) => {
        for (a, o) in $acts.chunks(ROW_GROUP).zip($out.chunks_mut(ROW_GROUP)) {
            match $isa {
                Isa::Avx2 => by_rows!(packed_avx2::$f, $w, a, o),
                Isa::AvxVnni => by_rows!(packed_avx_vnni::$f, $w, a, o),
                Isa::Avx512Vnni => by_rows!(packed_avx512_vnni::$f, $w, a, o),
                Isa::Scalar => unreachable!("checked by check_packed"),
            }
        }
    };
}

/// The 512-bit packed kernel `$f` (`cpu::avx512`) on all the rows at once.
macro_rules! zmm_by_rows {
    ($f:ident, $w:expr, $acts:expr, $out:expr) => {
        by_rows!(avx512::$f, $w, $acts, $out, [1, 2, 3, 4, 5, 6, 7, 8])
    };
}

fn check<A>(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[A]], out: &[f32]) {
    assert!(isa.is_available(), "{isa:?} kernels need a CPU that supports them");
    assert!(acts.len() <= ROW_GROUP && out.len() == acts.len());
    let nb = w.len() / ty.type_size();
    assert!(w.len().is_multiple_of(ty.type_size()) && acts.iter().all(|a| a.len() == nb), "{ty}: ragged operands");
}

/// `out[i] = dot(w, acts[i])` for a Q4_K, Q5_K or Q6_K weight row and Q8_K activations.
pub fn dot_rows_q8k(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[BlockQ8K]], out: &mut [f32]) {
    check(isa, ty, w, acts, out);
    match (isa.is_x86_simd(), ty) {
        #[cfg(target_arch = "x86_64")]
        (true, GgmlType::Q4_K) => by_rows!(avx2::dot_q4_k, w, acts, out),
        #[cfg(target_arch = "x86_64")]
        (true, GgmlType::Q5_K) => by_rows!(avx2::dot_q5_k, w, acts, out),
        #[cfg(target_arch = "x86_64")]
        (true, GgmlType::Q6_K) => by_rows!(avx2::dot_q6_k, w, acts, out),
        (_, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) => {
            let dot = match ty {
                GgmlType::Q4_K => vec_dot::dot_q4_k,
                GgmlType::Q5_K => vec_dot::dot_q5_k,
                _ => vec_dot::dot_q6_k,
            };
            for (o, a) in out.iter_mut().zip(acts) {
                *o = dot(w, a);
            }
        }
        _ => panic!("{ty} weights do not take Q8_K activations"),
    }
}

/// `out[i] = dot(w, acts[i])` for a Q8_0 weight row and Q8_0 activations.
pub fn dot_rows_q8_0(isa: Isa, w: &[u8], acts: &[&[BlockQ8_0]], out: &mut [f32]) {
    check(isa, GgmlType::Q8_0, w, acts, out);
    match isa.is_x86_simd() {
        #[cfg(target_arch = "x86_64")]
        true => by_rows!(avx2::dot_q8_0, w, acts, out),
        _ => {
            for (o, a) in out.iter_mut().zip(acts) {
                *o = vec_dot::dot_q8_0(w, a);
            }
        }
    }
}

/// `out[r][c] = dot(column c of a packed group, acts[r])` for up to `PACKED_ROW_GROUP` rows, on a
/// Q4_K, Q5_K or Q6_K group in the `cpu::repack` layout. Only the x86 SIMD paths have packed
/// kernels; the scalar reference for the same product is `dot_rows_q8k` on the unpacked rows.
pub fn gemm_packed(isa: Isa, ty: GgmlType, group: &[u8], acts: &[&[BlockQ8K]], out: &mut [[f32; super::repack::COLS]]) {
    use super::repack::{Q4_K_GROUP_BLOCK, Q5_K_GROUP_BLOCK, Q6_K_GROUP_BLOCK};
    let block = match ty {
        GgmlType::Q4_K => Q4_K_GROUP_BLOCK,
        GgmlType::Q5_K => Q5_K_GROUP_BLOCK,
        GgmlType::Q6_K => Q6_K_GROUP_BLOCK,
        _ => panic!("no packed kernel for {ty} with Q8_K activations"),
    };
    check_packed(isa, block, group, acts, out);
    #[cfg(target_arch = "x86_64")]
    match (isa, ty) {
        (Isa::Avx512Vnni, GgmlType::Q4_K) => zmm_by_rows!(gemm_q4_k_x8, group, acts, out),
        (Isa::Avx512Vnni, GgmlType::Q6_K) => zmm_by_rows!(gemm_q6_k_x8, group, acts, out),
        (_, GgmlType::Q4_K) => packed_by_rows!(isa, gemm_q4_k_x8, group, acts, out),
        (_, GgmlType::Q5_K) => packed_by_rows!(isa, gemm_q5_k_x8, group, acts, out),
        _ => packed_by_rows!(isa, gemm_q6_k_x8, group, acts, out),
    }
}

/// `gemm_packed` for a Q8_0 group and Q8_0 activations; the scalar reference is
/// `dot_rows_q8_0` on the unpacked rows.
pub fn gemm_packed_q8_0(isa: Isa, group: &[u8], acts: &[&[BlockQ8_0]], out: &mut [[f32; super::repack::COLS]]) {
    check_packed(isa, super::repack::Q8_0_GROUP_BLOCK, group, acts, out);
    #[cfg(target_arch = "x86_64")]
    packed_by_rows!(isa, gemm_q8_0_x8, group, acts, out)
}

fn check_packed<A, O>(isa: Isa, block: usize, group: &[u8], acts: &[&[A]], out: &[O]) {
    assert!(isa.is_available() && isa.is_x86_simd(), "packed kernels run on the x86 SIMD paths");
    assert!(acts.len() <= PACKED_ROW_GROUP && out.len() == acts.len());
    let nb = group.len() / block;
    assert!(group.len().is_multiple_of(block) && acts.iter().all(|a| a.len() == nb), "ragged packed operands");
}
