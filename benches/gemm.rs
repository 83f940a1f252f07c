//! The quantized GEMM on every LLaDA-8B and Dream-7B projection shape, at canvases of 148 and
//! 512 rows, on each instruction set this machine runs; and the int8 peak of each, so that
//! throughput reads as a fraction of it; and, with AVX-512 VNNI, what the kernels' other
//! instructions cost their `vpdpbusd` (`cpu::kernels::slots_beside_dot`). `cargo bench --bench gemm`.
//!
//! Throughput is reported as items/s where one item is one multiply-add.

use divan::counter::ItemsCount;
use dllm::cpu::kernels::repack::{has_layout, pack};
use dllm::cpu::kernels::{BesideDot, slots_beside_dot};
use dllm::cpu::ops::matmul::{MatmulScratch, Matrix, matmul_on};
use dllm::cpu::{Isa, int8_peak};
use dllm::quant::GgmlType;

fn main() {
    let threads = rayon::current_num_threads();
    for isa in Isa::available() {
        eprintln!("int8 peak, {} x{threads}: {:.1} G multiply-adds/s", isa.name(), int8_peak(isa, threads, 1.0) / 1e9);
    }
    // What bounds the 512-bit kernels on this CPU: the instructions that take vpdpbusd's units.
    let beside: Vec<String> = BesideDot::ALL
        .iter()
        .filter_map(|&op| slots_beside_dot(op, 1.0).map(|slots| format!("{} {slots:.2}", op.name())))
        .collect();
    if !beside.is_empty() {
        eprintln!("beside zmm vpdpbusd, the vpdpbusd slots each takes: {}", beside.join(", "));
    }
    divan::main();
}

/// (name, n_in, n_out, weight type as in a Q4_K_M file)
const SHAPES: &[(&str, usize, usize, GgmlType)] = &[
    ("llada.attn_qkvo 4096x4096", 4096, 4096, GgmlType::Q4_K),
    ("llada.ffn_gate_up 4096x12288", 4096, 12288, GgmlType::Q4_K),
    ("llada.ffn_down 12288x4096", 12288, 4096, GgmlType::Q6_K),
    ("dream.attn_qo 3584x3584", 3584, 3584, GgmlType::Q4_K),
    ("dream.attn_kv 3584x512", 3584, 512, GgmlType::Q4_K),
    ("dream.ffn_gate_up 3584x18944", 3584, 18944, GgmlType::Q4_K),
    ("dream.ffn_down 18944x3584", 18944, 3584, GgmlType::Q6_K),
    // The same product in a Q8_0 file (the bundled demo model's type too).
    ("llada.attn_qkvo.q8_0 4096x4096", 4096, 4096, GgmlType::Q8_0),
    // And in a Q5_K_M file.
    ("llada.attn_qkvo.q5_k 4096x4096", 4096, 4096, GgmlType::Q5_K),
    // The other tiers community repositories publish, each type's rate next to Q4_K's.
    ("llada.attn_qkvo.q4_0 4096x4096", 4096, 4096, GgmlType::Q4_0),
    ("llada.attn_qkvo.q5_0 4096x4096", 4096, 4096, GgmlType::Q5_0),
    ("llada.attn_qkvo.q3_k 4096x4096", 4096, 4096, GgmlType::Q3_K),
    ("llada.attn_qkvo.q2_k 4096x4096", 4096, 4096, GgmlType::Q2_K),
    ("llada.attn_qkvo.iq4_xs 4096x4096", 4096, 4096, GgmlType::IQ4_XS),
];

/// One expert's products in a LLaDA-MoE-7B-A1B step (Q4_K_M: gate and up Q4_K, down Q6_K on
/// half the layers): a 148-row canvas sends 148 x 8 / 64 = 18.5 rows to each expert on average.
const EXPERT_SHAPES: &[(&str, usize, usize, GgmlType)] = &[
    ("llada_moe.expert_gate_up 2048x1024", 2048, 1024, GgmlType::Q4_K),
    ("llada_moe.expert_down 1024x2048", 1024, 2048, GgmlType::Q6_K),
];

#[divan::bench(args = EXPERT_SHAPES.iter().map(|s| s.0), consts = [19], sample_count = 5, sample_size = 4)]
fn moe_expert<const ROWS: usize>(bencher: divan::Bencher, shape: &str) {
    let isa = dllm::cpu::active_isa();
    let &(_, n_in, n_out, ty) = EXPERT_SHAPES.iter().find(|s| s.0 == shape).unwrap();
    bench_product(bencher, isa, n_in, n_out, ty, ROWS);
}

fn isa_named(name: &str) -> Option<Isa> {
    Isa::available().into_iter().find(|i| i.name() == name)
}

#[divan::bench(args = SHAPES.iter().map(|s| s.0), consts = [148, 512], sample_count = 3, sample_size = 1)]
fn avx2<const ROWS: usize>(bencher: divan::Bencher, shape: &str) {
    run(bencher, shape, ROWS, "avx2");
}

#[divan::bench(args = SHAPES.iter().map(|s| s.0), consts = [148, 512], sample_count = 3, sample_size = 1)]
fn avxvnni<const ROWS: usize>(bencher: divan::Bencher, shape: &str) {
    run(bencher, shape, ROWS, "avxvnni");
}

#[divan::bench(args = SHAPES.iter().map(|s| s.0), consts = [148, 512], sample_count = 3, sample_size = 1)]
fn avx512vnni<const ROWS: usize>(bencher: divan::Bencher, shape: &str) {
    run(bencher, shape, ROWS, "avx512vnni");
}

#[divan::bench(args = SHAPES.iter().map(|s| s.0), consts = [148, 512], sample_count = 2, sample_size = 1)]
fn scalar<const ROWS: usize>(bencher: divan::Bencher, shape: &str) {
    run(bencher, shape, ROWS, "scalar");
}

fn run(bencher: divan::Bencher, shape: &str, rows: usize, isa: &str) {
    let Some(isa) = isa_named(isa) else {
        eprintln!("{isa}: not available on this machine, skipped");
        return;
    };
    let &(_, n_in, n_out, ty) = SHAPES.iter().find(|s| s.0 == shape).unwrap();
    bench_product(bencher, isa, n_in, n_out, ty, rows);
}

/// Times `matmul_on` of `rows` activation rows against an `n_out` x `n_in` matrix of `ty`.
fn bench_product(bencher: divan::Bencher, isa: Isa, n_in: usize, n_out: usize, ty: GgmlType, rows: usize) {
    let data: Vec<u8> = (0..n_in / ty.block_size() * n_out * ty.type_size())
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 & 0x3f)
        .collect();
    // The x86 SIMD paths run on the interleaved layout the model loader builds.
    let packed = (isa.is_x86_simd() && has_layout(ty)).then(|| pack(ty, &data, n_in, n_out, |_| {}));
    let w = Matrix { ty, n_in, n_out, data: &data, packed: packed.as_ref() };
    let x: Vec<f32> = (0..rows * n_in).map(|i| ((i % 97) as f32 - 48.0) / 16.0).collect();
    let mut out = vec![0f32; rows * n_out];
    let mut scratch = MatmulScratch::default();
    bencher
        .counter(ItemsCount::new(rows * n_in * n_out))
        .bench_local(|| matmul_on(isa, &x, rows, &w, &mut out, &mut scratch));
}
