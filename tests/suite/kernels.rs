//! Every SIMD path this machine can run against the scalar reference, on random weights and
//! activations, for ragged shapes: row counts that are not a multiple of the row group, and
//! widths of the real models (LLaDA 4096 / 12288, Dream 3584 / 18944).

use dllm::cpu::kernels::repack::{has_layout, pack};
use dllm::cpu::kernels::{
    CALL_COLS, Isa, MAX_CALL_GROUPS, PACKED_ROW_GROUP, QUERY_TILE, ROW_GROUP, Rows, dot_f32, dot_rows_f32,
    dot_rows_q8_0, dot_rows_q8k, dot_rows_tile_f32, gemm_packed, gemm_packed_q8_0, max_f32, softmax_scaled,
    sum_exp_f32, swiglu_f32, weighted_rows_f32, weighted_rows_tile_f32,
};
use dllm::cpu::ops::matmul::{MatmulScratch, Matrix, matmul, matmul_experts_on, matmul_on, matmul_same_input};
use dllm::quant::blocks::{q2_k, q3_k, q4_1, q4_k, q5_1, q5_k, q6_k, q8_0};
use dllm::quant::q8::{BlockQ8_0, BlockQ8K, quantize_q8_0, quantize_q8_k};
use dllm::quant::{Activations, GgmlType, dequantize};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Random weight bytes, with the f16 scale fields set to sane values (random bytes there
/// could be NaN or 65504, which no real file holds).
fn random_weights(rng: &mut ChaCha8Rng, ty: GgmlType, n_in: usize, n_out: usize) -> Vec<u8> {
    let scales: &[usize] = match ty {
        GgmlType::Q4_K => &[q4_k::D, q4_k::DMIN],
        GgmlType::Q5_K => &[q5_k::D, q5_k::DMIN],
        GgmlType::Q6_K => &[q6_k::D],
        GgmlType::Q2_K => &[q2_k::D, q2_k::DMIN],
        GgmlType::Q3_K => &[q3_k::D],
        GgmlType::Q4_1 => &[q4_1::D, q4_1::M],
        GgmlType::Q5_1 => &[q5_1::D, q5_1::M],
        // Q8_0, Q4_0, Q5_0 and the i-quants but IQ1_M (not tested here) keep d first.
        _ => &[q8_0::D],
    };
    let n_blocks = n_in / ty.block_size() * n_out;
    let mut w: Vec<u8> = (0..n_blocks * ty.type_size()).map(|_| rng.random()).collect();
    for block in w.chunks_exact_mut(ty.type_size()) {
        for &off in scales {
            let v = half::f16::from_f32(rng.random_range(1e-4..0.05));
            block[off..off + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    w
}

fn random_activations(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-3.0f32..3.0) * if rng.random_bool(0.01) { 20.0 } else { 1.0 }).collect()
}

/// sum |w_i x_i| of a weight row and an activation row: the scale of the rounding error.
fn abs_dot(ty: GgmlType, w_row: &[u8], x: &[f32]) -> f32 {
    let mut wf = vec![0f32; x.len()];
    dequantize(ty, w_row, &mut wf).unwrap();
    wf.iter().zip(x).map(|(a, b)| (a * b).abs()).sum()
}

/// The paths sum in different orders (lanes, blocks): f32 rounding of ~6e-8 per operation
/// accumulates to far less than 1e-5 of sum |terms|, while any wrong scale, nibble or bit is
/// off by whole terms.
fn assert_close(got: f32, want: f32, scale: f32, what: &str) {
    assert!((got - want).abs() <= 1e-5 * scale, "{what}: {got} vs scalar {want} (scale {scale})");
}

/// Row counts for a packed call: one to twelve (every kernel's own counts and past them),
/// calls that end in a partial kernel call (23, 37), and the most a call takes.
fn packed_row_counts() -> impl Iterator<Item = usize> {
    (1..=12).chain([23, 37, PACKED_ROW_GROUP])
}

#[test]
fn row_group_kernels_match_scalar() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let paths: Vec<Isa> = Isa::available().into_iter().filter(|&i| i != Isa::Scalar).collect();
    eprintln!("paths under test: {paths:?}");
    for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        for n_in in [256, 512, 3584, 4096] {
            let w = random_weights(&mut rng, ty, n_in, 1);
            let x = random_activations(&mut rng, ROW_GROUP * n_in);
            for rows in 1..=ROW_GROUP {
                let mut want = vec![0f32; rows];
                let mut got = vec![0f32; rows];
                if ty == GgmlType::Q8_0 {
                    let mut a = vec![BlockQ8_0::default(); ROW_GROUP * n_in / 32];
                    quantize_q8_0(&x, &mut a);
                    let acts: Vec<&[BlockQ8_0]> = a.chunks(n_in / 32).take(rows).collect();
                    dot_rows_q8_0(Isa::Scalar, GgmlType::Q8_0, &w, &acts, &mut want);
                    for &isa in &paths {
                        dot_rows_q8_0(isa, GgmlType::Q8_0, &w, &acts, &mut got);
                        for r in 0..rows {
                            let scale = abs_dot(ty, &w, &x[r * n_in..(r + 1) * n_in]);
                            assert_close(got[r], want[r], scale, &format!("{isa:?} {ty} n_in {n_in} row {r}"));
                        }
                    }
                } else {
                    let mut a = vec![BlockQ8K::default(); ROW_GROUP * n_in / 256];
                    quantize_q8_k(&x, &mut a);
                    let acts: Vec<&[BlockQ8K]> = a.chunks(n_in / 256).take(rows).collect();
                    dot_rows_q8k(Isa::Scalar, ty, &w, &acts, &mut want);
                    for &isa in &paths {
                        dot_rows_q8k(isa, ty, &w, &acts, &mut got);
                        for r in 0..rows {
                            let scale = abs_dot(ty, &w, &x[r * n_in..(r + 1) * n_in]);
                            assert_close(got[r], want[r], scale, &format!("{isa:?} {ty} n_in {n_in} row {r}"));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn whole_products_match_scalar_on_ragged_shapes() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    // (n_in, n_out, rows): Dream's FFN width 18944 = 74 blocks, odd output counts, and row
    // counts around the row group and the tile.
    let shapes = [(3584, 9, 7), (18944, 3, 5), (512, 37, 13), (256, 1, 1), (4096, 16, 148)];
    let unpacked = [
        GgmlType::Q4_1,
        GgmlType::Q5_1,
        GgmlType::IQ2_XXS,
        GgmlType::IQ2_XS,
        GgmlType::IQ2_S,
        GgmlType::IQ3_XXS,
        GgmlType::IQ3_S,
        GgmlType::IQ1_S,
    ];
    for ty in PACKED_TYPES.into_iter().chain(unpacked) {
        for (n_in, n_out, rows) in shapes {
            let data = random_weights(&mut rng, ty, n_in, n_out);
            let w = Matrix { ty, n_in, n_out, data: &data, packed: None };
            let packed = has_layout(ty).then(|| pack(ty, &data, n_in, n_out, |_| {}));
            let x = random_activations(&mut rng, rows * n_in);
            let mut want = vec![0f32; rows * n_out];
            matmul_on(Isa::Scalar, &x, rows, &w, &mut want, &mut MatmulScratch::default());
            // Every path, and the x86 SIMD paths also with the interleaved weights (for n_out
            // not a multiple of 8, the last rows take the unpacked kernel).
            let simd = || Isa::available().into_iter().filter(|isa| isa.is_x86_simd());
            let runs = Isa::available()
                .into_iter()
                .map(|isa| (isa, w))
                .chain(packed.iter().flat_map(|p| simd().map(move |isa| (isa, Matrix { packed: Some(p), ..w }))));
            for (isa, w) in runs {
                let mut got = vec![0f32; rows * n_out];
                matmul_on(isa, &x, rows, &w, &mut got, &mut MatmulScratch::default());
                let rb = data.len() / n_out;
                for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                    let (r, o) = (i / n_out, i % n_out);
                    let scale = abs_dot(ty, &data[o * rb..(o + 1) * rb], &x[r * n_in..(r + 1) * n_in]);
                    assert_close(*g, *e, scale, &format!("{isa:?} {ty} {n_in}x{n_out} rows {rows} #{i}"));
                }
            }
        }
    }
}

/// A mixture-of-experts product (every expert's column blocks in one parallel loop, the rows
/// quantized once) gives each expert's rows exactly what that expert's own product gives them,
/// on every path, packed and unpacked: the same integer dots, only scheduled differently. The
/// up product reusing the gate's quantized rows (`same_input`) is checked the same way.
#[test]
fn expert_products_equal_each_experts_own_product() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    // Ragged groups: empty experts, one row, more than a row group.
    let groups = [0..0, 0..1, 1..1, 1..8, 8..9, 9..26, 26..26, 26..29];
    let rows = groups.last().unwrap().end;
    let (n_in, n_out) = (512, 64);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::F16] {
        let data: Vec<Vec<u8>> = groups.iter().map(|_| random_weights(&mut rng, ty, n_in, n_out)).collect();
        let packed: Vec<_> = data.iter().map(|d| has_layout(ty).then(|| pack(ty, d, n_in, n_out, |_| {}))).collect();
        let x = random_activations(&mut rng, rows * n_in);
        for isa in Isa::available() {
            let matrix = |e: usize| Matrix { ty, n_in, n_out, data: &data[e], packed: packed[e].as_ref() };
            let mut want = vec![0f32; rows * n_out];
            for (e, g) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
                let (x, out) = (&x[g.start * n_in..g.end * n_in], &mut want[g.start * n_out..g.end * n_out]);
                matmul_on(isa, x, g.len(), &matrix(e), out, &mut MatmulScratch::default());
            }
            let mut scratch = MatmulScratch::default();
            for same_input in [false, true] {
                let mut got = vec![f32::NAN; rows * n_out];
                matmul_experts_on(isa, &x, &groups, matrix, &mut got, &mut scratch, same_input);
                assert!(got == want, "{isa:?} {ty}, same input {same_input}: not each expert's own product");
            }
        }
    }
}

/// Wide Q4_K (a byte per weight, `Packed::widen`) gives the packed Q4_K kernels' results bit for
/// bit on every x86 SIMD path, for every row count of a packed call and a ragged column count
/// (the columns past the last group take the row kernels either way).
#[test]
fn wide_q4_k_products_equal_the_packed_ones() {
    let mut rng = ChaCha8Rng::seed_from_u64(24);
    let ty = GgmlType::Q4_K;
    for (n_in, n_out) in [(512, 64), (768, 37)] {
        let data = random_weights(&mut rng, ty, n_in, n_out);
        let packed = pack(ty, &data, n_in, n_out, |_| {});
        let wide = packed.widen().expect("Q4_K widens");
        assert!(wide.wide && wide.bytes().len() > packed.bytes().len());
        for rows in packed_row_counts() {
            let x = random_activations(&mut rng, rows * n_in);
            for isa in Isa::available().into_iter().filter(|i| i.is_x86_simd()) {
                let product = |p| {
                    let mut out = vec![f32::NAN; rows * n_out];
                    let w = Matrix { ty, n_in, n_out, data: &data, packed: Some(p) };
                    matmul_on(isa, &x, rows, &w, &mut out, &mut MatmulScratch::default());
                    out
                };
                assert!(product(&wide) == product(&packed), "{isa:?} {n_in}x{n_out}, {rows} rows");
            }
        }
    }
}

/// The packed kernels of every x86 SIMD path (AVX2, AVX-VNNI, AVX-512 VNNI: one kernel source
/// compiled per path) against the scalar reference; a path this CPU lacks reports itself skipped.
#[test]
fn packed_kernels_match_scalar() {
    for isa in [Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni] {
        if isa.is_available() {
            packed_kernels_match_scalar_on(isa);
        } else {
            eprintln!("skipped: {} packed kernels (this CPU lacks {})", isa.name(), isa.name());
        }
    }
}

/// Every type with a packed layout: its own (Q2_K, Q4_K, Q5_K, Q6_K, Q8_0, IQ4_XS, Q4_0, Q5_0)
/// or, re-encoded at packing, Q8_0's (IQ4_NL) and Q6_K's (Q3_K).
const PACKED_TYPES: [GgmlType; 10] = [
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::IQ4_XS,
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::IQ4_NL,
    GgmlType::Q3_K,
];

fn packed_kernels_match_scalar_on(isa: Isa) {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for ty in PACKED_TYPES {
        let q8_0_form = ty.activations() == Some(Activations::Q8_0);
        for (n_in, n_out) in [(256, 8), (3584, 16), (4096, 40)] {
            let data = random_weights(&mut rng, ty, n_in, n_out);
            let packed = pack(ty, &data, n_in, n_out, |_| {});
            let x = random_activations(&mut rng, PACKED_ROW_GROUP * n_in);
            let (mut a8k, mut a8_0) = (
                vec![BlockQ8K::default(); PACKED_ROW_GROUP * n_in / 256],
                vec![BlockQ8_0::default(); PACKED_ROW_GROUP * n_in / 32],
            );
            quantize_q8_k(&x, &mut a8k);
            quantize_q8_0(&x, &mut a8_0);
            let rb = data.len() / n_out;
            for rows in packed_row_counts() {
                let acts8k: Vec<&[BlockQ8K]> = a8k.chunks(n_in / 256).take(rows).collect();
                let acts8_0: Vec<&[BlockQ8_0]> = a8_0.chunks(n_in / 32).take(rows).collect();
                // Every group alone, and runs of two, three and four adjacent groups (shorter
                // at the end), as the kernels take them.
                for (first, n) in (1..=MAX_CALL_GROUPS).flat_map(|per_call| {
                    (0..n_out / 8).step_by(per_call).map(move |g| (g, per_call.min(n_out / 8 - g)))
                }) {
                    let mut got = vec![[0f32; CALL_COLS]; rows];
                    let groups = packed.groups(first..first + n);
                    match q8_0_form {
                        true => gemm_packed_q8_0(isa, packed.ty, groups, &acts8_0, &mut got, &[]),
                        false => gemm_packed(isa, packed.ty, groups, &acts8k, &mut got, &[]),
                    }
                    let g = format!("groups {first}..{}", first + n);
                    for c in 0..8 * n {
                        let col = &data[(8 * first + c) * rb..(8 * first + c + 1) * rb];
                        // The reference one row at a time (the row kernels take `ROW_GROUP`).
                        let want: Vec<f32> = (0..rows)
                            .map(|r| {
                                let mut want = [0f32];
                                match q8_0_form {
                                    true => dot_rows_q8_0(Isa::Scalar, ty, col, &acts8_0[r..=r], &mut want),
                                    false => dot_rows_q8k(Isa::Scalar, ty, col, &acts8k[r..=r], &mut want),
                                }
                                want[0]
                            })
                            .collect();
                        for r in 0..rows {
                            let scale = abs_dot(ty, col, &x[r * n_in..(r + 1) * n_in]);
                            assert_close(
                                got[r][c],
                                want[r],
                                scale,
                                &format!("{isa:?} packed {ty} {n_in} {g} col {c} row {r}"),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The f32 kernels of attention on every path against the scalar forms: dot products, and
/// the scores against strided rows and the weighted sum of rows, for widths around the vector
/// width (1..33), head sizes (64, 128) and odd long rows.
#[test]
fn f32_vector_kernels_match_scalar() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let widths: Vec<usize> = (1..=33).chain([64, 100, 128, 4099]).collect();
    let mut random = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect() };
    for isa in Isa::available() {
        for &n in &widths {
            let (a, b) = (random(n), random(n));
            let scale: f32 = a.iter().zip(&b).map(|(x, y)| (x * y).abs()).sum();
            assert_close(dot_f32(isa, &a, &b), dot_f32(Isa::Scalar, &a, &b), scale, &format!("{isa:?} dot n {n}"));

            // 7 rows of width n inside a wider matrix (stride 2n + 3, starting at column n).
            let (count, stride) = (7, 2 * n + 3);
            let matrix = random((count - 1) * stride + 2 * n);
            let rows = Rows { data: &matrix, stride, offset: n, width: n, count };
            let (mut want, mut got) = (vec![0f32; count], vec![0f32; count]);
            dot_rows_f32(Isa::Scalar, &a, rows, &mut want);
            dot_rows_f32(isa, &a, rows, &mut got);
            for j in 0..count {
                let row = &matrix[j * stride + n..][..n];
                let scale: f32 = a.iter().zip(row).map(|(x, y)| (x * y).abs()).sum();
                assert_close(got[j], want[j], scale, &format!("{isa:?} dot_rows n {n} row {j}"));
            }
            let weights = random(count);
            let (mut want, mut got) = (b.clone(), b.clone());
            weighted_rows_f32(Isa::Scalar, &weights, rows, &mut want);
            weighted_rows_f32(isa, &weights, rows, &mut got);
            for c in 0..n {
                let scale: f32 =
                    b[c].abs() + (0..count).map(|j| (weights[j] * matrix[j * stride + n + c]).abs()).sum::<f32>();
                assert_close(got[c], want[c], scale, &format!("{isa:?} weighted_rows n {n} column {c}"));
            }
        }
    }
}

/// SwiGLU's vector form against libm's expf on every path: within 5e-7 relative (the vector
/// exp's 2e-7 through `x / (1 + e)`, the division's and the product's roundings, and libm's own
/// half ulp), plus 1e-30 absolute where the exp is clamped (silu(x) for x < -88.3 is 0 to
/// within 1e-36 either way). Ragged lengths take the scalar tail.
#[test]
fn swiglu_matches_scalar() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for isa in Isa::available() {
        for n in (1..=17).chain([1000, 16 * 1024 + 3]) {
            let mut gate: Vec<f32> = (0..n).map(|_| rng.random_range(-20.0f32..20.0)).collect();
            for (g, extreme) in gate.iter_mut().zip([-100.0, -88.5, 88.5, 100.0, 0.0, -0.0, -87.0, 87.0]) {
                *g = extreme;
            }
            let up: Vec<f32> = (0..n).map(|_| rng.random_range(-3.0f32..3.0)).collect();
            let (mut want, mut got) = (gate.clone(), gate.clone());
            swiglu_f32(Isa::Scalar, &mut want, &up);
            swiglu_f32(isa, &mut got, &up);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 5e-7 * w.abs() + 1e-30,
                    "{isa:?} n {n} #{i} (gate {}, up {}): {g} vs {w}",
                    gate[i],
                    up[i]
                );
            }
        }
    }
}

/// The attention-kernel tests' operands: `count` key rows of width `n` inside a wider matrix
/// (stride 2n + 3, starting at column n), and up to `QUERY_TILE` query rows (stride n + 5,
/// starting at column 2), so that no kernel can assume contiguous or aligned rows.
fn key_matrix_len(n: usize, count: usize) -> usize {
    (count - 1) * (2 * n + 3) + 2 * n
}

fn key_rows(data: &[f32], n: usize, count: usize) -> Rows<'_> {
    Rows { data, stride: 2 * n + 3, offset: n, width: n, count }
}

fn query_matrix_len(n: usize) -> usize {
    QUERY_TILE * (n + 5)
}

fn query_rows(data: &[f32], n: usize, tile: usize) -> Rows<'_> {
    Rows { data, stride: n + 5, offset: 2, width: n, count: tile }
}

/// Whether this CPU runs the AVX-512 VNNI path; says the test is skipped when it does not.
fn avx512_vnni_or_skip() -> bool {
    let present = Isa::Avx512Vnni.is_available();
    if !present {
        eprintln!("skipped: avx512vnni (this CPU lacks it)");
    }
    present
}

/// The AVX-512 forms of attention's f32 kernels do the AVX2 forms' operations lane for lane, so
/// their scores and weighted sums are bit-identical (forcing AVX2 changes no token): the tile
/// kernels on tiles of 1 to 4 queries, widths around the vector widths, odd key counts.
#[test]
fn wide_attention_kernels_equal_the_avx2_ones() {
    if !avx512_vnni_or_skip() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let mut random = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect() };
    for n in (1..=33).chain([64, 100, 127, 128, 129, 4099]) {
        for count in [1, 3, 4, 7, 148] {
            let (keys, q_matrix) = (random(key_matrix_len(n, count)), random(query_matrix_len(n)));
            let rows = key_rows(&keys, n, count);
            for tile in 1..=QUERY_TILE {
                let queries = query_rows(&q_matrix, n, tile);
                let (mut wide, mut narrow) = (vec![0f32; tile * count], vec![0f32; tile * count]);
                dot_rows_tile_f32(Isa::Avx512Vnni, queries, rows, &mut wide);
                dot_rows_tile_f32(Isa::Avx2, queries, rows, &mut narrow);
                assert_eq!(wide, narrow, "dot_rows_tile n {n} count {count} tile {tile}");
                let weights = random(tile * count);
                let start = random(tile * n);
                let (mut wide, mut narrow) = (start.clone(), start);
                weighted_rows_tile_f32(Isa::Avx512Vnni, &weights, rows, &mut wide);
                weighted_rows_tile_f32(Isa::Avx2, &weights, rows, &mut narrow);
                assert_eq!(wide, narrow, "weighted_rows_tile n {n} count {count} tile {tile}");
            }
        }
    }
}

/// The query-tile kernels give each query exactly what the one-query kernels give it, on every
/// path: tiles of 1 to 4 queries, widths around the vector width, odd key counts.
#[test]
fn query_tile_kernels_equal_the_one_query_ones() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut random = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect() };
    for isa in Isa::available() {
        for n in [1, 15, 16, 17, 64, 100, 128, 200] {
            for count in [1, 3, 4, 5, 148] {
                let (keys, q_matrix) = (random(key_matrix_len(n, count)), random(query_matrix_len(n)));
                let rows = key_rows(&keys, n, count);
                for tile in 1..=QUERY_TILE {
                    let queries = query_rows(&q_matrix, n, tile);
                    let mut got = vec![0f32; tile * count];
                    dot_rows_tile_f32(isa, queries, rows, &mut got);
                    let mut want = vec![0f32; tile * count];
                    for t in 0..tile {
                        let q = &q_matrix[t * (n + 5) + 2..][..n]; // query row t (`query_rows`)
                        dot_rows_f32(isa, q, rows, &mut want[t * count..(t + 1) * count]);
                    }
                    assert_eq!(got, want, "{isa:?} dot_rows_tile n {n} count {count} tile {tile}");
                    let weights = random(tile * count);
                    let start = random(tile * n);
                    let (mut got, mut want) = (start.clone(), start);
                    weighted_rows_tile_f32(isa, &weights, rows, &mut got);
                    for t in 0..tile {
                        weighted_rows_f32(
                            isa,
                            &weights[t * count..(t + 1) * count],
                            rows,
                            &mut want[t * n..(t + 1) * n],
                        );
                    }
                    assert_eq!(got, want, "{isa:?} weighted_rows_tile n {n} count {count} tile {tile}");
                }
            }
        }
    }
}

/// The sampler's row reductions on every path: the maximum exactly as the scalar form (ties and
/// -inf included); the softmax denominator against an f64 sum of f64 exps. Tolerance: 2e-7 for
/// the vector exp (about 2 ulp) plus the classic bound for an f32 sum of n positive terms in
/// any order, (n - 1) x 2^-24 of the sum (the scalar form's sequential sum of 126k terms is
/// 1e-4 off, well inside it). On the short rows that bound is tight enough that a term
/// missing from a lane or the tail fails: each term is at least e^-2 / n of the sum at
/// spread 1.
#[test]
fn row_reductions_match_scalar() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for isa in Isa::available() {
        for n in [1, 7, 8, 9, 31, 1000, 126_464, 152_064] {
            for spread in [1.0f32, 10.0, 60.0] {
                let mut x: Vec<f32> = (0..n).map(|_| rng.random_range(-spread..spread)).collect();
                if n > 8 {
                    x[n / 2] = f32::NEG_INFINITY; // a masked logit
                    x[n - 1] = x[n / 3]; // a tie
                }
                let max = max_f32(Isa::Scalar, &x);
                assert_eq!(max_f32(isa, &x), max, "{isa:?} max n {n}");
                let want: f64 = x.iter().map(|&v| ((v - max) as f64).exp()).sum();
                let got = sum_exp_f32(isa, &x, max) as f64;
                let tolerance = (2e-7 + (n - 1) as f64 * 2f64.powi(-24)) * want;
                assert!((got - want).abs() <= tolerance, "{isa:?} sum_exp n {n} spread {spread}: {got} vs {want}");
            }
        }
    }
}

/// Attention's softmax on every path against the scalar form (libm's expf, sequential sums):
/// each weight within 1e-6 relative plus 1e-9 absolute. The vector exp is within about 2 ulp
/// (2.4e-7) and the sum is added in another order (n x 6e-8 at worst, n <= 600 here), so a
/// correct kernel stays well inside; a wrong lane, tail or scale is off by far more.
#[test]
fn softmax_matches_scalar() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for isa in Isa::available() {
        for n in (1..=40).chain([148, 513, 600]) {
            for spread in [0.5f32, 8.0, 200.0, 2000.0] {
                let x: Vec<f32> = (0..n).map(|_| rng.random_range(-spread..spread)).collect();
                let (mut want, mut got) = (x.clone(), x.clone());
                softmax_scaled(Isa::Scalar, &mut want, 0.088);
                softmax_scaled(isa, &mut got, 0.088);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!((g - w).abs() <= 1e-6 * w + 1e-9, "{isa:?} n {n} spread {spread} #{i}: {g} vs {w}");
                }
                let total: f32 = got.iter().sum();
                assert!((total - 1.0).abs() < 1e-5, "{isa:?} n {n}: weights sum to {total}");
            }
        }
    }
}

/// The 512-bit Q4_K, Q5_K, Q6_K and Q8_0 kernels of the AVX-512 VNNI path (`cpu::kernels::avx512`)
/// compute the same integers and then the same float operations as the 256-bit ones, so their
/// results are bit-identical: the paths can be swapped without changing a generated token.
#[test]
fn wide_packed_kernels_equal_the_256_bit_ones() {
    if !avx512_vnni_or_skip() {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0] {
        let (n_in, n_out) = (4096, 48);
        let data = random_weights(&mut rng, ty, n_in, n_out);
        let packed = pack(ty, &data, n_in, n_out, |_| {});
        let x = random_activations(&mut rng, PACKED_ROW_GROUP * n_in);
        let mut a8k = vec![BlockQ8K::default(); PACKED_ROW_GROUP * n_in / 256];
        let mut a8_0 = vec![BlockQ8_0::default(); PACKED_ROW_GROUP * n_in / 32];
        quantize_q8_k(&x, &mut a8k);
        quantize_q8_0(&x, &mut a8_0);
        let acts: Vec<&[BlockQ8K]> = a8k.chunks(n_in / 256).collect();
        let acts8_0: Vec<&[BlockQ8_0]> = a8_0.chunks(n_in / 32).collect();
        for rows in packed_row_counts() {
            // The 32-column kernels on four groups, the sixteen-column ones on pairs, a lone
            // group (the 256-bit VNNI kernels), and three groups (a pair, then a lone one).
            for groups in [0..4, 1..5, 2..6, 0..2, 1..3, 2..3, 0..3, 3..6] {
                let (mut wide, mut narrow) = (vec![[0f32; CALL_COLS]; rows], vec![[0f32; CALL_COLS]; rows]);
                let g = packed.groups(groups.clone());
                // The wide calls also prefetch (the next groups' bytes), which must change nothing.
                let ahead = packed.groups(groups.end..6.min(groups.end + 2));
                if ty == GgmlType::Q8_0 {
                    gemm_packed_q8_0(Isa::Avx512Vnni, GgmlType::Q8_0, g, &acts8_0[..rows], &mut wide, ahead);
                    gemm_packed_q8_0(Isa::Avx2, GgmlType::Q8_0, g, &acts8_0[..rows], &mut narrow, &[]);
                } else {
                    gemm_packed(Isa::Avx512Vnni, ty, g, &acts[..rows], &mut wide, ahead);
                    gemm_packed(Isa::Avx2, ty, g, &acts[..rows], &mut narrow, &[]);
                }
                assert_eq!(wide, narrow, "{ty} rows {rows} groups {groups:?}");
            }
        }
    }
}

/// A product told its input is the previous product's reuses that product's quantized
/// activations only when they are in its own format and shape, and its result is exactly a
/// fresh product's: K-quant after K-quant (Q8_K both), Q8_0 after a K-quant (requantized),
/// and a K-quant after one on fewer rows (requantized).
#[test]
fn products_on_the_same_input_equal_fresh_ones() {
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let (n_rows, n_in) = (37, 512);
    let x = random_activations(&mut rng, n_rows * n_in);
    let weights: Vec<(GgmlType, usize, Vec<u8>)> = [(GgmlType::Q4_K, 64), (GgmlType::Q6_K, 72), (GgmlType::Q8_0, 40)]
        .into_iter()
        .map(|(ty, n_out)| (ty, n_out, random_weights(&mut rng, ty, n_in, n_out)))
        .collect();
    let matrix = |i: usize| Matrix { ty: weights[i].0, n_in, n_out: weights[i].1, data: &weights[i].2, packed: None };
    let fresh = |i: usize, rows: usize| {
        let mut out = vec![0f32; rows * weights[i].1];
        matmul(&x[..rows * n_in], rows, &matrix(i), &mut out, &mut MatmulScratch::default());
        out
    };
    for (first, first_rows, second) in [(0, n_rows, 1), (0, n_rows, 2), (1, 20, 0)] {
        let mut scratch = MatmulScratch::default();
        let mut out = vec![0f32; first_rows * weights[first].1];
        matmul(&x[..first_rows * n_in], first_rows, &matrix(first), &mut out, &mut scratch);
        let mut got = vec![0f32; n_rows * weights[second].1];
        matmul_same_input(&x, n_rows, &matrix(second), &mut got, &mut scratch);
        assert!(
            got == fresh(second, n_rows),
            "{:?} after {:?} on {first_rows} rows",
            weights[second].0,
            weights[first].0
        );
    }
}
