//! `dllm inspect MODEL [--json]`

use super::output::outln;
use std::path::PathBuf;

use dllm::cpu::active_isa;
use dllm::cpu::ops::matmul::describe_product;
use dllm::gguf::GgufFile;
use dllm::summary::{Summary, human_bytes, human_count};
use dllm::tokenizer::Tokenizer;

#[derive(clap::Args)]
pub struct Args {
    /// GGUF file to describe (a full model or a vocabulary-only file)
    model: PathBuf,
    /// Print the stable JSON description instead of text
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let gguf = GgufFile::open(&args.model)?;
    let s = Summary::of(&gguf);
    // The tokenizer as the engine builds it, for its end-of-generation set and pre-tokenizer
    // (a file whose tokenizer dllm cannot build still gets described, with the reason instead).
    let tokenizer = s.tokenizer.as_ref().map(|_| Tokenizer::from_gguf(&gguf).map_err(|e| e.to_string()));
    let eog: Result<Vec<(u32, String)>, String> = match &tokenizer {
        Some(Ok(tk)) => Ok(tk.special.eog.iter().map(|&id| (id, tk.piece(id))).collect()),
        Some(Err(e)) => Err(e.clone()),
        None => Ok(Vec::new()),
    };
    let pre_tokenizer = match &tokenizer {
        Some(Ok(tk)) => Some(tk.pre_tokenizer),
        _ => None,
    };
    let isa = active_isa();
    let runs = |ty| describe_product(ty, isa).unwrap_or_else(|| "not supported by dllm".to_owned());
    if args.json {
        let mut j = serde_json::to_value(&s)?;
        j["end_of_generation"] = match &eog {
            Ok(ids) => ids.iter().map(|(id, text)| serde_json::json!({ "id": id, "text": text })).collect(),
            Err(e) => serde_json::json!({ "error": e }),
        };
        j["pre_tokenizer"] = serde_json::to_value(pre_tokenizer)?;
        j["products"] = s.types.iter().map(|t| (t.ty.to_string(), serde_json::Value::from(runs(t.ty)))).collect();
        outln!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    outln!("file:          {} ({})", s.file, human_bytes(s.file_bytes));
    outln!("gguf:          version {}, alignment {}", s.gguf_version, s.alignment);
    outln!("architecture:  {}", s.architecture.as_deref().unwrap_or("(none)"));
    if let Some(name) = &s.name {
        outln!("name:          {name}");
    }
    outln!(
        "parameters:    {} in {} tensors ({})",
        human_count(s.n_params),
        s.tensors.len(),
        human_bytes(s.tensor_bytes)
    );
    if let Some(shift) = s.shift_logits {
        outln!("shift logits:  {shift}");
    }
    if !s.hyperparameters.is_empty() {
        outln!("\nhyperparameters:");
        for (k, v) in &s.hyperparameters {
            outln!("  {k:<36} {v}");
        }
    }
    if let Some(t) = &s.tokenizer {
        let id = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        outln!(
            "\ntokenizer:     {} (pre {}), {} tokens, {} merges",
            t.model.as_deref().unwrap_or("?"),
            t.pre.as_deref().unwrap_or("?"),
            t.n_tokens,
            t.n_merges
        );
        outln!(
            "  bos {}  eos {}  eot {}  pad {}  mask {}  add_bos {}",
            id(t.bos_token_id),
            id(t.eos_token_id),
            id(t.eot_token_id),
            id(t.padding_token_id),
            id(t.mask_token_id),
            t.add_bos_token.map_or("-".into(), |b| b.to_string())
        );
        match &eog {
            Ok(ids) => {
                let shown: Vec<String> = ids.iter().map(|(id, text)| format!("{id} {text}")).collect();
                outln!("  end of generation: {}", if shown.is_empty() { "-".into() } else { shown.join(", ") });
            }
            Err(e) => outln!("  (the tokenizer cannot be built: {e})"),
        }
        if let Some(p) = pre_tokenizer {
            outln!(
                "  pre-tokenizer: {} regexes, merges ignored {}, BOS by default {}, spaces cleaned on detokenizing {}",
                p.regexes.len(),
                p.ignore_merges,
                p.add_bos,
                p.clean_spaces
            );
        }
    }
    outln!("chat template: {}", if s.chat_template { "yes" } else { "no" });
    if !s.tensors.is_empty() {
        outln!("\ntensors:");
        outln!("  {:<32} {:<7} {:<22} {:>12}", "name", "type", "shape", "bytes");
        for t in &s.tensors {
            let shape = format!("{:?}", t.dims);
            outln!("  {:<32} {:<7} {:<22} {:>12}", t.name, t.ty.to_string(), shape, t.n_bytes);
        }
        outln!("\ntotals per type (and how dllm's CPU backend runs its products here):");
        for t in &s.types {
            outln!(
                "  {:<7} {:>4} tensors {:>12} params {:>12}  {}",
                t.ty.to_string(),
                t.tensors,
                human_count(t.params),
                human_bytes(t.bytes),
                runs(t.ty)
            );
        }
    }
    Ok(())
}
