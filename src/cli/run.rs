//! `dllm run`: generate an answer with the model's official sampler.

use super::load_args::FinishPackCache;
use super::output::{OutputFile, outln};
use std::io::Write;
use std::path::PathBuf;

use dllm::engine::{Event, ModelFile, Prompt};
use dllm::export::{RunRecord, html_page};

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
    #[command(flatten)]
    params: super::param_args::ParamArgs<super::param_args::Official>,
    #[command(flatten)]
    load: super::load_args::LoadArgs,
    /// Animate the canvas in the terminal (on stderr)
    #[arg(long)]
    visual: bool,
    /// Write one JSON line per step, then a final line, to FILE
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write the run as a self-contained HTML page that replays it step by step, to FILE
    #[arg(long)]
    html: Option<PathBuf>,
    /// Print the engine's plan of the run (schedule, commit and token rules, cache, steps) as
    /// JSON and exit without running it
    #[arg(long)]
    dry_run: bool,
}

impl Args {
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
    // Everything that can be checked without the weights is, before they load.
    let options = args.load.options();
    options.check()?;
    let file = ModelFile::open(&model)?;
    let params = args.params.apply(file.config().family, file.defaults())?;
    file.check(&params)?;
    let asked = args.prompt()?;
    let mut trace = args.trace.as_ref().map(|p| OutputFile::create(p, "the trace", &model)).transpose()?;
    let html = args.html.as_ref().map(|p| OutputFile::create(p, "the HTML page", &model)).transpose()?;
    let session = file.load(options, &|_| {})?;
    let _finish_cache = FinishPackCache(&session);
    let info = session.info();
    let prompt = session.prompt_ids(&asked)?;
    if args.dry_run {
        outln!("{}", serde_json::to_string_pretty(&session.plan(&params, prompt.len())?)?);
        return Ok(());
    }
    let tk = session.tokenizer();
    let mask = info.special.mask;
    let prompt_len = prompt.len();
    let (mut initial, mut steps) = (Vec::new(), Vec::new());
    let generation = session.generate(prompt, params)?;
    let mut trace_error = None;
    let finished = generation.wait_events(|event| {
        let step = match event {
            Event::Started(started) => {
                initial.clone_from(&started.initial);
                return;
            }
            Event::Step(step) => step,
            Event::Done(_) | Event::Failed(_) => return,
        };
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
            let cells = tk.canvas_text(&step.canvas[prompt_len..], mask).replace('\n', "\u{21b5}");
            eprint!("\x1b[2J\x1b[Hstep {}\n\n{cells}\n", step.index + 1);
        }
    })?;
    if let Some(mut w) = trace.take() {
        let line = serde_json::json!({
            "done": true,
            "ids": finished.generated.canvas,
            "text": finished.text,
            "steps": finished.generated.steps,
        });
        if let Err(e) = writeln!(w, "{line}") {
            trace_error.get_or_insert(e);
        }
        if let Some(e) = trace_error {
            anyhow::bail!("writing the trace failed: {e}");
        }
        w.finish()?;
    }
    if let (Some(mut file), Some(path)) = (html, &args.html) {
        let title = args.prompt.as_deref().unwrap_or("dllm run");
        let record = RunRecord { title, prompt_len, mask, initial: &initial, steps: &steps };
        file.write_all(html_page(tk, &record).as_bytes())
            .map_err(|e| anyhow::anyhow!("cannot write the HTML page {}: {e}", path.display()))?;
        file.finish()?;
        eprintln!("[replay page written to {}]", path.display());
    }
    outln!("{}", finished.text);
    let g = &finished.generated;
    eprintln!(
        "[{} steps{}, {:.0} ms, {:.1} ms/step]",
        g.steps,
        if g.stopped_early { " (early stop)" } else { "" },
        finished.total_ms,
        finished.total_ms / g.steps.max(1) as f64
    );
    Ok(())
}
