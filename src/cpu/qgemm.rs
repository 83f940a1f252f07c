//! Dot products of one quantized weight row with a group of 8-bit activation rows, on the
//! chosen instruction set. The scalar path is `quant::vec_dot`, the reference.

use super::Isa;
#[cfg(target_arch = "x86_64")]
use super::avx2::{self, packed_avx_vnni, packed_avx2, packed_avx512_vnni};
#[cfg(target_arch = "x86_64")]
use super::avx512;
use super::repack::COLS;
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

/// Groups one packed-kernel call takes at most (`gemm_packed`).
pub const MAX_CALL_GROUPS: usize = 2;

/// Columns of one packed-kernel call's results per row.
pub const CALL_COLS: usize = MAX_CALL_GROUPS * COLS;

/// How many adjacent groups a packed-kernel call on `isa` should take for `ty`: two where a
/// kernel computes sixteen columns at once (the 512-bit kernels), else one.
pub fn packed_call_groups(isa: Isa, ty: GgmlType) -> usize {
    match (isa, ty) {
        (Isa::Avx512Vnni, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K | GgmlType::Q8_0) => 2,
        _ => 1,
    }
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

/// `out[r][c] = dot(column c of the packed groups, acts[r])` for up to `PACKED_ROW_GROUP` rows,
/// on one or two adjacent Q4_K, Q5_K or Q6_K groups in the `cpu::repack` layout (`groups`: their
/// bytes, one after the other; `out[r][..8 * groups]` is written). Only the x86 SIMD paths have
/// packed kernels; the scalar reference for the same product is `dot_rows_q8k` on the unpacked
/// rows.
pub fn gemm_packed(isa: Isa, ty: GgmlType, groups: &[u8], acts: &[&[BlockQ8K]], out: &mut [[f32; CALL_COLS]]) {
    use super::repack::{Q4_K_GROUP_BLOCK, Q5_K_GROUP_BLOCK, Q6_K_GROUP_BLOCK};
    let block = match ty {
        GgmlType::Q4_K => Q4_K_GROUP_BLOCK,
        GgmlType::Q5_K => Q5_K_GROUP_BLOCK,
        GgmlType::Q6_K => Q6_K_GROUP_BLOCK,
        _ => panic!("no packed kernel for {ty} with Q8_K activations"),
    };
    let n_groups = check_packed(isa, block, groups, acts, out);
    #[cfg(target_arch = "x86_64")]
    match (isa, ty, n_groups) {
        (Isa::Avx512Vnni, GgmlType::Q4_K, 2) => zmm_by_rows!(gemm_q4_k_x16, groups, acts, out),
        (Isa::Avx512Vnni, GgmlType::Q5_K, 2) => zmm_by_rows!(gemm_q5_k_x16, groups, acts, out),
        (Isa::Avx512Vnni, GgmlType::Q6_K, 2) => zmm_by_rows!(gemm_q6_k_x16, groups, acts, out),
        _ => each_group(groups, n_groups, out, |group, o| match ty {
            GgmlType::Q4_K => packed_by_rows!(isa, gemm_q4_k_x8, group, acts, o),
            GgmlType::Q5_K => packed_by_rows!(isa, gemm_q5_k_x8, group, acts, o),
            _ => packed_by_rows!(isa, gemm_q6_k_x8, group, acts, o),
        }),
    }
}

/// `gemm_packed` for Q8_0 groups and Q8_0 activations; the scalar reference is `dot_rows_q8_0`
/// on the unpacked rows.
pub fn gemm_packed_q8_0(isa: Isa, groups: &[u8], acts: &[&[BlockQ8_0]], out: &mut [[f32; CALL_COLS]]) {
    let n_groups = check_packed(isa, super::repack::Q8_0_GROUP_BLOCK, groups, acts, out);
    #[cfg(target_arch = "x86_64")]
    match (isa, n_groups) {
        (Isa::Avx512Vnni, 2) => zmm_by_rows!(gemm_q8_0_x16, groups, acts, out),
        _ => each_group(groups, n_groups, out, |group, o| packed_by_rows!(isa, gemm_q8_0_x8, group, acts, o)),
    }
}

/// Runs `kernel(group, results)` on each of the `n_groups` groups in `groups`, one at a time,
/// and puts group g's eight columns at `out[r][8 g..8 g + 8]`.
fn each_group(
    groups: &[u8],
    n_groups: usize,
    out: &mut [[f32; CALL_COLS]],
    kernel: impl Fn(&[u8], &mut [[f32; COLS]]),
) {
    let mut results = [[0f32; COLS]; PACKED_ROW_GROUP];
    let results = &mut results[..out.len()];
    for (g, group) in groups.chunks_exact(groups.len() / n_groups).enumerate() {
        kernel(group, results);
        for (o, res) in out.iter_mut().zip(results.iter()) {
            o[g * COLS..(g + 1) * COLS].copy_from_slice(res);
        }
    }
}

/// Checks the operands of a packed-kernel call; returns how many groups `groups` holds.
fn check_packed<A, O>(isa: Isa, block: usize, groups: &[u8], acts: &[&[A]], out: &[O]) -> usize {
    assert!(isa.is_available() && isa.is_x86_simd(), "packed kernels run on the x86 SIMD paths");
    assert!((1..=PACKED_ROW_GROUP).contains(&acts.len()) && out.len() == acts.len());
    let group_bytes = acts[0].len() * block;
    let n_groups = groups.len() / group_bytes.max(1);
    assert!(
        group_bytes > 0 && (1..=MAX_CALL_GROUPS).contains(&n_groups) && groups.len() == n_groups * group_bytes,
        "packed operands: {} bytes are not 1 or 2 groups of {} blocks",
        groups.len(),
        acts[0].len()
    );
    assert!(acts.iter().all(|a| a.len() == acts[0].len()), "ragged packed operands");
    n_groups
}
