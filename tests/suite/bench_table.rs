//! The README's benchmark tables are rendered from the result files under benches/results; this
//! fails when they disagree. `UPDATE_README=1 cargo test --test suite bench_table` rewrites them.

use dllm::bench::{BenchResult, render_decoding_table, render_gpu_gemm_table, render_table};

/// Each table sits between a start and an end marker.
const TABLES: [(&str, &str); 5] = [
    (
        "<!-- bench-table:start (generated from benches/results by tests/suite/bench_table.rs) -->\n",
        "<!-- bench-table:end -->",
    ),
    (
        "<!-- decoding-table:start (generated from benches/results by tests/suite/bench_table.rs) -->\n",
        "<!-- decoding-table:end -->",
    ),
    (
        "<!-- gemm-table:start (generated from benches/results by tests/suite/bench_table.rs) -->\n",
        "<!-- gemm-table:end -->",
    ),
    (
        "<!-- llama-cpp-table:start (generated from benches/results by tests/suite/bench_table.rs) -->\n",
        "<!-- llama-cpp-table:end -->",
    ),
    (
        "<!-- gpu-gemm-table:start (generated from benches/results by tests/suite/bench_table.rs) -->\n",
        "<!-- gpu-gemm-table:end -->",
    ),
];

/// What `scripts/compare-llama-cpp.sh` keeps of a llama-diffusion-cli run, with the name of the
/// `dllm bench` result of the same run.
#[derive(serde::Deserialize)]
struct LlamaCppResult {
    version: String,
    threads: usize,
    canvas: usize,
    steps: usize,
    ms_per_step: f64,
    startup_ms: f64,
    peak_rss_bytes: u64,
    dllm_result: String,
}

const LLAMA_CPP_SUFFIX: &str = "-llama-cpp.json";

#[test]
fn readme_table_matches_result_files() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut files: Vec<_> = std::fs::read_dir(format!("{root}/benches/results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let (llama_cpp, files): (Vec<_>, Vec<_>) =
        files.into_iter().partition(|p| p.file_name().unwrap().to_string_lossy().ends_with(LLAMA_CPP_SUFFIX));
    assert!(!files.is_empty(), "benches/results holds no result");
    let results: Vec<(String, BenchResult)> = files
        .iter()
        .map(|p| {
            let r = serde_json::from_str(&std::fs::read_to_string(p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), r)
        })
        .collect();
    let readme_path = format!("{root}/README.md");
    let mut readme = std::fs::read_to_string(&readme_path).unwrap();
    let gemm = render_gemm_table(&format!("{root}/benches/results"));
    let vs_llama_cpp = render_llama_cpp_table(&llama_cpp, &results);
    for ((start_marker, end_marker), table) in TABLES.iter().zip([
        render_table(&results),
        render_decoding_table(&results),
        gemm,
        vs_llama_cpp,
        render_gpu_gemm_table(&results),
    ]) {
        let start = readme.find(start_marker).expect("README has the table start marker") + start_marker.len();
        let end = readme.find(end_marker).expect("README has the table end marker");
        if std::env::var_os("UPDATE_README").is_some() {
            readme = format!("{}{table}{}", &readme[..start], &readme[end..]);
            continue;
        }
        assert_eq!(
            &readme[start..end],
            table,
            "README table is stale: run UPDATE_README=1 cargo test --test suite bench_table"
        );
    }
    if std::env::var_os("UPDATE_README").is_some() {
        std::fs::write(&readme_path, readme).unwrap();
    }
}

/// dllm against llama.cpp's diffusion CLI, one row per `*-llama-cpp.json` and the dllm result
/// measured in the same run (`scripts/compare-llama-cpp.sh`).
fn render_llama_cpp_table(files: &[std::path::PathBuf], results: &[(String, BenchResult)]) -> String {
    let mut t = String::from(
        "| result files | model | threads, canvas, steps | dllm ms/step | llama.cpp ms/step | dllm speed-up | startup dllm / llama.cpp | peak RSS dllm / llama.cpp | llama.cpp |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let l: LlamaCppResult =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (_, d) = results
            .iter()
            .find(|(f, _)| *f == l.dllm_result)
            .unwrap_or_else(|| panic!("{name}: its dllm result {} is not in benches/results", l.dllm_result));
        let s = &d.settings;
        assert_eq!(
            (d.machine.threads, s.prompt_tokens + s.gen_tokens, s.steps),
            (l.threads, l.canvas, l.steps),
            "{name}: the two runs differ in threads, canvas or steps"
        );
        let gb = |b: u64| b as f64 / 1e9;
        t.push_str(&format!(
            "| {name}, {} | {} | {} x{}, {} tokens, {} steps | {:.0} | {:.0} | {:.2}x | {:.2} s / {:.2} s | {:.2} GB / {:.2} GB | {} |\n",
            l.dllm_result,
            s.model,
            d.machine.isa,
            l.threads,
            l.canvas,
            l.steps,
            d.ms_per_step.median,
            l.ms_per_step,
            l.ms_per_step / d.ms_per_step.median,
            d.startup_ms / 1e3,
            l.startup_ms / 1e3,
            gb(d.peak_rss_bytes),
            gb(l.peak_rss_bytes),
            l.version.trim_start_matches("version: "),
        ));
    }
    t
}

/// The GEMM table from `cargo bench --bench gemm` outputs kept as `gemm-*.txt`: for each path,
/// canvas rows and shape, the fastest sample's multiply-adds per second and its fraction of the
/// path's int8 peak printed at the top of the same run.
fn render_gemm_table(dir: &str) -> String {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("gemm-") && name.ends_with(".txt")
        })
        .collect();
    files.sort();
    let mut t = String::from(
        "| result file | path | rows | shape | G multiply-adds/s (fastest) | of the path's peak |\n|---|---|---|---|---|---|\n",
    );
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut peaks = std::collections::HashMap::new();
        let (mut path, mut rows, mut shape) = (String::new(), String::new(), None::<String>);
        for line in text.lines() {
            // "int8 peak, avx2 x2: 173.5 G multiply-adds/s"
            if let Some(rest) = line.strip_prefix("int8 peak, ") {
                let (isa, value) = rest.split_once(' ').unwrap();
                let g: f64 = value.split(": ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
                peaks.insert(isa.to_owned(), g);
                continue;
            }
            // Tree rows: "├─ avx2", "├─ 148", "├─ llada.attn_qkvo 4096x4096   18.78 ms ...", then
            // the throughput line under a shape.
            let head = line.trim_start_matches([' ', '│']);
            if let Some(label) = head.strip_prefix("├─ ").or_else(|| head.strip_prefix("╰─ ")) {
                let words: Vec<&str> = label.split('│').next().unwrap().split_whitespace().collect();
                match words.as_slice() {
                    [p] if p.chars().all(|c| c.is_ascii_alphanumeric()) && p.parse::<usize>().is_err() => {
                        path = p.to_string()
                    }
                    [r] if r.parse::<usize>().is_ok() => rows = r.to_string(),
                    [s, dims, ..] if dims.contains('x') => shape = Some(format!("{s} {dims}")),
                    _ => {}
                }
            } else if let Some(s) = shape.take() {
                let g: f64 = head.split_whitespace().next().unwrap().parse().unwrap();
                assert!(head.contains("Gitem/s"), "{name}: no throughput under {s}: {line}");
                let peak = peaks[&path];
                t.push_str(&format!("| {name} | {path} | {rows} | {s} | {g:.1} | {:.0}% |\n", 100.0 * g / peak));
            }
        }
    }
    t
}

/// A GPU result's GEMM rates appear as fractions of the peak measured in the same run.
#[test]
fn gpu_gemm_rates_render_against_their_runs_peak() {
    let root = env!("CARGO_MANIFEST_DIR");
    let file = format!("{root}/benches/results/cpu-llada8b-4L-Q4_K_M-avx512vnni-x2.json");
    let mut r: BenchResult = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert!(r.gemm.is_none(), "CPU results carry no GPU GEMM rates");
    assert!(render_gpu_gemm_table(&[("cpu.json".into(), r.clone())]).contains("no GPU result yet"));
    r.machine.gpu = Some("NVIDIA H200".into());
    r.int8_peak_macs_per_s = 1000e9;
    let rate =
        |rows, macs_per_s| dllm::bench::GemmRate { ty: "q4_K".into(), n_in: 4096, n_out: 4096, rows, macs_per_s };
    r.gemm = Some(vec![rate(128, 600e9), rate(600, 812e9)]);
    let table = render_gpu_gemm_table(&[("cuda.json".into(), r)]);
    assert!(table.contains("| cuda.json | NVIDIA H200 | q4_K | 4096 x 4096 | 128 | 600 | 1000 G/s | 60% |"), "{table}");
    assert!(table.contains("| 600 | 812 | 1000 G/s | 81% |"), "{table}");
    assert!(!table.contains("no GPU result yet"), "{table}");
}
