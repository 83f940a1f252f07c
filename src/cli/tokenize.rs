//! `dllm tokenize -m MODEL [--ids] [--bos] [--special] [--] TEXT`
//!
//! Prints one `id<TAB>piece` line per token. In pieces a backslash, newline, carriage return and
//! tab are written `\\`, `\n`, `\r`, `\t`, so that each token stays on its own line.

use super::output::outln;
use std::path::PathBuf;

use dllm::gguf::GgufFile;
use dllm::tokenizer::{EncodeOptions, Tokenizer};

#[derive(clap::Args)]
pub struct Args {
    /// GGUF file holding the tokenizer (a model or a vocabulary-only file)
    #[arg(short, long)]
    model: PathBuf,
    /// Print only the ids, on one line separated by spaces
    #[arg(long)]
    ids: bool,
    /// Add BOS when the model's tokenizer asks for it (add_special)
    #[arg(long)]
    bos: bool,
    /// Turn control-token text such as <|im_start|> into its single id (parse_special)
    #[arg(long)]
    special: bool,
    /// The text to tokenize (use `--` before text that starts with a dash)
    #[arg(allow_hyphen_values = true)]
    text: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let tk = Tokenizer::from_gguf(&GgufFile::open(&args.model)?)?;
    let ids = tk.encode(&args.text, EncodeOptions { add_special: args.bos, parse_special: args.special })?;
    if args.ids {
        outln!("{}", ids.iter().map(u32::to_string).collect::<Vec<_>>().join(" "));
    } else {
        for id in ids {
            outln!("{id}\t{}", escape(&tk.piece(id)));
        }
    }
    Ok(())
}

/// Escapes the characters that would break the one-token-per-line output.
fn escape(piece: &str) -> String {
    let mut out = String::with_capacity(piece.len());
    for c in piece.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}
