//! All experts' products of one LLaDA-MoE-7B-A1B layer (Q4_K_M: gate and up Q4_K, down Q6_K)
//! over a 148-row canvas, two ways, A/B in one run: one expert after another (each quantizing
//! its own rows: how dllm ran them before) and `matmul_experts` (the rows quantized once, every
//! expert's column blocks in one parallel loop). The two alternate round by round, so that the
//! host's load drifts over both alike; the int8 peak is measured in the same run.
//! `cargo bench --bench moe_layer`.

use std::time::Instant;

use dllm::backend::Routes;
use dllm::cpu::kernels::repack::{Packed, has_layout, pack};
use dllm::cpu::ops::matmul::{MatmulScratch, Matrix, matmul_experts_on, matmul_on};
use dllm::cpu::{active_isa, int8_peak};
use dllm::model::MoeConfig;
use dllm::quant::GgmlType;

const ROWS: usize = 148;
const ROUNDS: usize = 30;

/// (name, n_in, n_out, type) of an expert's matrices.
const SHAPES: [(&str, usize, usize, GgmlType); 2] =
    [("gate/up 2048x1024 Q4_K", 2048, 1024, GgmlType::Q4_K), ("down 1024x2048 Q6_K", 1024, 2048, GgmlType::Q6_K)];

fn main() {
    let isa = active_isa();
    let threads = rayon::current_num_threads();
    let peak = int8_peak(isa, threads, 1.0);
    println!("int8 peak, {} x{threads}: {:.1} G multiply-adds/s", isa.name(), peak / 1e9);
    // 64 experts, 8 per row, routed by pseudo-random router logits: groups of
    // uneven sizes (18.5 rows per expert on average).
    let m = MoeConfig { n_expert: 64, n_expert_used: 8, n_ff_exp: 1024, normalize_weights: false, weights_scale: 0.0 };
    let logits: Vec<f32> =
        (0..ROWS * m.n_expert).map(|i| ((i.wrapping_mul(2654435761) >> 7) % 1000) as f32 / 250.0).collect();
    let mut routes = Routes::default();
    routes.plan(&logits, ROWS, &m);
    let groups = routes.groups();
    let sizes: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    let (fewest, most) = (sizes.iter().min().unwrap_or(&0), sizes.iter().max().unwrap_or(&0));
    println!("{ROWS} rows, {} gathered; {fewest} to {most} rows per expert", routes.len());
    for (name, n_in, n_out, ty) in SHAPES {
        let experts: Vec<(Vec<u8>, Option<Packed>)> = (0..m.n_expert)
            .map(|e| {
                let data: Vec<u8> = (0..n_in / ty.block_size() * n_out * ty.type_size())
                    .map(|i| ((i + e * 7919).wrapping_mul(2654435761) >> 13) as u8 & 0x3f)
                    .collect();
                let packed = (isa.is_x86_simd() && has_layout(ty)).then(|| pack(ty, &data, n_in, n_out, |_| {}));
                (data, packed)
            })
            .collect();
        let w = |e: usize| Matrix { ty, n_in, n_out, data: &experts[e].0, packed: experts[e].1.as_ref() };
        let x: Vec<f32> = (0..routes.len() * n_in).map(|i| ((i % 97) as f32 - 48.0) / 16.0).collect();
        let mut out = vec![0f32; routes.len() * n_out];
        let mut scratch = MatmulScratch::default();
        let mut times = [Vec::new(), Vec::new()];
        for _ in 0..ROUNDS {
            let start = Instant::now();
            for (e, g) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
                let (x, out) = (&x[g.start * n_in..g.end * n_in], &mut out[g.start * n_out..g.end * n_out]);
                matmul_on(isa, x, g.len(), &w(e), out, &mut scratch);
            }
            times[0].push(start.elapsed().as_secs_f64());
            let start = Instant::now();
            matmul_experts_on(isa, &x, groups, w, &mut out, &mut scratch, false);
            times[1].push(start.elapsed().as_secs_f64());
        }
        let macs = (routes.len() * n_in * n_out) as f64;
        for (way, t) in ["one after another", "side by side"].iter().zip(&mut times) {
            t.sort_by(f64::total_cmp);
            let (min, median) = (t[0], t[t.len() / 2]);
            println!(
                "{name:24} {way:18} median {:6.2} ms ({:4.1}% of peak), fastest {:6.2} ms ({:4.1}%)",
                median * 1e3,
                100.0 * macs / median / peak,
                min * 1e3,
                100.0 * macs / min / peak
            );
        }
        println!(
            "{name:24} side by side / one after another, medians: {:.3}",
            times[1][ROUNDS / 2] / times[0][ROUNDS / 2]
        );
    }
}
