//! Matrix multiplication against quantized weights, computed the way ggml does so that
//! quantized models agree with llama.cpp: the activations are first put in the form ggml's
//! `vec_dot_type` for the weight type says (`GgmlType::activations`): quantized to 8 bits once
//! per product for the quantized types, each output then an integer block dot product
//! (`quant::vec_dot`), or rounded to f16 / bf16 for F16 / BF16 weights, whose products (like
//! F32's) run in f32 over weights dequantized a tile of rows at a time.
//! This is the oracle that the int8 SIMD kernels are tested against; on the x86 SIMD paths the
//! matrices with an interleaved copy (`cpu::kernels::repack`) run through the packed kernels.

use std::ops::Range;
use std::sync::Mutex;

use rayon::prelude::*;

use super::column_blocks::{ColumnBlock, par_column_blocks};
use crate::cpu::kernels::repack::{COLS, Packed};
use crate::cpu::kernels::{
    CALL_COLS, Isa, PACKED_ROW_GROUP, ROW_GROUP, active_isa, ahead_share, dot_f32, dot_rows_q8_0, dot_rows_q8_1,
    dot_rows_q8k, gemm_packed, gemm_packed_q8_0, gemm_packed_wide, packed_call_groups,
};
use crate::cpu::kernels::{quantize_q8_0, quantize_q8_k};
use crate::quant::q8::{BlockQ8_0, BlockQ8_1, BlockQ8K, quantize_q8_1};
use crate::quant::{Activations as Form, DequantError, GgmlType, dequantize};

/// Weight rows dequantized together; a tile is reused against every activation row.
const TILE: usize = 8;

/// A weight matrix as stored in GGUF: `n_out` rows of `n_in` values of type `ty`, and its
/// interleaved copy (`cpu::kernels::repack`) when the kernels use one.
#[derive(Clone, Copy)]
pub struct Matrix<'a> {
    pub ty: GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    pub data: &'a [u8],
    pub packed: Option<&'a Packed>,
}

impl Matrix<'_> {
    pub fn row_bytes(&self) -> usize {
        self.n_in / self.ty.block_size() * self.ty.type_size()
    }

    /// Dequantizes weight row `r` into `out` (length `n_in`).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) -> Result<(), DequantError> {
        let rb = self.row_bytes();
        dequantize(self.ty, &self.data[r * rb..(r + 1) * rb], out)
    }
}

/// Buffers reused across calls so that a forward pass allocates nothing.
#[derive(Default)]
pub struct MatmulScratch {
    /// Output of the unpacked products in feature-major order, transposed into place at the end
    /// (the packed kernels write row-major directly).
    out_t: Vec<f32>,
    /// One dequantization tile per worker thread.
    tiles: Vec<Mutex<Vec<f32>>>,
    /// Activations quantized for the integer dot products.
    q8k: Vec<BlockQ8K>,
    q8_0: Vec<BlockQ8_0>,
    q8_1: Vec<BlockQ8_1>,
    /// Activations rounded to f16 or bf16 for F16 / BF16 weights.
    rounded: Vec<f32>,
    /// What the last quantization wrote: (the form, rows, values per row).
    quantized: Option<(Form, usize, usize)>,
}

impl MatmulScratch {
    /// Whether a product must quantize its input (to `form`, `n_rows` x `n_in`): not when its
    /// input is the previous product's and that one left these activations. Records that they
    /// are what the buffers hold from now on.
    fn must_quantize(&mut self, form: Form, n_rows: usize, n_in: usize, same_input: bool) -> bool {
        let held = Some((form, n_rows, n_in));
        let reuse = same_input && self.quantized == held;
        self.quantized = held;
        !reuse
    }
}

/// `out[r][o] = sum_i x[r][i] * w[o][i]` for `n_rows` rows; `x` is `[n_rows, n_in]`, `out` is
/// `[n_rows, n_out]`, both row-major. Runs on the machine's best instruction set.
pub fn matmul(x: &[f32], n_rows: usize, w: &Matrix, out: &mut [f32], scratch: &mut MatmulScratch) {
    matmul_on(active_isa(), x, n_rows, w, out, scratch);
}

/// `matmul` for a product whose input is the previous product's, unchanged since (a layer's
/// q, k and v, or its gate and up): the activations that product quantized are used again when
/// they are in this matrix's format, instead of being quantized once more.
pub fn matmul_same_input(x: &[f32], n_rows: usize, w: &Matrix, out: &mut [f32], scratch: &mut MatmulScratch) {
    product(active_isa(), x, n_rows, w, out, scratch, true);
}

/// `matmul` on a chosen instruction set (which must be available).
pub fn matmul_on(isa: Isa, x: &[f32], n_rows: usize, w: &Matrix, out: &mut [f32], scratch: &mut MatmulScratch) {
    product(isa, x, n_rows, w, out, scratch, false);
}

/// The products of a mixture-of-experts layer: rows `groups[e]` of `x` (`[rows, n_in]`, the
/// groups contiguous and in order) times expert e's matrix `w(e)`, into the same rows of `out`.
/// The activations are quantized once for all experts, and every expert's column blocks are
/// tasks of one parallel loop, so experts run side by side instead of one after another (each
/// expert has only a few rows: the tasks, not the rows, keep the threads busy). The experts'
/// matrices share a type (they are slices of one 3-D tensor). `same_input` as for
/// `matmul_same_input`.
pub fn matmul_experts<'w>(
    x: &[f32],
    groups: &[Range<usize>],
    w: impl Fn(usize) -> Matrix<'w> + Sync,
    out: &mut [f32],
    scratch: &mut MatmulScratch,
    same_input: bool,
) {
    matmul_experts_on(active_isa(), x, groups, w, out, scratch, same_input);
}

/// `matmul_experts` on a chosen instruction set (which must be available).
pub fn matmul_experts_on<'w>(
    isa: Isa,
    x: &[f32],
    groups: &[Range<usize>],
    w: impl Fn(usize) -> Matrix<'w> + Sync,
    out: &mut [f32],
    scratch: &mut MatmulScratch,
    same_input: bool,
) {
    let Some(first) = groups.iter().position(|g| !g.is_empty()) else { return };
    let n_rows = groups.last().map_or(0, |g| g.end);
    let m = w(first);
    let (n_in, n_out) = (m.n_in, m.n_out);
    let form = m.ty.activations().expect("weights validated at load");
    let packed_whole = |e: usize| w(e).packed.is_some_and(|p| p.n_groups * COLS == n_out);
    let parallel = isa.is_x86_simd()
        && matches!(form, Form::Q8K | Form::Q8_0)
        && groups.iter().enumerate().all(|(e, g)| g.is_empty() || packed_whole(e));
    if !parallel {
        // No packed kernel for these experts: one product after another, each quantizing its
        // own rows, and no quantized rows left for a following product to reuse.
        for (e, g) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            let (x, out) = (&x[g.start * n_in..g.end * n_in], &mut out[g.start * n_out..g.end * n_out]);
            product(isa, x, g.len(), &w(e), out, scratch, false);
        }
        scratch.quantized = None;
        return;
    }
    let quantize = scratch.must_quantize(form, n_rows, n_in, same_input);
    match form {
        Form::Q8K => experts_packed(isa, x, groups, &w, out, (&mut scratch.q8k, quantize)),
        _ => experts_packed(isa, x, groups, &w, out, (&mut scratch.q8_0, quantize)),
    }
}

/// `matmul_experts` through the packed kernels: the rows quantized once (unless `quantize` is
/// false), then one parallel loop over every expert's column blocks.
fn experts_packed<'w, A: Activations>(
    isa: Isa,
    x: &[f32],
    groups: &[Range<usize>],
    w: &(impl Fn(usize) -> Matrix<'w> + Sync),
    out: &mut [f32],
    (acts, quantize): (&mut Vec<A>, bool),
) {
    let n_rows = groups.last().map_or(0, |g| g.end);
    let (n_in, n_out) = (w(0).n_in, w(0).n_out);
    let nb = n_in / A::BLOCK;
    let acts = quantized_rows(x, n_rows, n_in, acts, quantize);
    // Each expert's rows of `out`, split off in order (the groups are contiguous).
    let mut rest = &mut out[..n_rows * n_out];
    let mut parts = Vec::with_capacity(groups.len());
    for (e, g) in groups.iter().enumerate() {
        let (part, tail) = std::mem::take(&mut rest).split_at_mut(g.len() * n_out);
        rest = tail;
        if !g.is_empty() {
            parts.push((e, g.start, part));
        }
    }
    let call_groups = |e: usize| {
        let packed = w(e).packed.expect("checked packed");
        packed_call_groups(isa, packed.ty, packed.wide)
    };
    parts
        .into_par_iter()
        .flat_map(|(e, start, part)| {
            let rows = part.len() / n_out;
            par_column_blocks(part, rows, n_out, n_out, call_groups(e) * COLS).map(move |block| (e, start, block))
        })
        .for_each_init(CallBuffers::new, |buffers, (e, start, block)| {
            let packed = w(e).packed.expect("checked packed");
            let kernel =
                |g: &[u8], a: &[&[A]], o: &mut [[f32; CALL_COLS]], ahead: &[u8]| A::packed(isa, packed, g, a, o, ahead);
            packed_block(packed, call_groups(e), &acts[start * nb..], nb, &kernel, block, buffers);
        });
}

fn product(
    isa: Isa,
    x: &[f32],
    n_rows: usize,
    w: &Matrix,
    out: &mut [f32],
    scratch: &mut MatmulScratch,
    same_input: bool,
) {
    let (n_in, n_out) = (w.n_in, w.n_out);
    debug_assert_eq!(x.len(), n_rows * n_in);
    debug_assert_eq!(out.len(), n_rows * n_out);
    if n_rows == 0 {
        return;
    }
    // The packed kernels write `out` directly; the other products write the columns from
    // `transposed_from` on feature-major into `out_t`.
    // The loader refused every type without a form (`GgmlType::is_supported`).
    let form = w.ty.activations().expect("weights validated at load");
    let quantize = scratch.must_quantize(form, n_rows, n_in, same_input);
    let transposed_from = match form {
        Form::Q8K => integer_matmul(isa, x, n_rows, w, out, (&mut scratch.q8k, quantize), &mut scratch.out_t),
        Form::Q8_0 => integer_matmul(isa, x, n_rows, w, out, (&mut scratch.q8_0, quantize), &mut scratch.out_t),
        Form::Q8_1 => integer_matmul(isa, x, n_rows, w, out, (&mut scratch.q8_1, quantize), &mut scratch.out_t),
        Form::F32 | Form::F16 | Form::BF16 => {
            grow(&mut scratch.out_t, n_rows * n_out);
            let x = match form {
                Form::F32 => x,
                _ => {
                    if quantize {
                        round_activations(form, x, &mut scratch.rounded);
                    }
                    &scratch.rounded[..x.len()]
                }
            };
            let threads = rayon::current_num_threads();
            if scratch.tiles.len() < threads {
                scratch.tiles.resize_with(threads, Default::default);
            }
            dequantized_products(isa, x, n_rows, w, &scratch.tiles, &mut scratch.out_t);
            0
        }
    };
    if transposed_from == n_out {
        return;
    }
    // The columns computed feature-major back to row-major, a block of rows per task: each
    // output feature's values for the block are one cache line of `out_t`, and the block's rows
    // stay in L2 while they are written.
    const BLOCK: usize = 16;
    let out_t = &scratch.out_t;
    out[..n_rows * n_out].par_chunks_mut(BLOCK * n_out).enumerate().for_each(|(b, rows)| {
        let first = b * BLOCK;
        let n = rows.len() / n_out;
        for o in transposed_from..n_out {
            for (i, v) in out_t[o * n_rows + first..][..n].iter().enumerate() {
                rows[i * n_out + o] = *v;
            }
        }
    });
}

/// ggml's F16 / BF16 `vec_dot_type`: the activations rounded to that precision (held as f32,
/// which represents them exactly), so that an f32 product over them is ggml's.
fn round_activations(form: Form, x: &[f32], out: &mut Vec<f32>) {
    grow(out, x.len());
    let round: fn(f32) -> f32 = match form {
        Form::F16 => |v| half::f16::from_f32(v).to_f32(),
        _ => |v| half::bf16::from_f32(v).to_f32(),
    };
    out[..x.len()].par_chunks_mut(4096).zip(x.par_chunks(4096)).for_each(|(o, x)| {
        for (o, &v) in o.iter_mut().zip(x) {
            *o = round(v);
        }
    });
}

/// An 8-bit activation format and the kernels that take it: Q8_K for the K-quants and the
/// 256-value i-quants, Q8_0 for Q8_0, Q4_0, Q5_0 and IQ4_NL, Q8_1 for Q4_1 and Q5_1.
trait Activations: Default + Clone + Send + Sync + Sized {
    /// Values per block.
    const BLOCK: usize;
    fn quantize(x: &[f32], out: &mut [Self]);
    /// `cpu::gemm_packed` for this format on `packed`'s layout (only formats of types with a
    /// packed layout).
    fn packed(isa: Isa, packed: &Packed, groups: &[u8], acts: &[&[Self]], out: &mut [[f32; CALL_COLS]], ahead: &[u8]);
    /// `cpu::dot_rows_q8k` / `dot_rows_q8_0` / `dot_rows_q8_1`.
    fn rows(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[Self]], out: &mut [f32]);
}

impl Activations for BlockQ8K {
    const BLOCK: usize = 256;
    fn quantize(x: &[f32], out: &mut [Self]) {
        quantize_q8_k(x, out)
    }
    fn packed(isa: Isa, packed: &Packed, groups: &[u8], acts: &[&[Self]], out: &mut [[f32; CALL_COLS]], ahead: &[u8]) {
        if packed.wide {
            gemm_packed_wide(isa, groups, acts, out, ahead)
        } else {
            gemm_packed(isa, packed.ty, groups, acts, out, ahead)
        }
    }
    fn rows(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[Self]], out: &mut [f32]) {
        dot_rows_q8k(isa, ty, w, acts, out)
    }
}

impl Activations for BlockQ8_0 {
    const BLOCK: usize = 32;
    fn quantize(x: &[f32], out: &mut [Self]) {
        quantize_q8_0(x, out)
    }
    fn packed(isa: Isa, packed: &Packed, groups: &[u8], acts: &[&[Self]], out: &mut [[f32; CALL_COLS]], ahead: &[u8]) {
        gemm_packed_q8_0(isa, packed.ty, groups, acts, out, ahead)
    }
    fn rows(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[Self]], out: &mut [f32]) {
        dot_rows_q8_0(isa, ty, w, acts, out)
    }
}

impl Activations for BlockQ8_1 {
    const BLOCK: usize = 32;
    fn quantize(x: &[f32], out: &mut [Self]) {
        quantize_q8_1(x, out)
    }
    fn packed(_: Isa, packed: &Packed, _: &[u8], _: &[&[Self]], _: &mut [[f32; CALL_COLS]], _: &[u8]) {
        unreachable!("{} has no packed layout with Q8_1 activations", packed.ty)
    }
    fn rows(isa: Isa, ty: GgmlType, w: &[u8], acts: &[&[Self]], out: &mut [f32]) {
        dot_rows_q8_1(isa, ty, w, acts, out)
    }
}

/// The `n_rows` rows of `x` (`n_in` values each) in `A`'s format: quantized into `acts` (grown
/// as needed) when `quantize`, else as a previous product left them there.
fn quantized_rows<'a, A: Activations>(
    x: &[f32],
    n_rows: usize,
    n_in: usize,
    acts: &'a mut Vec<A>,
    quantize: bool,
) -> &'a [A] {
    let nb = n_in / A::BLOCK;
    if acts.len() < n_rows * nb {
        acts.resize(n_rows * nb, A::default());
    }
    let acts = &mut acts[..n_rows * nb];
    if quantize {
        acts.par_chunks_mut(nb).zip(x.par_chunks(n_in)).for_each(|(a, xr)| A::quantize(xr, a));
    }
    acts
}

/// The integer products of a quantized matrix: the activations quantized once into `acts`
/// (unless `quantize` is false: `acts` holds them already),
/// then the packed kernels over the interleaved groups (writing `out`) and the row kernels over
/// the remaining columns (feature-major into `out_t`). Returns the first column left in `out_t`.
fn integer_matmul<A: Activations>(
    isa: Isa,
    x: &[f32],
    n_rows: usize,
    w: &Matrix,
    out: &mut [f32],
    (acts, quantize): (&mut Vec<A>, bool),
    out_t: &mut Vec<f32>,
) -> usize {
    let (n_in, n_out, ty) = (w.n_in, w.n_out, w.ty);
    let nb = n_in / A::BLOCK;
    let acts = quantized_rows(x, n_rows, n_in, acts, quantize);
    let mut first_col = 0;
    if let Some(packed) = w.packed.filter(|_| isa.is_x86_simd()) {
        let kernel =
            |g: &[u8], a: &[&[A]], o: &mut [[f32; CALL_COLS]], ahead: &[u8]| A::packed(isa, packed, g, a, o, ahead);
        let call_groups = packed_call_groups(isa, packed.ty, packed.wide);
        packed_products(packed, call_groups, n_rows, acts, nb, kernel, out, n_out);
        first_col = packed.n_groups * COLS;
    }
    if first_col < n_out {
        grow(out_t, n_rows * n_out);
        let dot = move |wr: &[u8], a: &[&[A]], o: &mut [f32]| A::rows(isa, ty, wr, a, o);
        integer_products(w, first_col, n_rows, acts, nb, dot, out_t);
    }
    first_col
}

/// `out[r][o] = dot(w[o], acts[r])` for the columns of the interleaved groups of a packed
/// matrix (`out` row-major, `n_out` columns), through `kernel(groups, rows, results, bytes to
/// prefetch)` (up to `PACKED_ROW_GROUP` activation rows a call), `call_groups` adjacent groups
/// per task.
#[allow(clippy::too_many_arguments)]
fn packed_products<A: Sync>(
    packed: &Packed,
    call_groups: usize,
    n_rows: usize,
    acts: &[A],
    nb: usize,
    kernel: impl Fn(&[u8], &[&[A]], &mut [[f32; CALL_COLS]], &[u8]) + Sync,
    out: &mut [f32],
    n_out: usize,
) {
    par_column_blocks(out, n_rows, n_out, packed.n_groups * COLS, call_groups * COLS)
        .for_each_init(CallBuffers::new, |buffers, block| {
            packed_block(packed, call_groups, acts, nb, &kernel, block, buffers)
        });
}

/// A packed kernel call's results (15 KB) and row slices, set up once per rayon split, not for
/// every block.
struct CallBuffers<'a, A> {
    results: [[f32; CALL_COLS]; PACKED_ROW_GROUP],
    rows: [&'a [A]; PACKED_ROW_GROUP],
}

impl<A> CallBuffers<'_, A> {
    fn new() -> Self {
        CallBuffers { results: [[0f32; CALL_COLS]; PACKED_ROW_GROUP], rows: [&[][..]; PACKED_ROW_GROUP] }
    }
}

/// One task of `packed_products`: the block's columns for every one of its rows, whose
/// activations are `acts` (`nb` blocks a row, from the block's first row on).
fn packed_block<'a, A>(
    packed: &Packed,
    call_groups: usize,
    acts: &'a [A],
    nb: usize,
    kernel: &impl Fn(&[u8], &[&[A]], &mut [[f32; CALL_COLS]], &[u8]),
    mut block: ColumnBlock,
    CallBuffers { results, rows: group }: &mut CallBuffers<'a, A>,
) {
    let n_rows = block.n_rows();
    let first_group = block.first_col() / COLS;
    let width = block.width();
    let groups = packed.groups(first_group..first_group + width / COLS);
    // The next block's weights (most often this thread's next task: rayon hands a thread
    // adjacent blocks), a share per call.
    let next_start = (first_group + width / COLS).min(packed.n_groups);
    let next = packed.groups(next_start..(next_start + call_groups).min(packed.n_groups));
    let calls = n_rows.div_ceil(PACKED_ROW_GROUP);
    for (t, first) in (0..n_rows).step_by(PACKED_ROW_GROUP).enumerate() {
        let rows = PACKED_ROW_GROUP.min(n_rows - first);
        for (i, slot) in group.iter_mut().enumerate().take(rows) {
            *slot = &acts[(first + i) * nb..(first + i + 1) * nb];
        }
        kernel(groups, &group[..rows], &mut results[..rows], ahead_share(next, t, calls));
        for (i, res) in results[..rows].iter().enumerate() {
            match <&mut [f32; CALL_COLS]>::try_from(block.row_mut(first + i)) {
                // A whole call's columns: a fixed-size copy, inlined (a slice copy of a
                // run-time length is a memmove call per row and call).
                Ok(row) => *row = *res,
                Err(_) => block.row_mut(first + i).copy_from_slice(&res[..width]),
            }
        }
    }
}

/// `out_t[o][r] = dot(w[o], acts[r])` for the rows `o >= first_col` over quantized activations
/// (`nb` blocks per row), `ROW_GROUP` activation rows per kernel call.
fn integer_products<A: Sync>(
    w: &Matrix,
    first_col: usize,
    n_rows: usize,
    acts: &[A],
    nb: usize,
    dot: impl Fn(&[u8], &[&[A]], &mut [f32]) + Sync,
    out_t: &mut [f32],
) {
    let rb = w.row_bytes();
    out_t[first_col * n_rows..n_rows * w.n_out].par_chunks_mut(TILE * n_rows).enumerate().for_each(|(t, out_t)| {
        let tile_rows = out_t.len() / n_rows;
        let mut results = [0f32; ROW_GROUP];
        // Activation groups outside, weight rows inside: a group (ROW_GROUP rows) and the
        // tile's weight rows both stay in L1 while they are multiplied.
        for g in 0..n_rows.div_ceil(ROW_GROUP) {
            let rows = (g * ROW_GROUP..n_rows.min((g + 1) * ROW_GROUP)).len();
            let mut group: [&[A]; ROW_GROUP] = [&[]; ROW_GROUP];
            for (i, slot) in group.iter_mut().enumerate().take(rows) {
                let r = g * ROW_GROUP + i;
                *slot = &acts[r * nb..(r + 1) * nb];
            }
            for j in 0..tile_rows {
                let o = first_col + t * TILE + j;
                dot(&w.data[o * rb..(o + 1) * rb], &group[..rows], &mut results[..rows]);
                out_t[j * n_rows + g * ROW_GROUP..][..rows].copy_from_slice(&results[..rows]);
            }
        }
    });
}

/// `out_t[o][r] = dot(w[o], x[r])` in f32 over weight rows dequantized a tile at a time.
fn dequantized_products(isa: Isa, x: &[f32], n_rows: usize, w: &Matrix, tiles: &[Mutex<Vec<f32>>], out_t: &mut [f32]) {
    let (n_in, n_out) = (w.n_in, w.n_out);
    out_t[..n_rows * n_out].par_chunks_mut(TILE * n_rows).enumerate().for_each(|(t, out_t)| {
        let first = t * TILE;
        let n = out_t.len() / n_rows;
        let slot = rayon::current_thread_index().unwrap_or(0) % tiles.len();
        let mut tile = tiles[slot].lock().unwrap_or_else(|e| e.into_inner());
        grow(&mut tile, TILE * n_in);
        for j in 0..n {
            // The loader checked every weight's type and size, so this cannot fail.
            w.dequantize_row(first + j, &mut tile[j * n_in..(j + 1) * n_in]).expect("weights validated at load");
        }
        for r in 0..n_rows {
            let xr = &x[r * n_in..(r + 1) * n_in];
            for j in 0..n {
                out_t[j * n_rows + r] = dot_f32(isa, xr, &tile[j * n_in..(j + 1) * n_in]);
            }
        }
    });
}

/// How a product with `ty` weights runs on `isa`, in words (what `dllm inspect` reports); None
/// for a type dllm does not run.
pub fn describe_product(ty: GgmlType, isa: Isa) -> Option<String> {
    use crate::cpu::kernels::repack::layout_of;
    let form = ty.activations()?;
    let activations = match form {
        Form::F32 => "f32 activations",
        Form::F16 => "activations rounded to f16",
        Form::BF16 => "activations rounded to bf16",
        Form::Q8_0 => "Q8_0 activations",
        Form::Q8_1 => "Q8_1 activations",
        Form::Q8K => "Q8_K activations",
    };
    let kernel = match (form, layout_of(ty)) {
        (Form::F32 | Form::F16 | Form::BF16, _) => format!("f32 dot products ({})", isa.name()),
        (_, Some(layout)) if isa.is_x86_simd() && layout == ty => format!("packed {layout} kernels ({})", isa.name()),
        (_, Some(layout)) if isa.is_x86_simd() => {
            format!("blocks re-encoded as {layout} at load, packed {layout} kernels ({})", isa.name())
        }
        _ => "scalar integer block dot products".to_owned(),
    };
    Some(format!("{activations}, {kernel}"))
}

/// Grows `v` to at least `n` elements (never shrinks, so steady state allocates nothing).
pub fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_naive_product_on_f32_weights() {
        let (n_rows, n_in, n_out) = (3, 16, 11);
        let x: Vec<f32> = (0..n_rows * n_in).map(|i| (i as f32 * 0.37).sin()).collect();
        let wv: Vec<f32> = (0..n_out * n_in).map(|i| (i as f32 * 0.11).cos()).collect();
        let bytes: Vec<u8> = wv.iter().flat_map(|v| v.to_le_bytes()).collect();
        let w = Matrix { ty: GgmlType::F32, n_in, n_out, data: &bytes, packed: None };
        let mut out = vec![0.0; n_rows * n_out];
        matmul(&x, n_rows, &w, &mut out, &mut MatmulScratch::default());
        for r in 0..n_rows {
            for o in 0..n_out {
                let naive: f64 = (0..n_in).map(|i| x[r * n_in + i] as f64 * wv[o * n_in + i] as f64).sum();
                assert!((out[r * n_out + o] as f64 - naive).abs() < 1e-5);
            }
        }
    }
}
