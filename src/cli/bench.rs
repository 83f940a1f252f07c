//! `dllm bench`: ms per step, tokens/s, startup, peak RSS, forward/sampling split and the
//! efficiency against the machine's int8 peak, all measured in one run.

use super::load_args::FinishPackCache;
use super::output::{OutputFile, outln};
use std::path::PathBuf;
use std::time::Instant;

use dllm::bench::{BenchResult, Machine, Settings, Stats, cpu_name, forward_macs, peak_rss_bytes};
use dllm::cpu::{active_isa, cpu_flags, int8_peak};
use dllm::decoding::GenerateParams;
use std::io::Write;

use dllm::engine::ModelFile;
use dllm::model::Family;
use dllm::quant::GgmlType;

use super::param_args::{Defaults, ParamArgs};

/// What a benchmark run does unless told otherwise: 128 tokens in 32 steps, blocks of 32,
/// greedy, every step (no early stop), so that runs compare.
struct Protocol;

impl Defaults for Protocol {
    fn for_family(family: Family) -> GenerateParams {
        GenerateParams {
            gen_length: 128,
            steps: 32,
            block_length: match family {
                Family::Llada => 32,
                Family::Dream | Family::Rnd1 => 128,
            },
            temperature: 0.0,
            top_p: None,
            early_stop: false,
            ..GenerateParams::defaults_for(family)
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// GGUF model file
    #[arg(short, long)]
    model: PathBuf,
    /// Prompt length in tokens (ordinary tokens, no template)
    #[arg(long, default_value_t = 20)]
    prompt_tokens: usize,
    #[command(flatten)]
    params: ParamArgs<Protocol>,
    #[command(flatten)]
    load: super::load_args::LoadArgs,
    /// Generations to time
    #[arg(long, default_value_t = 3, value_parser = runs)]
    runs: usize,
    /// Also write the result as JSON to FILE
    #[arg(long)]
    json: Option<PathBuf>,
}

/// At least one run (the statistics need one), at most a thousand.
fn runs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n @ 1..=1000) => Ok(n),
        _ => Err(format!("'{s}': give 1 to 1000 runs")),
    }
}

pub fn run(args: Args, process_start: Instant) -> anyhow::Result<()> {
    let options = args.load.options();
    options.check()?;
    let file = ModelFile::open(&args.model)?;
    file.check(&args.params.apply(file.config().family, file.defaults())?)?;
    let mut json = args.json.as_ref().map(|p| OutputFile::create(p, "the JSON result", &args.model)).transpose()?;
    let session = file.load(options, &|_| {})?;
    let _finish_cache = FinishPackCache(&session);
    let startup_ms = process_start.elapsed().as_secs_f64() * 1e3;
    let info = session.info().clone();
    let c = &info.config;
    // Ordinary tokens from the middle of the vocabulary: the content does not change the cost.
    let prompt: Vec<u32> = (0..args.prompt_tokens).map(|i| (1000 + 37 * i) as u32 % c.n_vocab as u32).collect();
    let params = args.params.apply(c.family, &Protocol::for_family(c.family))?;
    let (mut step_ms, mut forward_ms, mut sample_ms, mut run_s) = (vec![], vec![], vec![], vec![]);
    let (mut full_pass_ms, mut cached_pass_ms, mut steps_run) = (vec![], vec![], vec![]);
    let mut macs = 0.0;
    for run in 0..args.runs {
        let start = Instant::now();
        let finished = session.generate(prompt.clone(), params.clone())?.wait(|e| {
            step_ms.push(e.forward_ms + e.sample_ms);
            forward_ms.push(e.forward_ms);
            sample_ms.push(e.sample_ms);
            if e.forwards > 0 {
                if e.cached { &mut cached_pass_ms } else { &mut full_pass_ms }.push(e.forward_ms / e.forwards as f64);
            }
            if run == 0 {
                // A cached pass runs its window only (its attention, over the whole canvas, is
                // counted as the window's); the LM head runs the rows the sampler asked for.
                macs += forward_macs(c, e.window.len(), e.logit_rows) * e.forwards as f64;
            }
        })?;
        run_s.push(start.elapsed().as_secs_f64());
        steps_run.push(finished.generated.steps as f64);
        eprintln!("run {}: {} steps in {:.0} ms", run + 1, finished.generated.steps, run_s[run] * 1e3);
    }
    let threads = info.threads;
    // The peak of the device that ran the pass: the tensor cores', or the CPU's int8 SIMD.
    let (isa, peak) = match &info.gpu {
        Some(gpu) => (format!("cuda {}", gpu.arch()), dllm::cuda::int8_peak(gpu)?),
        None => (active_isa().name().to_owned(), int8_peak(active_isa(), threads, 1.0)),
    };
    // On a GPU, the GEMM alone on the model's projection shapes (as a Q4_K_M file types them)
    // at canvas sizes from 128 to 600 rows, against the same peak.
    let gemm = match &info.gpu {
        Some(gpu) => {
            let (d, kv, ff) = (c.n_embd, c.n_head_kv * c.head_dim, c.n_ff);
            let shapes =
                [(GgmlType::Q4_K, d, d), (GgmlType::Q4_K, d, kv), (GgmlType::Q4_K, d, ff), (GgmlType::Q6_K, ff, d)];
            Some(dllm::cuda::gemm_rates(gpu, &shapes, &[128, 148, 256, 512, 600])?)
        }
        None => None,
    };
    let forward = Stats::of(&forward_ms);
    let macs_per_step = macs / steps_run[0].max(1.0);
    let forward_rate = macs_per_step / (forward.median / 1e3);
    let result = BenchResult {
        machine: Machine {
            cpu: cpu_name(),
            flags: cpu_flags().iter().map(|s| s.to_string()).collect(),
            isa: isa.clone(),
            threads,
            gpu: info.gpu.as_ref().map(|g| g.name.clone()),
        },
        commit: git_commit(),
        settings: Settings {
            model: args.model.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
            model_bytes: info.file_bytes,
            prompt_tokens: args.prompt_tokens,
            gen_tokens: params.gen_length,
            steps: params.steps,
            block: params.block_length,
            runs: args.runs,
            threshold: params.threshold,
            cache: params.cache,
        },
        ms_per_step: Stats::of(&step_ms),
        forward_ms: forward.clone(),
        sample_ms: Stats::of(&sample_ms),
        tokens_per_s: params.gen_length as f64 / Stats::of(&run_s).median,
        startup_ms,
        weights: Some(match info.widened {
            true => format!("{}, wide Q4_K", info.prepared.short()),
            false => info.prepared.short().to_owned(),
        }),
        peak_rss_bytes: peak_rss_bytes().unwrap_or(0),
        int8_peak_macs_per_s: peak,
        macs_per_step,
        forward_macs_per_s: forward_rate,
        efficiency: forward_rate / peak,
        full_pass_ms: (!full_pass_ms.is_empty()).then(|| Stats::of(&full_pass_ms)),
        cached_pass_ms: (!cached_pass_ms.is_empty()).then(|| Stats::of(&cached_pass_ms)),
        steps_per_run: Some(Stats::of(&steps_run).median),
        ms_per_token: Some(Stats::of(&run_s).median * 1e3 / params.gen_length as f64),
        gemm,
    };
    outln!("model        {} ({:.2} GB)", result.settings.model, info.file_bytes as f64 / 1e9);
    outln!("machine      {} [{}], {} x{}", result.machine.cpu, result.machine.flags.join(" "), isa, threads);
    let s = &result.ms_per_step;
    outln!("ms/step      median {:.1}, min {:.1}, max {:.1}", s.median, s.min, s.max);
    outln!("split        forward {:.1} ms, sampling {:.2} ms (median)", forward.median, result.sample_ms.median);
    outln!("tokens/s     {:.2}", result.tokens_per_s);
    let wide = if info.widened { ", Q4_K weights widened to a byte each" } else { "" };
    outln!("startup      {:.0} ms (process start to loaded model; {}{wide})", startup_ms, info.prepared);
    outln!(
        "peak RSS     {:.2} GB ({:.2}x the file)",
        result.peak_rss_bytes as f64 / 1e9,
        result.peak_rss_bytes as f64 / info.file_bytes as f64
    );
    if let Some(gpu) = &info.gpu {
        outln!("device       {} ({})", gpu.name, info.device);
    }
    outln!("int8 peak    {:.1} G multiply-adds/s ({} x{})", peak / 1e9, isa, threads);
    outln!("forward      {:.1} G multiply-adds/s = {:.1}% of peak", forward_rate / 1e9, 100.0 * result.efficiency);
    let pass = |s: &Option<Stats>| s.as_ref().map_or("-".to_owned(), |s| format!("{:.1}", s.median));
    outln!(
        "passes       {:.0} steps per run; full {} ms, cached {} ms (median); {:.1} ms per generated token",
        result.steps_per_run.unwrap_or(0.0),
        pass(&result.full_pass_ms),
        pass(&result.cached_pass_ms),
        result.ms_per_token.unwrap_or(0.0)
    );
    for g in result.gemm.iter().flatten() {
        outln!(
            "gemm         {} {}x{} at {} rows: {:.0} G multiply-adds/s = {:.1}% of peak",
            g.ty,
            g.n_in,
            g.n_out,
            g.rows,
            g.macs_per_s / 1e9,
            100.0 * g.macs_per_s / peak
        );
    }
    if let (Some(mut out), Some(path)) = (json.take(), &args.json) {
        writeln!(out, "{}", serde_json::to_string_pretty(&result)?)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        out.finish()?;
    }
    Ok(())
}

fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git").args(["rev-parse", "--short", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
