//! Dot products of one quantized weight row with a group of 8-bit activation rows, on the
//! chosen instruction set. The scalar path is `quant::vec_dot`, the reference.

use super::Isa;
#[cfg(target_arch = "x86_64")]
use super::avx2::{self, packed_avx_vnni, packed_avx2, packed_avx512_vnni};
#[cfg(target_arch = "x86_64")]
use super::avx512;
use super::repack::COLS;
use crate::quant::q8::{BlockQ8_0, BlockQ8_1, BlockQ8K};
use crate::quant::{GgmlType, vec_dot};

/// Activation rows handled together by one row-kernel call (each weight vector is unpacked
/// once for them).
pub const ROW_GROUP: usize = 4;

/// The most activation rows one `gemm_packed` call takes: a multiple of every packed kernel's
/// rows (`QUAD_ROWS`, `PAIR_ROWS`, `Q6_K_PAIR_ROWS`, `ROW_GROUP`, `Q4_K_X8_ROWS`, `Q6_K_X8_ROWS`), so that a call's rows go to
/// whole kernel calls but for its last. Each kernel takes as many rows as its registers allow:
/// the more rows an unpacked weight vector meets, the fewer instructions per multiply-add. A
/// call per column block and 120 rows (two for a 148-row canvas) keeps the checks and dispatch
/// off each kernel call, where they took 1-2% of a step.
pub const PACKED_ROW_GROUP: usize = 120;

const _: () = assert!(
    PACKED_ROW_GROUP.is_multiple_of(QUAD_ROWS)
        && PACKED_ROW_GROUP.is_multiple_of(PAIR_ROWS)
        && PACKED_ROW_GROUP.is_multiple_of(Q6_K_PAIR_ROWS)
        && PACKED_ROW_GROUP.is_multiple_of(ROW_GROUP)
        && PACKED_ROW_GROUP.is_multiple_of(Q4_K_X8_ROWS)
        && PACKED_ROW_GROUP.is_multiple_of(Q6_K_X8_ROWS),
    "a packed call's rows go to whole kernel calls"
);

/// The slice of `ahead` (bytes to prefetch) that the `i`th of `n` calls asks for: an equal
/// share each, in order.
pub fn ahead_share(ahead: &[u8], i: usize, n: usize) -> &[u8] {
    let share = ahead.len().div_ceil(n.max(1));
    &ahead[(i * share).min(ahead.len())..((i + 1) * share).min(ahead.len())]
}

/// Calls the SIMD kernel `$m::$f::<R>` with the first R rows of `$acts`, R = `$acts.len()`,
/// for each R in the list.
macro_rules! by_rows {
    ($m:ident::$f:ident, $w:expr, $acts:expr, $out:expr, [$($n:literal),*]) => {{
        let (w, a, out) = ($w, $acts, $out);
        // SAFETY: the caller checked that the ISA is available and that the lengths match
        // (see the safety contracts in cpu::kernels::avx2 and cpu::kernels::avx512).
        unsafe {
            match a.len() {
                $( $n => out.copy_from_slice(&$m::$f::<$n>(w, a.try_into().expect("matched on the length"))), )*
                _ => unreachable!("checked by the caller"),
            }
        }
    }};
    ($m:ident::$f:ident, $w:expr, $acts:expr, $out:expr) => {
        by_rows!($m::$f, $w, $acts, $out, [1, 2, 3, 4])
    };
}

/// Calls the packed kernel `$m::$f::<R>` with the rows `$acts` and `$ahead` (the bytes to
/// prefetch), R = `$acts.len()` (for each R in the list), and puts row r's results at
/// `$out[r][$col..]`.
macro_rules! packed_rows {
    ($m:ident::$f:ident, $w:expr, $acts:expr, $out:expr, $col:expr, $ahead:expr, [$($n:literal),*]) => {{
        let (w, a, out, col, ahead) = ($w, $acts, &mut *$out, $col, $ahead);
        // SAFETY: the caller checked that the ISA is available and that the lengths match
        // (see the safety contracts in cpu::kernels::avx2 and cpu::kernels::avx512).
        unsafe {
            match a.len() {
                $( $n => put_results(out, col, &$m::$f::<$n>(w, a.try_into().expect("matched on the length"), ahead)), )*
                _ => unreachable!("checked by the caller"),
            }
        }
    }};
}

/// Row r of `results` into `out[r][col..]`.
fn put_results<const W: usize>(out: &mut [[f32; CALL_COLS]], col: usize, results: &[[f32; W]]) {
    for (o, res) in out.iter_mut().zip(results) {
        o[col..col + W].copy_from_slice(res);
    }
}

/// The 256-bit packed kernel `$f` compiled for `$isa` on one group, `ROW_GROUP` rows a call;
/// each call spreads the prefetch of its share of `$ahead` over its loop.
macro_rules! packed_x8 {
    ($isa:expr, $f:ident, $w:expr, $acts:expr, $out:expr, $col:expr, $ahead:expr) => {{
        packed_x8!($isa, $f, ROW_GROUP, [1, 2, 3, 4], $w, $acts, $out, $col, $ahead)
    }};
    ($isa:expr, $f:ident, $rows:expr, [$($n:literal),*], $w:expr, $acts:expr, $out:expr, $col:expr, $ahead:expr) => {{
        let calls = $acts.len().div_ceil($rows);
        for (i, (a, o)) in $acts.chunks($rows).zip($out.chunks_mut($rows)).enumerate() {
            let ahead = ahead_share($ahead, i, calls);
            match $isa {
                Isa::Avx2 => packed_rows!(packed_avx2::$f, $w, a, o, $col, ahead, [$($n),*]),
                Isa::AvxVnni => packed_rows!(packed_avx_vnni::$f, $w, a, o, $col, ahead, [$($n),*]),
                Isa::Avx512Vnni => packed_rows!(packed_avx512_vnni::$f, $w, a, o, $col, ahead, [$($n),*]),
                Isa::Scalar => unreachable!("checked by check_packed"),
            }
        }
    }};
}

/// The 512-bit kernel `$f` (`cpu::kernels::avx512`), `$rows` rows a call (R from the list); each call
/// spreads the prefetch of its share of `$ahead` over its loop.
macro_rules! packed_zmm {
    ($f:ident, $rows:expr, [$($n:literal),*], $w:expr, $acts:expr, $out:expr, $col:expr, $ahead:expr) => {{
        let calls = $acts.len().div_ceil($rows);
        for (i, (a, o)) in $acts.chunks($rows).zip($out.chunks_mut($rows)).enumerate() {
            let ahead = ahead_share($ahead, i, calls);
            packed_rows!(avx512::$f, $w, a, o, $col, ahead, [$($n),*])
        }
    }};
}

/// Groups one packed-kernel call takes at most (`gemm_packed`).
pub const MAX_CALL_GROUPS: usize = 4;

/// Columns of one packed-kernel call's results per row.
pub const CALL_COLS: usize = MAX_CALL_GROUPS * COLS;

/// Activation rows the four-group kernels take at once: their sums for six rows and two zmm
/// of columns, before and after scaling, hold 24 of the 32 registers.
const QUAD_ROWS: usize = 6;

/// Activation rows the sixteen-column kernels take at once: Q4_K's keeps three sums a row
/// (low and high nibbles, scaled), Q5_K's and Q8_0's share its shape.
const PAIR_ROWS: usize = 8;

/// Activation rows the sixteen-column Q6_K kernel takes at once: two sums a row (before and
/// after scaling) leave room for ten, and each extra row shares the weights' loads and
/// unpacking (5-7% faster than eight in one session's measurement, as fast in a later one:
/// ten rows' pointers no longer fit in the general registers and are reloaded per group).
const Q6_K_PAIR_ROWS: usize = 10;

/// Activation rows the 256-bit Q4_K kernel takes at once: its sums (i16 and scaled, two a
/// row) and the unpacked weights fill the 16 ymm registers at four rows, yet six, with a few
/// sums kept on the stack, share each unpacked vector with more rows: 2.3-3.0% faster than four
/// in an A/B run on Zen 3 AVX2 (eight: no faster; `benches/results/ab-x8-rows-avx2-x2.txt`).
const Q4_K_X8_ROWS: usize = 6;

/// Activation rows the 256-bit Q6_K kernel takes at once. Its unpacking (ten operations for
/// 64 weights, against Q4_K's three) is shared by every row of a call, so more rows pay:
/// twelve were 10-11% faster than four in the same A/B runs, eight 8-11%.
const Q6_K_X8_ROWS: usize = 12;

/// The groups per call of the packed kernels for `ty` on `isa`, widest first: four or two
/// where the 512-bit kernels compute 32 or 16 columns at once, and always one (the 256-bit
/// kernels).
fn kernel_groups(isa: Isa, ty: GgmlType) -> &'static [usize] {
    match (isa, ty) {
        (Isa::Avx512Vnni, GgmlType::Q4_K) => &[4, 2, 1],
        (Isa::Avx512Vnni, GgmlType::Q5_K | GgmlType::Q6_K | GgmlType::Q8_0) => &[2, 1],
        _ => &[1],
    }
}

/// The adjacent groups per `gemm_packed` call that feed the widest packed kernel for `ty` on
/// `isa` whole calls (wide Q4_K: one).
pub fn packed_call_groups(isa: Isa, ty: GgmlType, wide: bool) -> usize {
    if wide { 1 } else { kernel_groups(isa, ty)[0] }
}

/// How many of `left` groups the next kernel call takes: the widest kernel that fits.
fn next_call_groups(isa: Isa, ty: GgmlType, left: usize) -> usize {
    kernel_groups(isa, ty).iter().copied().find(|&g| g <= left).unwrap_or(1)
}

fn check<A>(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[A]], out: &[f32]) {
    assert!(isa.is_available(), "{isa:?} kernels need a CPU that supports them");
    assert!(acts.len() <= ROW_GROUP && out.len() == acts.len());
    let nb = w.len() / ty.type_size();
    assert!(w.len().is_multiple_of(ty.type_size()) && acts.iter().all(|a| a.len() == nb), "{ty}: ragged operands");
}

/// `out[i] = dot(w, acts[i])` for a weight row of a type that takes Q8_K activations. Q4_K,
/// Q5_K and Q6_K have SIMD row kernels; the other types run the scalar reference
/// (`quant::vec_dot`), and on the SIMD paths only for the rows a packed layout leaves over.
pub fn dot_rows_q8k(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[BlockQ8K]], out: &mut [f32]) {
    check(isa, ty, w, acts, out);
    match (isa.is_x86_simd(), ty) {
        #[cfg(target_arch = "x86_64")]
        (true, GgmlType::Q4_K) => by_rows!(avx2::dot_q4_k, w, acts, out),
        #[cfg(target_arch = "x86_64")]
        (true, GgmlType::Q5_K) => by_rows!(avx2::dot_q5_k, w, acts, out),
        #[cfg(target_arch = "x86_64")]
        (true, GgmlType::Q6_K) => by_rows!(avx2::dot_q6_k, w, acts, out),
        _ => {
            for (o, a) in out.iter_mut().zip(acts) {
                *o = vec_dot::dot_with_q8_k(ty, w, a);
            }
        }
    }
}

/// `out[i] = dot(w, acts[i])` for a weight row of a type that takes Q8_0 activations (Q8_0 has
/// a SIMD row kernel; Q4_0, Q5_0 and IQ4_NL run the scalar reference).
pub fn dot_rows_q8_0(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[BlockQ8_0]], out: &mut [f32]) {
    check(isa, ty, w, acts, out);
    match (isa.is_x86_simd(), ty) {
        #[cfg(target_arch = "x86_64")]
        (true, GgmlType::Q8_0) => by_rows!(avx2::dot_q8_0, w, acts, out),
        _ => {
            for (o, a) in out.iter_mut().zip(acts) {
                *o = vec_dot::dot_with_q8_0(ty, w, a);
            }
        }
    }
}

/// `out[i] = dot(w, acts[i])` for a Q4_1 or Q5_1 weight row and Q8_1 activations (scalar).
pub fn dot_rows_q8_1(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[BlockQ8_1]], out: &mut [f32]) {
    check(isa, ty, w, acts, out);
    for (o, a) in out.iter_mut().zip(acts) {
        *o = vec_dot::dot_with_q8_1(ty, w, a);
    }
}

/// `out[r][c] = dot(column c of the packed groups, acts[r])` for up to `PACKED_ROW_GROUP` rows,
/// on one to `MAX_CALL_GROUPS` adjacent Q2_K, Q4_K, Q5_K, Q6_K or IQ4_XS groups in the `cpu::kernels::repack` layout
/// (`groups`: their bytes, one after the other; `out[r][..8 * groups]` is written), each span
/// of groups taken by the widest kernel that fits it. Only the x86 SIMD paths have packed
/// kernels; the scalar reference for the same product is `dot_rows_q8k` on the unpacked rows.
/// `ahead`: bytes the caller will want next (the next block's weights), asked into L2 while
/// these products run (`cpu::prefetch`); it does not change the results.
pub fn gemm_packed(
    isa: Isa,
    ty: GgmlType,
    groups: &[u8],
    acts: &[&[BlockQ8K]],
    out: &mut [[f32; CALL_COLS]],
    ahead: &[u8],
) {
    use super::repack::{
        IQ4_XS_GROUP_BLOCK, Q2_K_GROUP_BLOCK, Q3_K_GROUP_BLOCK, Q4_K_GROUP_BLOCK, Q5_K_GROUP_BLOCK, Q6_K_GROUP_BLOCK,
    };
    let block = match ty {
        GgmlType::Q4_K => Q4_K_GROUP_BLOCK,
        GgmlType::Q5_K => Q5_K_GROUP_BLOCK,
        GgmlType::Q6_K => Q6_K_GROUP_BLOCK,
        GgmlType::Q2_K => Q2_K_GROUP_BLOCK,
        GgmlType::Q3_K => Q3_K_GROUP_BLOCK,
        GgmlType::IQ4_XS => IQ4_XS_GROUP_BLOCK,
        _ => panic!("no packed kernel for {ty} with Q8_K activations"),
    };
    let n_groups = check_packed(isa, block, groups, acts, out);
    #[cfg(target_arch = "x86_64")]
    each_call(isa, ty, groups, n_groups, ahead, |n, w, col, ahead| match (isa, ty, n) {
        (Isa::Avx512Vnni, GgmlType::Q4_K, 4) => {
            packed_zmm!(gemm_q4_k_x32, QUAD_ROWS, [1, 2, 3, 4, 5, 6], w, acts, out, col, ahead)
        }
        (Isa::Avx512Vnni, GgmlType::Q4_K, 2) => {
            packed_zmm!(gemm_q4_k_x16, PAIR_ROWS, [1, 2, 3, 4, 5, 6, 7, 8], w, acts, out, col, ahead)
        }
        (Isa::Avx512Vnni, GgmlType::Q5_K, 2) => {
            packed_zmm!(gemm_q5_k_x16, PAIR_ROWS, [1, 2, 3, 4, 5, 6, 7, 8], w, acts, out, col, ahead)
        }
        (Isa::Avx512Vnni, GgmlType::Q6_K, 2) => {
            packed_zmm!(gemm_q6_k_x16, Q6_K_PAIR_ROWS, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], w, acts, out, col, ahead)
        }
        (_, GgmlType::Q4_K, 1) => {
            packed_x8!(isa, gemm_q4_k_x8, Q4_K_X8_ROWS, [1, 2, 3, 4, 5, 6], w, acts, out, col, ahead)
        }
        (_, GgmlType::Q5_K, 1) => packed_x8!(isa, gemm_q5_k_x8, w, acts, out, col, ahead),
        (_, GgmlType::Q6_K, 1) => {
            packed_x8!(
                isa,
                gemm_q6_k_x8,
                Q6_K_X8_ROWS,
                [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
                w,
                acts,
                out,
                col,
                ahead
            )
        }
        (_, GgmlType::Q2_K, 1) => packed_x8!(isa, gemm_q2_k_x8, w, acts, out, col, ahead),
        (_, GgmlType::Q3_K, 1) => packed_x8!(isa, gemm_q3_k_x8, w, acts, out, col, ahead),
        (_, GgmlType::IQ4_XS, 1) => packed_x8!(isa, gemm_iq4_xs_x8, w, acts, out, col, ahead),
        _ => unreachable!("next_call_groups offers only these"),
    });
}

/// `gemm_packed` on one group of wide Q4_K (`repack::Packed::widen`), whose 256-bit kernel
/// takes `Q4_K_X8_ROWS` rows a call on every x86 SIMD path; the same results as `gemm_packed`
/// on the group's Q4_K layout.
pub fn gemm_packed_wide(isa: Isa, group: &[u8], acts: &[&[BlockQ8K]], out: &mut [[f32; CALL_COLS]], ahead: &[u8]) {
    use super::repack::Q4_K_WIDE_GROUP_BLOCK;
    let n_groups = check_packed(isa, Q4_K_WIDE_GROUP_BLOCK, group, acts, out);
    assert_eq!(n_groups, 1, "wide Q4_K kernels take one group a call");
    #[cfg(target_arch = "x86_64")]
    packed_x8!(isa, gemm_q4_k_wide_x8, Q4_K_X8_ROWS, [1, 2, 3, 4, 5, 6], group, acts, out, 0, ahead);
}

/// `gemm_packed` for the layouts that take Q8_0 activations (`layout`: Q8_0, Q4_0 or Q5_0);
/// the scalar reference is `dot_rows_q8_0` on the unpacked rows.
pub fn gemm_packed_q8_0(
    isa: Isa,
    layout: GgmlType,
    groups: &[u8],
    acts: &[&[BlockQ8_0]],
    out: &mut [[f32; CALL_COLS]],
    ahead: &[u8],
) {
    use super::repack::{Q4_0_GROUP_BLOCK, Q5_0_GROUP_BLOCK, Q8_0_GROUP_BLOCK};
    let block = match layout {
        GgmlType::Q8_0 => Q8_0_GROUP_BLOCK,
        GgmlType::Q4_0 => Q4_0_GROUP_BLOCK,
        GgmlType::Q5_0 => Q5_0_GROUP_BLOCK,
        _ => panic!("no packed kernel for {layout} with Q8_0 activations"),
    };
    let n_groups = check_packed(isa, block, groups, acts, out);
    #[cfg(target_arch = "x86_64")]
    each_call(isa, layout, groups, n_groups, ahead, |n, w, col, ahead| match (isa, layout, n) {
        (Isa::Avx512Vnni, GgmlType::Q8_0, 2) => {
            packed_zmm!(gemm_q8_0_x16, PAIR_ROWS, [1, 2, 3, 4, 5, 6, 7, 8], w, acts, out, col, ahead)
        }
        (_, GgmlType::Q8_0, 1) => packed_x8!(isa, gemm_q8_0_x8, w, acts, out, col, ahead),
        (_, GgmlType::Q4_0, 1) => packed_x8!(isa, gemm_q4_0_x8, w, acts, out, col, ahead),
        (_, GgmlType::Q5_0, 1) => packed_x8!(isa, gemm_q5_0_x8, w, acts, out, col, ahead),
        _ => unreachable!("next_call_groups offers only these"),
    });
}

/// Cuts the `n_groups` groups in `groups` into kernel calls, widest first, and runs
/// `call(groups in the call, their bytes, their first column, bytes to prefetch)` on each (the
/// first call prefetches all of `ahead`).
fn each_call(
    isa: Isa,
    ty: GgmlType,
    groups: &[u8],
    n_groups: usize,
    ahead: &[u8],
    mut call: impl FnMut(usize, &[u8], usize, &[u8]),
) {
    let group_bytes = groups.len() / n_groups;
    let mut first = 0;
    while first < n_groups {
        let n = next_call_groups(isa, ty, n_groups - first);
        call(
            n,
            &groups[first * group_bytes..(first + n) * group_bytes],
            first * COLS,
            if first == 0 { ahead } else { &[] },
        );
        first += n;
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

#[cfg(test)]
mod tests {
    use super::ahead_share;

    #[test]
    fn ahead_shares_cover_the_bytes_once_in_order() {
        let bytes: Vec<u8> = (0..=255).collect();
        for len in [0, 1, 5, 64, 256] {
            for n in 1..=9 {
                let joined: Vec<u8> = (0..n).flat_map(|i| ahead_share(&bytes[..len], i, n).to_vec()).collect();
                assert_eq!(joined, &bytes[..len], "{len} bytes in {n} shares");
            }
        }
    }
}
