//! The README's benchmark table is rendered from the result files under benches/results; this
//! fails when they disagree. `UPDATE_README=1 cargo test --test suite bench_table` rewrites the table.

use dllm::bench::{BenchResult, render_decoding_table, render_table};

/// Each table sits between a start and an end marker.
const TABLES: [(&str, &str); 2] = [
    (
        "<!-- bench-table:start (generated from benches/results by tests/suite/bench_table.rs) -->\n",
        "<!-- bench-table:end -->",
    ),
    (
        "<!-- decoding-table:start (generated from benches/results by tests/suite/bench_table.rs) -->\n",
        "<!-- decoding-table:end -->",
    ),
];

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
    let readme_path = format!("{root}/README.md");
    let mut readme = std::fs::read_to_string(&readme_path).unwrap();
    for ((start_marker, end_marker), table) in
        TABLES.iter().zip([render_table(&results), render_decoding_table(&results)])
    {
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
