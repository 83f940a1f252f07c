//! The README's benchmark table is rendered from the result files under benches/results; this
//! fails when they disagree. `UPDATE_README=1 cargo test --test bench_table` rewrites the table.

use dllm::bench::{BenchResult, render_table};

const START: &str = "<!-- bench-table:start (generated from benches/results by tests/bench_table.rs) -->\n";
const END: &str = "<!-- bench-table:end -->";

#[test]
fn readme_table_matches_result_files() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut files: Vec<_> = std::fs::read_dir(format!("{root}/benches/results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "benches/results holds no result");
    let results: Vec<(String, BenchResult)> = files
        .iter()
        .map(|p| {
            let r = serde_json::from_str(&std::fs::read_to_string(p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), r)
        })
        .collect();
    let table = render_table(&results);
    let readme_path = format!("{root}/README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let start = readme.find(START).expect("README has the table start marker") + START.len();
    let end = readme.find(END).expect("README has the table end marker");
    if std::env::var_os("UPDATE_README").is_some() {
        std::fs::write(&readme_path, format!("{}{table}{}", &readme[..start], &readme[end..])).unwrap();
        return;
    }
    assert_eq!(&readme[start..end], table, "README table is stale: run UPDATE_README=1 cargo test --test bench_table");
}
