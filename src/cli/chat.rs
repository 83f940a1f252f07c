//! `dllm chat`: a conversation in the terminal, every turn through the model's chat template.
//! Lines starting with `/` are commands: /system TEXT, /reset, /save FILE (.md: Markdown,
//! else JSON), /help, /quit. When prompt and answer no longer fit the context, the oldest
//! turns are dropped, and it says so.

use std::io::Write;
use std::path::PathBuf;

use dllm::conversation::Conversation;
use dllm::engine::{Event, FinalText, ModelFile, Session};

use super::load_args::FinishPackCache;
use super::output::outln;

#[derive(clap::Args)]
pub struct Args {
    /// GGUF model file [default: the built-in demo model]
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// The system prompt to start with
    #[arg(long)]
    system: Option<String>,
    /// Animate each answer's canvas in the terminal (on stderr) as it denoises
    #[arg(long)]
    visual: bool,
    #[command(flatten)]
    params: super::param_args::ParamArgs<super::param_args::Official>,
    #[command(flatten)]
    load: super::load_args::LoadArgs,
}

const HELP: &str = "commands: /system TEXT (set the system prompt), /reset (forget the conversation), /save FILE (.md or .json), /quit";

pub fn run(args: Args) -> anyhow::Result<()> {
    let model = match &args.model {
        Some(path) => path.clone(),
        None => dllm::demo::path().map_err(anyhow::Error::msg)?,
    };
    let options = args.load.options();
    options.check()?;
    let file = ModelFile::open(&model)?;
    let params = args.params.apply(file.config().family, file.defaults())?;
    file.check(&params)?;
    let session = file.load(options, &|_| {})?;
    let _finish_cache = FinishPackCache(&session);
    let mut conversation = Conversation { system: args.system.clone().unwrap_or_default(), ..Default::default() };
    let mut editor = rustyline::DefaultEditor::new()?;
    eprintln!("[{}; {HELP}]", session.info().name.as_deref().unwrap_or("model"));
    loop {
        let line = match editor.readline("you> ") {
            Ok(line) => line,
            Err(rustyline::error::ReadlineError::Eof | rustyline::error::ReadlineError::Interrupted) => break,
            Err(e) => return Err(e.into()),
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line);
        match line.split_once(' ').map_or((line, ""), |(c, rest)| (c, rest.trim())) {
            ("/quit" | "/exit", _) => break,
            ("/help", _) => eprintln!("{HELP}"),
            ("/reset", _) => {
                conversation.turns.clear();
                conversation.title.clear();
                eprintln!("[the conversation is forgotten; the system prompt stays]");
            }
            ("/system", text) => {
                conversation.system = text.to_string();
                eprintln!("[system prompt {}]", if text.is_empty() { "removed" } else { "set" });
            }
            ("/save", "") => eprintln!("[give a file name: /save chat.md or /save chat.json]"),
            ("/save", path) => match conversation.save(std::path::Path::new(path)) {
                Ok(()) => eprintln!("[saved to {path}]"),
                Err(e) => eprintln!("[cannot save to {path}: {e}]"),
            },
            (command, _) if command.starts_with('/') => eprintln!("[unknown command {command}; {HELP}]"),
            _ => {
                conversation.push("user", line);
                match answer(&session, &mut conversation, &params, args.visual) {
                    Ok(text) => conversation.push("assistant", text),
                    Err(e) => {
                        conversation.turns.pop();
                        eprintln!("[error: {e:#}]");
                    }
                }
            }
        }
    }
    Ok(())
}

/// Generates the assistant's next turn, printing its text as it becomes final (the answer's
/// committed prefix), with `--visual` the whole canvas on stderr at every step.
fn answer(
    session: &Session,
    conversation: &mut Conversation,
    params: &dllm::decoding::GenerateParams,
    visual: bool,
) -> anyhow::Result<String> {
    let info = session.info();
    let room = info.config.context_length.saturating_sub(params.gen_length);
    let (ids, dropped) = session.prompt_encoder().fit(&conversation.messages(), room)?;
    if dropped > 0 {
        conversation.drop_oldest(dropped);
        eprintln!(
            "[the {dropped} oldest turns no longer fit the context of {} tokens and were dropped]",
            info.config.context_length
        );
    }
    let (tk, special, prompt_len) = (session.tokenizer(), &info.special, ids.len());
    let generation = session.generate(ids, params.clone())?;
    let (mut final_text, mut printed, mut stdout_error) = (FinalText::default(), String::new(), None);
    let finished = generation.wait_events(|event| {
        let Event::Step(step) = event else { return };
        let answer = &step.canvas[prompt_len..];
        if visual {
            eprint!("\x1b[2K\r[step {}] {}", step.index + 1, tk.canvas_text(answer, special.mask).replace('\n', " "));
            return;
        }
        let delta = final_text.advance(answer, tk, special);
        if !delta.is_empty() && stdout_error.is_none() {
            let mut out = std::io::stdout().lock();
            if let Err(e) = out.write_all(delta.as_bytes()).and_then(|()| out.flush()) {
                stdout_error = Some(e);
            }
            printed.push_str(&delta);
        }
    })?;
    if let Some(e) = stdout_error {
        return Err(super::output::StdoutError(e).into());
    }
    if visual {
        eprintln!();
    }
    // What the steps printed is a prefix of the answer; the rest arrives with the last step.
    let rest = finished.text.strip_prefix(printed.as_str()).unwrap_or(&finished.text);
    outln!("{rest}");
    Ok(finished.text.trim().to_string())
}
