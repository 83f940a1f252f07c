//! The CUDA backend. Without a GPU, every kernel source must still compile to PTX for sm_80 and
//! sm_90 through NVRTC (and assemble with ptxas when `DLLM_PTXAS` names it). With one, each
//! kernel is checked against the CPU function it replaces on fresh random inputs, and the GPU
//! model against the goldens and the CPU's greedy decoding. GPU tests report themselves skipped
//! when there is no capable GPU, unless `DLLM_REQUIRE_GPU` is set (scripts/gpu-check.sh sets it).

use crate::common;

use std::sync::Arc;

use common::{compare_logits, data, read_f32, read_i32};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use dllm::backend::RowConfidence;
use dllm::backend::{Routes, RowRule};
use dllm::cpu::ops::attention::{AttentionScratch, AttentionShape, attention};
use dllm::cpu::ops::matmul::{MatmulScratch, Matrix, matmul};
use dllm::cpu::ops::norm::rms_norm;
use dllm::cuda::{ARCHS, GpuInfo, KERNELS, Kernels, MIN_COMPUTE, Probe, RowChooser, compile_ptx, nvrtc_present, probe};
use dllm::decoding::{GenerateParams, RuleScratch, SpecialTokens, choose_row, generate};
use dllm::forward::{CpuModel, CudaModel};
use dllm::forward::{Forward, Pass};
use dllm::gguf::GgufFile;
use dllm::model::rope::RopeTable;
use dllm::model::{Family, MoeConfig, RopeStyle};
use dllm::quant::GgmlType;
use dllm::quant::q8::{BlockQ8_0, BlockQ8K, quantize_q8_0, quantize_q8_k};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn every_kernel_compiles_to_ptx_for_ampere_and_hopper() {
    if !nvrtc_present() {
        assert!(
            std::env::var_os("DLLM_REQUIRE_NVRTC").is_none(),
            "DLLM_REQUIRE_NVRTC is set but NVRTC cannot be loaded"
        );
        eprintln!("skipped: NVRTC (libnvrtc.so.12) not found; .ci/run installs it");
        return;
    }
    let ptxas = std::env::var_os("DLLM_PTXAS");
    let dir = std::env::temp_dir().join(format!("dllm-ptx-{}", std::process::id()));
    for (file, _, names) in KERNELS {
        for arch in ARCHS {
            let ptx = compile_ptx(file, arch).unwrap_or_else(|e| panic!("{e}"));
            for name in names {
                assert!(ptx.contains(&format!(".entry {name}(")), "{file}.cu for {arch} lacks kernel {name}");
            }
            if let Some(ptxas) = &ptxas {
                std::fs::create_dir_all(&dir).unwrap();
                let src = dir.join(format!("{file}-{arch}.ptx"));
                std::fs::write(&src, &ptx).unwrap();
                let out = std::process::Command::new(ptxas)
                    .args([&format!("-arch={arch}"), "-o"])
                    .arg(dir.join(format!("{file}-{arch}.cubin")))
                    .arg(&src)
                    .output()
                    .expect("DLLM_PTXAS does not run");
                assert!(out.status.success(), "ptxas {file} {arch}: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The first GPU the kernels can run on, or None (test skipped) when there is none.
fn gpu() -> Option<GpuInfo> {
    let found = match probe() {
        Probe::Gpus(gpus) => gpus.iter().find(|g| g.compute >= MIN_COMPUTE).cloned(),
        _ => None,
    };
    if found.is_none() {
        assert!(std::env::var_os("DLLM_REQUIRE_GPU").is_none(), "DLLM_REQUIRE_GPU is set but no GPU: {:?}", probe());
        eprintln!("skipped: no CUDA GPU with compute capability 8.0 or newer ({:?})", probe());
    }
    found
}

struct Gpu {
    stream: Arc<CudaStream>,
    kernels: Kernels,
}

fn setup() -> Option<Gpu> {
    let g = gpu()?;
    let ctx = CudaContext::new(g.ordinal).unwrap();
    let kernels = Kernels::load(&ctx, &g.arch()).unwrap();
    Some(Gpu { stream: ctx.default_stream(), kernels })
}

fn cfg(grid: (u32, u32), block: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid.0, grid.1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 }
}

fn random(rng: &mut ChaCha8Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_le_bytes()
}

/// Random but valid blocks of `ty` for an `n_out x n_in` matrix: random quants and scales, with
/// the f16 super-scales set to small finite values.
fn random_matrix(rng: &mut ChaCha8Rng, ty: GgmlType, n_in: usize, n_out: usize) -> Vec<u8> {
    let (bs, ts) = (ty.block_size(), ty.type_size());
    let mut bytes: Vec<u8> = (0..n_in / bs * n_out * ts).map(|_| rng.random()).collect();
    for block in bytes.chunks_exact_mut(ts) {
        let mut scale = |at: usize, rng: &mut ChaCha8Rng| {
            block[at..at + 2].copy_from_slice(&f16_bytes(rng.random_range(0.001..0.02)))
        };
        match ty {
            GgmlType::Q4_K | GgmlType::Q5_K => {
                scale(0, rng);
                scale(2, rng);
            }
            GgmlType::Q6_K => scale(208, rng),
            GgmlType::Q8_0 => scale(0, rng),
            GgmlType::F16 => scale(0, rng),
            GgmlType::BF16 => {
                let v = half::bf16::from_f32(rng.random_range(-0.1..0.1)).to_le_bytes();
                block.copy_from_slice(&v);
            }
            GgmlType::F32 => block.copy_from_slice(&rng.random_range(-0.1f32..0.1).to_le_bytes()),
            _ => unreachable!(),
        }
    }
    bytes
}

fn assert_close(what: &str, got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    let worst = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    eprintln!("{what}: max abs diff {worst:.3e} (scale {scale:.3e})");
    assert!(worst <= rel * scale, "{what}: max abs diff {worst} exceeds {rel} x {scale}");
}

#[test]
fn activation_quantization_matches_the_cpu() {
    let Some(g) = setup() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let (n, n_in) = (5, 3584);
    let x = random(&mut rng, n * n_in, 3.0);
    let xd = g.stream.clone_htod(&x).unwrap();
    let mut q = g.stream.alloc_zeros::<i8>(n * n_in).unwrap();
    let mut d = g.stream.alloc_zeros::<f32>(n * n_in / 32).unwrap();
    let mut bs = g.stream.alloc_zeros::<i16>(n * n_in / 16).unwrap();
    let n_in32 = n_in as i32;
    let mut b = g.stream.launch_builder(g.kernels.get("quantize_q8_k"));
    b.arg(&xd).arg(&n_in32).arg(&mut q).arg(&mut d).arg(&mut bs);
    unsafe { b.launch(cfg(((n_in / 256) as u32, n as u32), 256)) }.unwrap();
    let (gq, gd, gbs) =
        (g.stream.clone_dtoh(&q).unwrap(), g.stream.clone_dtoh(&d).unwrap(), g.stream.clone_dtoh(&bs).unwrap());
    let mut cpu = vec![BlockQ8K::default(); n * n_in / 256];
    for (row, blocks) in x.chunks_exact(n_in).zip(cpu.chunks_exact_mut(n_in / 256)) {
        quantize_q8_k(row, blocks);
    }
    for (i, blk) in cpu.iter().enumerate() {
        // The scale's sign may differ (both sides flip q with it): compare the values.
        let sign = if (gd[i] > 0.0) == (blk.d > 0.0) { 1 } else { -1 };
        for j in 0..256 {
            assert_eq!(gq[i * 256 + j] as i32 * sign, blk.qs[j] as i32, "block {i} value {j}");
        }
        assert_eq!(gd[i] * sign as f32, blk.d, "block {i} scale");
        for j in 0..16 {
            assert_eq!(gbs[i * 16 + j] as i32 * sign, blk.bsums[j] as i32, "block {i} sum {j}");
        }
    }

    let mut q0 = g.stream.alloc_zeros::<i8>(n * n_in).unwrap();
    let mut d0 = g.stream.alloc_zeros::<f32>(n * n_in / 32).unwrap();
    let mut b = g.stream.launch_builder(g.kernels.get("quantize_q8_0"));
    b.arg(&xd).arg(&n_in32).arg(&mut q0).arg(&mut d0);
    unsafe { b.launch(cfg(((n_in / 32).div_ceil(8) as u32, n as u32), 256)) }.unwrap();
    let (gq, gd) = (g.stream.clone_dtoh(&q0).unwrap(), g.stream.clone_dtoh(&d0).unwrap());
    let mut cpu = vec![BlockQ8_0::default(); n * n_in / 32];
    for (row, blocks) in x.chunks_exact(n_in).zip(cpu.chunks_exact_mut(n_in / 32)) {
        quantize_q8_0(row, blocks);
    }
    for (i, blk) in cpu.iter().enumerate() {
        assert_eq!(gd[i], blk.d, "Q8_0 block {i} scale");
        assert_eq!(&gq[i * 32..(i + 1) * 32], &blk.qs[..], "Q8_0 block {i}");
    }
}

#[test]
fn every_product_kernel_matches_the_cpu_on_ragged_shapes() {
    let Some(g) = setup() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    // Rows and outputs that are not multiples of the 32 x 64 tile; Dream's 3584 and 18944 inputs.
    let shapes = [(37, 512, 100), (148, 3584, 64), (3, 18944, 72), (1, 256, 7)];
    let kinds = [
        (GgmlType::Q4_K, "qgemm_q4_k"),
        (GgmlType::Q5_K, "qgemm_q5_k"),
        (GgmlType::Q6_K, "qgemm_q6_k"),
        (GgmlType::Q8_0, "qgemm_q8_0"),
        (GgmlType::F32, "gemm_f32"),
        (GgmlType::F16, "gemm_f16"),
        (GgmlType::BF16, "gemm_bf16"),
    ];
    for (ty, kernel) in kinds {
        for (n, n_in, n_out) in shapes {
            let w = random_matrix(&mut rng, ty, n_in, n_out);
            let x = random(&mut rng, n * n_in, 2.0);
            let mut want = vec![0f32; n * n_out];
            let m = Matrix { ty, n_in, n_out, data: &w, packed: None };
            matmul(&x, n, &m, &mut want, &mut MatmulScratch::default());

            let s = &g.stream;
            let (wd, xd) = (s.clone_htod(&w).unwrap(), s.clone_htod(&x).unwrap());
            let mut out = s.alloc_zeros::<f32>(n * n_out).unwrap();
            let dims = [n as i32, n_in as i32, n_out as i32];
            if kernel.starts_with("gemm_") {
                let mut b = s.launch_builder(g.kernels.get(kernel));
                b.arg(&wd).arg(&xd).arg(&mut out).arg(&dims[0]).arg(&dims[1]).arg(&dims[2]);
                unsafe { b.launch(cfg((n_out.div_ceil(16) as u32, n.div_ceil(16) as u32), 256)) }.unwrap();
            } else {
                let mut q = s.alloc_zeros::<i8>(n * n_in).unwrap();
                let mut d = s.alloc_zeros::<f32>(n * n_in / 32).unwrap();
                let mut bs = s.alloc_zeros::<i16>(n * n_in / 16).unwrap();
                let mut b = if ty == GgmlType::Q8_0 {
                    let mut b = s.launch_builder(g.kernels.get("quantize_q8_0"));
                    b.arg(&xd).arg(&dims[1]).arg(&mut q).arg(&mut d);
                    unsafe { b.launch(cfg(((n_in / 32).div_ceil(8) as u32, n as u32), 256)) }.unwrap();
                    s.launch_builder(g.kernels.get(kernel))
                } else {
                    let mut b = s.launch_builder(g.kernels.get("quantize_q8_k"));
                    b.arg(&xd).arg(&dims[1]).arg(&mut q).arg(&mut d).arg(&mut bs);
                    unsafe { b.launch(cfg(((n_in / 256) as u32, n as u32), 256)) }.unwrap();
                    s.launch_builder(g.kernels.get(kernel))
                };
                b.arg(&wd).arg(&q).arg(&d).arg(&bs).arg(&mut out).arg(&dims[0]).arg(&dims[1]).arg(&dims[2]);
                unsafe { b.launch(cfg((n_out.div_ceil(64) as u32, n.div_ceil(32) as u32), 128)) }.unwrap();
            }
            let got = s.clone_dtoh(&out).unwrap();
            // Same int8 activations and exact integer block sums on both sides; only the order of
            // the f32 scaling and summation differs (~1e-6 relative), and f32 sums over up to
            // 18944 products for the float kernels (~1e-5).
            assert_close(&format!("{kernel} {n}x{n_in}x{n_out}"), &got, &want, 1e-4);
        }
    }
}

fn launch_elementwise(g: &Gpu, name: &str, x: &mut CudaSlice<f32>, y: &CudaSlice<f32>, n: usize) {
    let n32 = n as i32;
    let mut b = g.stream.launch_builder(g.kernels.get(name));
    b.arg(x).arg(y).arg(&n32);
    unsafe { b.launch(cfg((n.div_ceil(256) as u32, 1), 256)) }.unwrap();
}

/// The MoE routing kernels (`moe_route`, `moe_group`) against `backend::Routes` on random
/// router logits, with ties between experts in some rows, for both weightings (LLaDA-MoE's
/// plain probabilities, RND1's renormalized ones); then `gather_rows` and `moe_combine` on
/// that routing against the host's gather and combine.
#[test]
fn moe_routing_on_the_gpu_matches_the_host() {
    let Some(g) = setup() else { return };
    let s = &g.stream;
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let (rows, width) = (37, 96);
    for (n_expert, k, normalize) in [(64, 8, false), (128, 8, true), (4, 2, true)] {
        let m = MoeConfig { n_expert, n_expert_used: k, n_ff_exp: 8, normalize_weights: normalize, weights_scale: 0.0 };
        let mut logits = random(&mut rng, rows * n_expert, 3.0);
        for r in (0..rows).step_by(5) {
            // Ties: three experts of the row share its largest logit.
            let row = &mut logits[r * n_expert..(r + 1) * n_expert];
            row[n_expert - 1] = 9.0;
            row[1] = 9.0;
            row[n_expert / 2] = 9.0;
        }
        let mut host = Routes::default();
        host.plan(&logits, rows, &m);
        let slots = rows * k;
        let d_logits = s.clone_htod(&logits).unwrap();
        let mut slot_expert = s.alloc_zeros::<i32>(slots).unwrap();
        let mut slot_weight = s.alloc_zeros::<f32>(slots).unwrap();
        let mut slot_position = s.alloc_zeros::<i32>(slots).unwrap();
        let mut gathered = s.alloc_zeros::<i32>(slots).unwrap();
        let mut starts = s.alloc_zeros::<i32>(n_expert + 1).unwrap();
        let (n_rows, n_e, k32, n_slots, norm, scale) =
            (rows as i32, n_expert as i32, k as i32, slots as i32, normalize as i32, 0f32);
        let mut b = s.launch_builder(g.kernels.get("moe_route"));
        b.arg(&d_logits)
            .arg(&n_rows)
            .arg(&n_e)
            .arg(&k32)
            .arg(&norm)
            .arg(&scale)
            .arg(&mut slot_expert)
            .arg(&mut slot_weight);
        unsafe { b.launch(cfg((rows.div_ceil(128) as u32, 1), 128)) }.unwrap();
        let mut b = s.launch_builder(g.kernels.get("moe_group"));
        b.arg(&slot_expert)
            .arg(&n_slots)
            .arg(&k32)
            .arg(&n_e)
            .arg(&mut starts)
            .arg(&mut gathered)
            .arg(&mut slot_position);
        unsafe { b.launch(cfg((1, 1), 1)) }.unwrap();
        let starts = s.clone_dtoh(&starts).unwrap();
        let want_starts: Vec<i32> = host.groups().iter().map(|g| g.start as i32).chain([slots as i32]).collect();
        assert_eq!(starts, want_starts, "{n_expert} experts: each expert's rows");
        let want_gathered: Vec<i32> = host.gathered().iter().map(|&r| r as i32).collect();
        assert_eq!(s.clone_dtoh(&gathered).unwrap(), want_gathered);
        let positions = s.clone_dtoh(&slot_position).unwrap();
        let weights = s.clone_dtoh(&slot_weight).unwrap();
        for (i, (p, w)) in host.slots().enumerate() {
            assert_eq!(positions[i], p as i32, "slot {i}");
            // expf on the GPU and exp on the host may differ in the last bits.
            assert!((weights[i] - w).abs() <= 1e-6 * w.abs().max(1e-3), "slot {i}: {} vs {w}", weights[i]);
        }

        let x = random(&mut rng, rows * width, 2.0);
        let mut want_picked = vec![0f32; slots * width];
        host.gather(&x, width, &mut want_picked);
        let d_x = s.clone_htod(&x).unwrap();
        let mut picked = s.alloc_zeros::<f32>(slots * width).unwrap();
        let w32 = width as i32;
        let mut b = s.launch_builder(g.kernels.get("gather_rows"));
        b.arg(&d_x).arg(&gathered).arg(&mut picked).arg(&n_slots).arg(&w32);
        unsafe { b.launch(cfg((width.div_ceil(256) as u32, slots as u32), 256)) }.unwrap();
        assert_eq!(s.clone_dtoh(&picked).unwrap(), want_picked);

        // Combined with the host's weights, so that only the kernel's arithmetic is compared.
        let host_weights: Vec<f32> = host.slots().map(|(_, w)| w).collect();
        let d_weights = s.clone_htod(&host_weights).unwrap();
        let mut want = vec![0f32; rows * width];
        host.combine(&want_picked, width, &mut want);
        let mut combined = s.alloc_zeros::<f32>(rows * width).unwrap();
        let mut b = s.launch_builder(g.kernels.get("moe_combine"));
        b.arg(&picked).arg(&slot_position).arg(&d_weights).arg(&mut combined).arg(&n_rows).arg(&k32).arg(&w32);
        unsafe { b.launch(cfg((width.div_ceil(256) as u32, rows as u32), 256)) }.unwrap();
        assert_eq!(s.clone_dtoh(&combined).unwrap(), want, "the same multiplies and adds, in the same order");
    }
}

#[test]
fn norm_rope_swiglu_and_residual_kernels_match_the_cpu() {
    let Some(g) = setup() else { return };
    let s = &g.stream;
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let (n, d) = (13, 4096);
    let x = random(&mut rng, n * d, 4.0);
    let w = random(&mut rng, d, 1.0);
    let mut want = vec![0f32; n * d];
    rms_norm(&x, &w, 1e-5, &mut want);
    let (xd, wd) = (s.clone_htod(&x).unwrap(), s.clone_htod(&w).unwrap());
    let mut out = s.alloc_zeros::<f32>(n * d).unwrap();
    let (null, d32, eps) = (0u64, d as i32, 1e-5f32);
    let mut b = s.launch_builder(g.kernels.get("rms_norm"));
    b.arg(&xd).arg(&null).arg(&wd).arg(&mut out).arg(&d32).arg(&eps);
    unsafe { b.launch(cfg((n as u32, 1), 256)) }.unwrap();
    assert_close("rms_norm", &s.clone_dtoh(&out).unwrap(), &want, 1e-5);
    // Picked rows, in any order (the LM head's rows).
    let picked = [7i32, 0, 12];
    let pd = s.clone_htod(&picked).unwrap();
    let mut b = s.launch_builder(g.kernels.get("rms_norm"));
    b.arg(&xd).arg(&pd).arg(&wd).arg(&mut out).arg(&d32).arg(&eps);
    unsafe { b.launch(cfg((3, 1), 256)) }.unwrap();
    let got = s.clone_dtoh(&out).unwrap();
    for (i, &r) in picked.iter().enumerate() {
        let r = r as usize;
        assert_close("rms_norm picked row", &got[i * d..(i + 1) * d], &want[r * d..(r + 1) * d], 1e-5);
    }

    for style in [RopeStyle::Adjacent, RopeStyle::Halves] {
        let (heads, hd, first) = (8, 128, 20);
        let mut table = RopeTable::default();
        table.prepare(first + n, hd, 10000.0);
        let x = random(&mut rng, n * heads * hd, 2.0);
        let mut want = x.clone();
        let positions: Vec<usize> = (first..first + n).collect();
        table.apply(&mut want, &positions, hd, style);
        let (cos, sin) = table.cos_sin();
        let (cd, sd) = (s.clone_htod(cos).unwrap(), s.clone_htod(sin).unwrap());
        let mut xd = s.clone_htod(&x).unwrap();
        let args = [n as i32, heads as i32, hd as i32, hd as i32, first as i32, i32::from(style == RopeStyle::Halves)];
        let mut b = s.launch_builder(g.kernels.get("rope"));
        b.arg(&mut xd).arg(&cd).arg(&sd);
        for a in &args {
            b.arg(a);
        }
        unsafe { b.launch(cfg(((n * heads * hd / 2).div_ceil(256) as u32, 1), 256)) }.unwrap();
        // Identical angles from the shared table; one multiply-add per value.
        assert_close(&format!("rope {style:?}"), &s.clone_dtoh(&xd).unwrap(), &want, 1e-6);
    }

    let (gate, up) = (random(&mut rng, 5000, 6.0), random(&mut rng, 5000, 2.0));
    let mut want = gate.clone();
    dllm::cpu::ops::swiglu(&mut want, &up);
    let (mut gd, ud) = (s.clone_htod(&gate).unwrap(), s.clone_htod(&up).unwrap());
    launch_elementwise(&g, "swiglu", &mut gd, &ud, 5000);
    // expf on the GPU is within 2 ulp of the CPU's.
    assert_close("swiglu", &s.clone_dtoh(&gd).unwrap(), &want, 1e-6);
    launch_elementwise(&g, "add_into", &mut gd, &ud, 5000);
    let sum: Vec<f32> = want.iter().zip(&up).map(|(a, b)| a + b).collect();
    assert_close("add_into", &s.clone_dtoh(&gd).unwrap(), &sum, 1e-6);
}

#[test]
fn attention_matches_the_cpu_for_full_and_windowed_passes() {
    let Some(g) = setup() else { return };
    let s = &g.stream;
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    // (query rows, keys, heads, kv heads, head size): a full tiny pass with GQA, a 32-row window
    // over a 148-position canvas at LLaDA-8B's shape, Dream-7B's 28/4 heads at 600 positions.
    for (n_rows, n_keys, n_head, n_head_kv, hd) in
        [(37, 37, 4, 2, 64), (32, 148, 32, 32, 128), (600, 600, 28, 4, 128), (5, 70, 2, 1, 32)]
    {
        let q = random(&mut rng, n_rows * n_head * hd, 2.0);
        let k = random(&mut rng, n_keys * n_head_kv * hd, 2.0);
        let v = random(&mut rng, n_keys * n_head_kv * hd, 1.0);
        let shape = AttentionShape { n_rows, n_keys, n_head, n_head_kv, head_dim: hd };
        let mut want = vec![0f32; n_rows * n_head * hd];
        attention(&q, &k, &v, shape, &mut want, &mut AttentionScratch::default());
        let (qd, kd, vd) = (s.clone_htod(&q).unwrap(), s.clone_htod(&k).unwrap(), s.clone_htod(&v).unwrap());
        let mut out = s.alloc_zeros::<f32>(n_rows * n_head * hd).unwrap();
        let args = [n_rows as i32, n_keys as i32, n_head as i32, n_head_kv as i32];
        let mut b = s.launch_builder(g.kernels.get(&format!("attention_d{hd}")));
        b.arg(&qd).arg(&kd).arg(&vd).arg(&mut out);
        for a in &args {
            b.arg(a);
        }
        unsafe { b.launch(cfg((n_rows.div_ceil(64) as u32, n_head as u32), 128)) }.unwrap();
        // Q, K, V and the probabilities enter the tensor cores as f16 (relative rounding 2^-11);
        // the outputs are convex combinations of V, so their error stays within a few 1e-3 of
        // max |V|. A wrong head, key or mask is O(1).
        assert_close(
            &format!("attention {n_rows}x{n_keys} {n_head}/{n_head_kv} d{hd}"),
            &s.clone_dtoh(&out).unwrap(),
            &want,
            1e-2,
        );
    }
}

/// Every row rule, applied on the GPU to logits there, chooses what `RowRule::choose` chooses on
/// the CPU for the same logits and uniform numbers, with the same confidence up to summation order.
#[test]
fn row_rules_on_the_gpu_match_the_host_ones() {
    let Some(g) = setup() else { return };
    let s = &g.stream;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (n, vocab) = (8, 152_064);
    let mut logits = random(&mut rng, n * vocab, 8.0);
    logits[3 * vocab + 17] = 30.0; // a confident row
    logits[4 * vocab + 5] = 12.0; // a tie for the top: the first index wins
    logits[4 * vocab + 900] = 12.0;
    for at in [7, 70_000, 151_000] {
        logits[5 * vocab + at] = 14.0; // three tied: top-p 0.5 keeps the first two
    }
    let uniforms: Vec<f64> = (0..n).map(|_| rng.random()).collect();
    let dream = |temperature, top_p, top_k, confidence| RowRule::Dream { temperature, top_p, top_k, confidence };
    let rules = [
        RowRule::LladaGreedy { f64: false },
        RowRule::LladaGreedy { f64: true },
        dream(0.0, None, None, RowConfidence::Probability),
        dream(0.0, None, None, RowConfidence::Margin),
        dream(0.0, None, None, RowConfidence::NegEntropy),
        dream(0.2, Some(0.95), None, RowConfidence::NegEntropy), // Dream's defaults
        dream(0.5, None, Some(50), RowConfidence::Probability),
        dream(1.0, Some(0.9), Some(20), RowConfidence::Margin),
        dream(0.7, Some(0.5), None, RowConfidence::Probability),
        dream(0.0, Some(0.5), Some(2), RowConfidence::Margin),
    ];
    let (mut chooser, mut scratch) = (RowChooser::new(s, 1).unwrap(), RuleScratch::default());
    for rule in rules {
        let mut on_gpu = s.clone_htod(&logits).unwrap();
        let mut got = Vec::new();
        chooser.choose(s, &g.kernels, &mut on_gpu, n, vocab, &rule, &uniforms, &mut got).unwrap();
        assert_eq!(got.len(), n);
        for (r, row) in logits.chunks_exact(vocab).enumerate() {
            let (token, want) = choose_row(&rule, &mut row.to_vec(), uniforms[r], &mut scratch);
            assert_eq!(got[r].0 as usize, token, "{rule:?}, row {r}");
            // f32 sums of up to 152k terms in another order: ~1e-5 relative (f64: ~1e-13).
            let tolerance = 1e-4 * want.abs().max(1e-3);
            assert!((got[r].1 - want).abs() <= tolerance, "{rule:?}, row {r}: confidence {} vs {want}", got[r].1);
        }
    }
}

fn cuda_model(file: &str) -> Option<CudaModel> {
    let g = gpu()?;
    Some(CudaModel::load(Arc::new(GgufFile::open(data(&format!("models/{file}.gguf"))).unwrap()), &g).unwrap())
}

#[test]
fn gpu_logits_match_the_goldens() {
    if gpu().is_none() {
        return;
    }
    for family in ["llada-tiny", "dream-tiny"] {
        for (quant, reference) in
            [("F32", "pytorch"), ("Q8_0", "llamacpp-Q8_0"), ("Q6_K", "llamacpp-Q6_K"), ("Q4_K_M", "llamacpp-Q4_K_M")]
        {
            let mut m = cuda_model(&format!("{family}-{quant}")).unwrap();
            for c in ["c17", "c40", "c77"] {
                let canvas = format!("{family}_{c}");
                let tokens = read_i32(&format!("canvases/{canvas}.i32"));
                let mut got = Vec::new();
                m.forward(&tokens, &(0..tokens.len()).collect::<Vec<_>>(), &mut got).unwrap();
                let e =
                    compare_logits(&got, &read_f32(&format!("logits/{canvas}_{reference}.f32")), m.config().n_vocab);
                eprintln!("GPU {canvas} {quant} vs {reference}: rel {:.3e}, argmax {:.3}", e.rel, e.argmax_agree);
                // The CPU meets 1e-4 (F32) and 0.02 (quantized, the reference README's bound);
                // the GPU's f16 attention adds ~1e-3 relative (see the attention test).
                let bound = if quant == "F32" { 5e-3 } else { 0.02 };
                assert!(e.rel <= bound, "{canvas} {quant}: relative error {}", e.rel);
                assert!(e.argmax_agree >= 0.9, "{canvas} {quant}: argmax agreement {}", e.argmax_agree);
            }
        }
    }
}

/// The MoE layer on the GPU (routed and grouped by kernels/moe.cu, every expert's product in one
/// launch of qgemm.cu's `*_experts` kernels, combined back) and the q/k norms: the MoE fixtures
/// against their references.
#[test]
fn gpu_moe_logits_match_the_references() {
    let Some(g) = gpu() else {
        eprintln!("skipped: no CUDA device");
        return;
    };
    for model in ["llada-moe-tiny", "rnd1-tiny"] {
        for (quant, reference) in [("F32", "numpy-f64"), ("Q8_0", "llamacpp-Q8_0"), ("Q4_K_M", "llamacpp-Q4_K_M")] {
            let gguf = Arc::new(GgufFile::open(data(&format!("moe/models/{model}-{quant}.gguf"))).unwrap());
            let mut m = CudaModel::load(gguf, &g).unwrap();
            let canvas = format!("{model}_c40");
            let tokens = read_i32(&format!("moe/canvases/{canvas}.i32"));
            let mut got = Vec::new();
            m.forward(&tokens, &(0..tokens.len()).collect::<Vec<_>>(), &mut got).unwrap();
            let e =
                compare_logits(&got, &read_f32(&format!("moe/logits/{canvas}_{reference}.f32")), m.config().n_vocab);
            eprintln!("GPU {canvas} {quant} vs {reference}: rel {:.3e}, argmax {:.3}", e.rel, e.argmax_agree);
            // As for the dense files: the GPU's f16 attention adds ~1e-3 (F32); quantized, the
            // reference README's 0.02.
            let bound = if quant == "F32" { 5e-3 } else { 0.02 };
            assert!(e.rel <= bound, "{canvas} {quant}: relative error {}", e.rel);
        }
    }
}

#[test]
fn gpu_window_passes_match_the_cpu_ones() {
    let Some(mut gpu_model) = cuda_model("dream-tiny-Q4_K_M") else { return };
    let mut cpu = CpuModel::load(Arc::new(GgufFile::open(data("models/dream-tiny-Q4_K_M.gguf")).unwrap())).unwrap();
    let tokens = read_i32("canvases/dream-tiny_c77.i32");
    let n_vocab = cpu.config().n_vocab;
    for pass in [Pass::FillCache, Pass::Window(32..64), Pass::Window(40..77)] {
        let rows: Vec<usize> = pass.window(tokens.len()).collect();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        gpu_model.forward_pass(&tokens, &pass, &rows, &mut a).unwrap();
        cpu.forward_pass(&tokens, &pass, &rows, &mut b).unwrap();
        let e = compare_logits(&a, &b, n_vocab);
        assert!(e.rel <= 0.02 && e.argmax_agree >= 0.9, "{pass:?}: rel {}, argmax {}", e.rel, e.argmax_agree);
    }
    let err = gpu_model.forward_pass(&tokens[..50], &Pass::Window(0..10), &[0], &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("K/V cache"), "{err}");
}

/// Greedy decoding on the GPU (the LM head's logits reduced there by the row rule) commits what
/// the CPU commits, step for step, for both families; where they part, the two choices must
/// have been a near-tie on the CPU.
#[test]
fn greedy_decoding_on_the_gpu_follows_the_cpu() {
    if gpu().is_none() {
        return;
    }
    for (file, family) in [("llada-tiny-F32", Family::Llada), ("dream-tiny-F32", Family::Dream)] {
        let mut gpu_model = cuda_model(file).unwrap();
        let gguf = Arc::new(GgufFile::open(data(&format!("models/{file}.gguf"))).unwrap());
        let mask = dllm::tokenizer::Tokenizer::from_gguf(&gguf).unwrap().special.mask.unwrap();
        let mut cpu = CpuModel::load(gguf).unwrap();
        let special = SpecialTokens::new(mask, None, None);
        let params = GenerateParams {
            gen_length: 32,
            steps: 32,
            block_length: 32,
            early_stop: false,
            temperature: 0.0,
            top_p: None,
            ..GenerateParams::defaults_for(family)
        };
        let prompt: Vec<u32> = read_i32(&format!("canvases/{}_c17.i32", &file[..file.len() - 4]))[..8].to_vec();
        let steps = |m: &mut dyn Forward| {
            let mut canvases = Vec::new();
            generate(m, &prompt, &params, special.clone(), &mut |s| {
                canvases.push(s.canvas.to_vec());
                true
            })
            .unwrap();
            canvases
        };
        let (on_gpu, on_cpu) = (steps(&mut gpu_model), steps(&mut cpu));
        assert_eq!(on_gpu.len(), on_cpu.len(), "{file}");
        let shift = cpu.config().shift_logits;
        let rule = match family {
            Family::Llada => RowRule::LladaGreedy { f64: false },
            Family::Dream => {
                RowRule::Dream { temperature: 0.0, top_p: None, top_k: None, confidence: params.alg.confidence() }
            }
            Family::Rnd1 => unreachable!("the reference traces are LLaDA's and Dream's"),
        };
        for (i, (a, b)) in on_gpu.iter().zip(&on_cpu).enumerate() {
            if a != b {
                let before = if i == 0 { &on_cpu[0] } else { &on_cpu[i - 1] };
                let changed = |c: &[u32]| c.iter().zip(before).position(|(x, y)| x != y);
                let positions: Vec<usize> = [changed(a), changed(b)].into_iter().flatten().collect();
                let rows: Vec<usize> = positions.iter().map(|&j| if shift { j.saturating_sub(1) } else { j }).collect();
                let mut logits = Vec::new();
                cpu.forward(before, &rows, &mut logits).unwrap();
                let n_vocab = cpu.config().n_vocab;
                let conf: Vec<f64> = logits
                    .chunks_exact(n_vocab)
                    .map(|r| choose_row(&rule, &mut r.to_vec(), 0.0, &mut RuleScratch::default()).1)
                    .collect();
                assert!(
                    conf.len() == 2 && (conf[0] - conf[1]).abs() < 1e-3 * conf[0].abs().max(1.0),
                    "{file} step {i}: GPU and CPU differ without a near-tie ({conf:?})"
                );
                eprintln!("{file} step {i}: a near-tie ({conf:?}) chose differently; the runs part here");
                break;
            }
        }
    }
}
