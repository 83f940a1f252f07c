//! Benchmark results: what `dllm bench` measures, the files under benches/results, and the
//! README table rendered from them.

use serde::{Deserialize, Serialize};

pub use crate::cuda::GemmRate;
use crate::decoding::KvCacheMode;
use crate::model::ModelConfig;

/// Multiply-adds of one forward pass over `rows` canvas positions with the LM head on
/// `logit_rows` of them (projections, attention scores and values, output projection; for a
/// mixture of experts, the router and the experts each row runs, not all of them).
pub fn forward_macs(c: &ModelConfig, rows: usize, logit_rows: usize) -> f64 {
    let (d, q, kv) = (c.n_embd as f64, c.q_dim() as f64, c.kv_dim() as f64);
    let n = rows as f64;
    let ffn = match &c.moe {
        None => 3.0 * d * c.n_ff as f64,
        Some(m) => d * m.n_expert as f64 + m.n_expert_used as f64 * 3.0 * d * m.n_ff_exp as f64,
    };
    let projections = n * (d * q * 2.0 + d * kv * 2.0 + ffn);
    let attention = 2.0 * n * n * q;
    c.n_layer as f64 * (projections + attention) + logit_rows as f64 * d * c.n_vocab as f64
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(values: &[f64]) -> Stats {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let median = if v.is_empty() {
            0.0
        } else if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        Stats { median, min: v.first().copied().unwrap_or(0.0), max: v.last().copied().unwrap_or(0.0) }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    pub cpu: String,
    pub flags: Vec<String>,
    pub isa: String,
    pub threads: usize,
    /// The GPU the forward pass ran on, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Settings {
    pub model: String,
    pub model_bytes: u64,
    pub prompt_tokens: usize,
    pub gen_tokens: usize,
    pub steps: usize,
    pub block: usize,
    pub runs: usize,
    /// Fast-dLLM threshold decoding, if on.
    #[serde(default)]
    pub threshold: Option<f64>,
    #[serde(default)]
    pub cache: KvCacheMode,
}

/// One `dllm bench --json` result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchResult {
    pub machine: Machine,
    pub commit: Option<String>,
    pub settings: Settings,
    pub ms_per_step: Stats,
    pub forward_ms: Stats,
    pub sample_ms: Stats,
    pub tokens_per_s: f64,
    /// Process start to a loaded model.
    pub startup_ms: f64,
    /// How the weights were made ready during startup (`Preparation::short`).
    #[serde(default)]
    pub weights: Option<String>,
    pub peak_rss_bytes: u64,
    /// The machine's int8 multiply-add peak on the active ISA and threads, measured in the run.
    pub int8_peak_macs_per_s: f64,
    /// Multiply-adds per step on average, and their rate during the forward passes.
    pub macs_per_step: f64,
    pub forward_macs_per_s: f64,
    /// forward_macs_per_s / int8_peak_macs_per_s.
    pub efficiency: f64,
    /// Forward passes over the whole canvas, and those that ran a window against the K/V cache.
    #[serde(default)]
    pub full_pass_ms: Option<Stats>,
    #[serde(default)]
    pub cached_pass_ms: Option<Stats>,
    /// Steps (= forward passes) per generation, and wall time per generated token.
    #[serde(default)]
    pub steps_per_run: Option<f64>,
    #[serde(default)]
    pub ms_per_token: Option<f64>,
    /// On a GPU: the int8 GEMM alone on the model's projection shapes, at canvas sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gemm: Option<Vec<GemmRate>>,
}

/// The README's GPU GEMM table: each GPU result's products as a fraction of the tensor cores'
/// int8 peak measured in the same run.
pub fn render_gpu_gemm_table(results: &[(String, BenchResult)]) -> String {
    let mut t = String::from(
        "| result file | GPU | weights | n_in x n_out | rows | G multiply-adds/s | int8 peak | fraction of peak |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut any = false;
    for (file, r) in results {
        for g in r.gemm.iter().flatten() {
            any = true;
            t.push_str(&format!(
                "| {file} | {} | {} | {} x {} | {} | {:.0} | {:.0} G/s | {:.0}% |\n",
                r.machine.gpu.as_deref().unwrap_or("?"),
                g.ty,
                g.n_in,
                g.n_out,
                g.rows,
                g.macs_per_s / 1e9,
                r.int8_peak_macs_per_s / 1e9,
                100.0 * g.macs_per_s / r.int8_peak_macs_per_s,
            ));
        }
    }
    if !any {
        t.push_str("| (no GPU result yet: `scripts/gpu-check.sh` writes one) | | | | | | | |\n");
    }
    t
}

impl BenchResult {
    /// Whether the run used Fast-dLLM decoding (threshold or cache).
    pub fn is_fast_decoding(&self) -> bool {
        self.settings.threshold.is_some() || self.settings.cache != KvCacheMode::None
    }
}

/// The README's table of decoding modes: the cost of full and cached passes and of a token.
pub fn render_decoding_table(results: &[(String, BenchResult)]) -> String {
    let mut t = String::from(
        "| result file | model | canvas | threshold, cache | steps per run | full pass ms | cached pass ms | cached / full | ms per token |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (file, r) in results.iter().filter(|(_, r)| r.is_fast_decoding()) {
        let s = &r.settings;
        let ms = |x: &Option<Stats>| x.as_ref().map_or("-".to_owned(), |x| format!("{:.0}", x.median));
        let ratio = match (&r.full_pass_ms, &r.cached_pass_ms) {
            (Some(f), Some(c)) => format!("{:.2}x", c.median / f.median),
            _ => "-".to_owned(),
        };
        t.push_str(&format!(
            "| {file} | {} | {} + {} tokens, block {} | {}, {} | {:.0} | {} | {} | {ratio} | {:.0} |\n",
            s.model,
            s.prompt_tokens,
            s.gen_tokens,
            s.block,
            s.threshold.map_or("none".to_owned(), |t| t.to_string()),
            s.cache.name(),
            r.steps_per_run.unwrap_or(0.0),
            ms(&r.full_pass_ms),
            ms(&r.cached_pass_ms),
            r.ms_per_token.unwrap_or(0.0),
        ));
    }
    t
}

/// The README's CPU benchmark table, one row per result of the official samplers.
pub fn render_table(results: &[(String, BenchResult)]) -> String {
    let mut t = String::from(
        "| result file | model | ISA, threads | canvas | ms/step (median) | forward / sampling ms | tokens/s | startup | peak RSS / file | int8 peak | efficiency |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (file, r) in results.iter().filter(|(_, r)| !r.is_fast_decoding()) {
        let s = &r.settings;
        t.push_str(&format!(
            "| {file} | {} | {} x{} | {} + {} tokens, {} steps, block {} | {:.0} | {:.0} / {:.1} | {:.1} | {:.2} s{} | {:.2} | {:.0} G/s | {:.0}% |\n",
            s.model,
            r.machine.isa,
            r.machine.threads,
            s.prompt_tokens,
            s.gen_tokens,
            s.steps,
            s.block,
            r.ms_per_step.median,
            r.forward_ms.median,
            r.sample_ms.median,
            r.tokens_per_s,
            r.startup_ms / 1e3,
            r.weights.as_ref().map_or(String::new(), |w| format!(" ({w})")),
            r.peak_rss_bytes as f64 / s.model_bytes as f64,
            r.int8_peak_macs_per_s / 1e9,
            r.efficiency * 100.0,
        ));
    }
    t
}

/// Peak resident memory of this process (Linux), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The CPU model name (Linux), if known.
pub fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}
