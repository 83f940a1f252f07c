mod cli;

fn main() {
    if let Err(e) = cli::main() {
        // The reader of our output went away (`dllm inspect X | head -1`): nothing to say.
        if cli::is_closed_pipe(&e) {
            std::process::exit(0);
        }
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
