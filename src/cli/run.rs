//! `dllm run`: generate an answer with the model's official sampler.

use std::io::Write;
use std::path::PathBuf;

use dllm::engine::{Prompt, Session, StepEvent};
use dllm::export::{RunRecord, html_page};
use dllm::model::Family;
use dllm::sampler::{DreamAlg, GenerateParams, KvCacheMode, Remasking};

#[derive(clap::Args)]
pub struct Args {
    /// GGUF model file [default: the built-in demo model]
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// The prompt (wrapped in the model's chat template unless --raw)
    #[arg(allow_hyphen_values = true)]
    prompt: Option<String>,
    /// Use these token ids as the prompt, exactly (no template, no BOS)
    #[arg(long, value_delimiter = ',', conflicts_with = "prompt")]
    prompt_ids: Option<Vec<u32>>,
    /// Tokenize the prompt as it is, without the chat template
    #[arg(long)]
    raw: bool,
    /// Tokens to generate [default: LLaDA 128, Dream 512]
    #[arg(long = "gen")]
    gen_length: Option<usize>,
    /// Denoising steps [default: LLaDA 128, Dream 512]
    #[arg(long)]
    steps: Option<usize>,
    /// Block length: LLaDA [default: 32]; Dream with --threshold (the block sampler)
    #[arg(long)]
    block: Option<usize>,
    /// Fast-dLLM threshold decoding: commit every masked position of the block whose
    /// probability reaches T, at least one per step (fewer steps; exact without a cache)
    #[arg(long, value_name = "T")]
    threshold: Option<f64>,
    /// Fast-dLLM K/V cache: none (exact), prefix or dual (faster, approximate) [default: none]
    #[arg(long)]
    cache: Option<KvCacheMode>,
    /// Sampling temperature, 0 = greedy [default: LLaDA 0, Dream 0.2]
    #[arg(long)]
    temperature: Option<f32>,
    /// Dream: origin, maskgit_plus, topk_margin, entropy, or confidence_threshold (with
    /// --threshold: Fast-dLLM's quota sampler) [default: entropy]
    #[arg(long)]
    alg: Option<DreamAlg>,
    /// Dream: temperature of the choice of positions [default: 0]
    #[arg(long)]
    alg_temp: Option<f32>,
    /// LLaDA: low_confidence or random [default: low_confidence]
    #[arg(long)]
    remasking: Option<Remasking>,
    /// LLaDA: classifier-free guidance scale, 0 = off [default: 0]
    #[arg(long)]
    cfg: Option<f32>,
    /// LLaDA: never predict end-of-sequence
    #[arg(long)]
    logits_eos_inf: bool,
    /// LLaDA: the official confidence_eos_eot_inf option
    #[arg(long)]
    confidence_eos_eot_inf: bool,
    /// Dream: nucleus sampling threshold [default: 0.95]
    #[arg(long)]
    top_p: Option<f32>,
    /// Dream: keep only the k most likely tokens
    #[arg(long)]
    top_k: Option<usize>,
    /// Dream: end of the timestep schedule [default: 0.001]
    #[arg(long)]
    eps: Option<f32>,
    /// Seed for every random choice [default: 0]
    #[arg(long)]
    seed: Option<u64>,
    #[command(flatten)]
    load: super::load_args::LoadArgs,
    /// Run every step even when the answer is already final
    #[arg(long)]
    no_early_stop: bool,
    /// Animate the canvas in the terminal (on stderr)
    #[arg(long)]
    visual: bool,
    /// Write one JSON line per step, then a final line, to FILE
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write the run as a self-contained HTML page that replays it step by step, to FILE
    #[arg(long)]
    html: Option<PathBuf>,
}

impl Args {
    /// The engine's parameters: `defaults` (the family's official ones, or the demo model's),
    /// overridden by the flags.
    pub fn params(&self, family: Family, defaults: GenerateParams) -> anyhow::Result<GenerateParams> {
        let mut p = defaults;
        let wrong_family = |flag: &str, other: &str| {
            anyhow::anyhow!("{flag} applies to {other} models; this is a {} model", family.name())
        };
        match family {
            Family::Llada => {
                if self.alg.is_some()
                    || self.alg_temp.is_some()
                    || self.top_p.is_some()
                    || self.top_k.is_some()
                    || self.eps.is_some()
                {
                    return Err(wrong_family("--alg, --alg-temp, --top-p, --top-k and --eps", "Dream"));
                }
            }
            Family::Dream => {
                if self.block.is_some() && self.threshold.is_none() {
                    anyhow::bail!("--block applies to Dream only with --threshold (the block sampler)");
                }
                if self.remasking.is_some() || self.cfg.is_some() || self.logits_eos_inf || self.confidence_eos_eot_inf
                {
                    return Err(wrong_family(
                        "--remasking, --cfg, --logits-eos-inf and --confidence-eos-eot-inf",
                        "LLaDA",
                    ));
                }
            }
        }
        if let Some(v) = self.gen_length {
            p.gen_length = v;
            if family == Family::Dream {
                p.block_length = v;
            }
        }
        p.steps = self.steps.unwrap_or(p.steps);
        p.block_length = self.block.unwrap_or(p.block_length);
        p.temperature = self.temperature.unwrap_or(p.temperature);
        p.alg = self.alg.unwrap_or(p.alg);
        p.alg_temp = self.alg_temp.unwrap_or(p.alg_temp);
        p.remasking = self.remasking.unwrap_or(p.remasking);
        p.cfg_scale = self.cfg.unwrap_or(p.cfg_scale);
        p.logits_eos_inf |= self.logits_eos_inf;
        p.confidence_eos_eot_inf |= self.confidence_eos_eot_inf;
        if self.top_p.is_some() {
            p.top_p = self.top_p;
        }
        if self.top_k.is_some() {
            p.top_k = self.top_k;
        }
        p.eps = self.eps.unwrap_or(p.eps);
        if self.threshold.is_some() {
            p.threshold = self.threshold;
        }
        p.cache = self.cache.unwrap_or(p.cache);
        p.seed = self.seed.unwrap_or(p.seed);
        p.early_stop = !self.no_early_stop;
        Ok(p)
    }

    fn prompt(&self) -> anyhow::Result<Prompt> {
        Ok(match (&self.prompt_ids, &self.prompt) {
            (Some(ids), _) => Prompt::Ids(ids.clone()),
            (None, Some(text)) if self.raw => Prompt::Raw(text.clone()),
            (None, Some(text)) => Prompt::Chat(text.clone()),
            (None, None) => anyhow::bail!("give a prompt, or --prompt-ids"),
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let model = match &args.model {
        Some(path) => path.clone(),
        None => {
            eprintln!("[no -m given: using the built-in demo model, {}]", dllm::demo::ABOUT);
            dllm::demo::path().map_err(anyhow::Error::msg)?
        }
    };
    let session = Session::load(&model, args.load.options())?;
    let info = session.info();
    let family = info.config.family;
    let defaults = if info.name.as_deref() == Some(dllm::demo::NAME) {
        dllm::demo::params()
    } else {
        GenerateParams::defaults_for(family)
    };
    let params = args.params(family, defaults)?;
    let prompt = session.prompt_ids(&args.prompt()?)?;
    let mut trace = match &args.trace {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| anyhow::anyhow!("cannot write trace {}: {e}", path.display()))?,
        )),
        None => None,
    };
    // Created now, so that an unwritable path fails before the run rather than after it.
    let mut html = match &args.html {
        Some(path) => Some(
            std::fs::File::create(path)
                .map_err(|e| anyhow::anyhow!("cannot write the HTML page {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let tk = session.tokenizer();
    let mask = info.special.mask;
    let prompt_len = prompt.len();
    let initial: Vec<u32> = prompt.iter().copied().chain(std::iter::repeat_n(mask, params.gen_length)).collect();
    let mut steps = Vec::new();
    let generation = session.generate(prompt, params)?;
    let mut trace_error = None;
    let finished = generation.wait(|step: &StepEvent| {
        if args.html.is_some() {
            steps.push(step.clone());
        }
        if let Some(w) = trace.as_mut() {
            let line = serde_json::json!({
                "step": step.index,
                "canvas": step.canvas,
                "committed": step.committed.iter().map(|c| c.0).collect::<Vec<_>>(),
                "forwards": step.forwards,
                "window": [step.window.start, step.window.end],
                "pass": if step.forwards == 0 { "none" } else if step.cached { "cached" } else { "full" },
                "ms": step.forward_ms + step.sample_ms,
            });
            if let Err(e) = writeln!(w, "{line}") {
                trace_error.get_or_insert(e);
            }
        }
        if args.visual {
            let cells: String = step.canvas[prompt_len..]
                .iter()
                .map(|&id| if id == mask { "\u{2591}".to_string() } else { tk.piece(id).replace('\n', "\u{21b5}") })
                .collect();
            eprint!("\x1b[2J\x1b[Hstep {}\n\n{cells}\n", step.index + 1);
        }
    })?;
    if let Some(mut w) = trace {
        let line = serde_json::json!({
            "done": true,
            "ids": finished.generated.canvas,
            "text": finished.text,
            "steps": finished.generated.steps,
        });
        writeln!(w, "{line}")?;
        w.flush()?;
    }
    if let Some(e) = trace_error {
        anyhow::bail!("writing the trace failed: {e}");
    }
    if let (Some(file), Some(path)) = (html.as_mut(), &args.html) {
        let title = args.prompt.as_deref().unwrap_or("dllm run");
        let record = RunRecord { title, prompt_len, mask, initial: &initial, steps: &steps };
        file.write_all(html_page(tk, &record).as_bytes())
            .map_err(|e| anyhow::anyhow!("cannot write the HTML page {}: {e}", path.display()))?;
        eprintln!("[replay page written to {}]", path.display());
    }
    println!("{}", finished.text);
    let g = &finished.generated;
    eprintln!(
        "[{} steps{}, {:.0} ms, {:.1} ms/step]",
        g.steps,
        if g.stopped_early { " (early stop)" } else { "" },
        finished.total_ms,
        finished.total_ms / g.steps.max(1) as f64
    );
    super::load_args::finish_pack_cache(&session);
    Ok(())
}
