//! The module map of ARCHITECTURE.md, checked against the source: the library's top-level
//! modules depend only on modules of lower layers, and no two files depend on each other
//! through any chain of references.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first, as ARCHITECTURE.md draws them: a module may use modules of lower
/// layers only (the data flows GGUF -> weights -> backend -> forward -> decoding -> session ->
/// front ends).
const LAYERS: &[&[&str]] = &[
    &["paths", "quant"],
    &["gguf"],
    &["model", "tokenizer", "chat", "summary"],
    &["backend"],
    &["cpu", "cuda"],
    &["forward"],
    &["decoding"],
    &["demo"],
    &["engine", "bench", "hub"],
    &["export", "conversation"],
    &["server"],
    &["app"],
    &["cli"],
];

fn module(path: &[&str]) -> Vec<String> {
    path.iter().map(|s| s.to_string()).collect()
}

/// Every source file's module path (`cpu::kernels::avx2`; `cpu::kernels` for its mod.rs) and
/// its lines of code, comments left out.
fn sources() -> BTreeMap<Vec<String>, Vec<String>> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, Vec<String>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                walk(&path, &[prefix, &[name]].concat(), out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let module = if name == "mod" { prefix.to_vec() } else { [prefix, &[name]].concat() };
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.lines().map(str::trim).filter(|l| !l.starts_with("//")).map(str::to_owned).collect();
                out.insert(module, code);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &[], &mut out);
    out.remove(&module(&["lib"]));
    out.remove(&module(&["main"]));
    out
}

/// The paths a line names from the crate root (`crate::a::b`, `dllm::a::b` in the binary's
/// modules) or from the parent module (`super::a`), as module paths.
fn referenced(module: &[String], line: &str) -> Vec<Vec<String>> {
    // A file's `super` is its parent module (a mod.rs's module is its folder's).
    let parent = module[..module.len() - 1].to_vec();
    let mut found = Vec::new();
    for (marker, base) in [("crate::", Vec::new()), ("dllm::", Vec::new()), ("super::", parent)] {
        for (at, _) in line.match_indices(marker) {
            let before = line[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &line[at + marker.len()..];
            // Lower-case segments, up to the first that is not one whole (a type, a `{` list).
            let mut path = Vec::new();
            for segment in rest.split("::") {
                let ident: String = segment.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if !ident.starts_with(|c: char| c.is_ascii_lowercase()) {
                    break;
                }
                let whole = ident.len() == segment.len();
                path.push(ident);
                if !whole {
                    break;
                }
            }
            found.push([base.clone(), path].concat());
        }
    }
    found
}

/// File-level dependencies: file A uses file B when it names B's module or an item inside it,
/// leaving out a module's own ancestors and descendants (a mod.rs declares and re-exports its
/// children; a child uses what its parent defines).
fn dependencies() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let sources = sources();
    let modules: BTreeSet<Vec<String>> = sources.keys().cloned().collect();
    let mut deps = BTreeMap::new();
    for (module, lines) in &sources {
        let mut uses = BTreeSet::new();
        for line in lines {
            for path in referenced(module, line) {
                // The longest known module the path starts with.
                let Some(target) = (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p))
                else {
                    continue;
                };
                if !target.starts_with(module) && !module.starts_with(&target) {
                    uses.insert(target);
                }
            }
        }
        deps.insert(module.clone(), uses);
    }
    deps
}

#[test]
fn top_level_modules_use_only_lower_layers() {
    let layer_of = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let deps = dependencies();
    let mut wrong = Vec::new();
    for (module, uses) in &deps {
        let Some(from) = layer_of(&module[0]) else {
            wrong.push(format!("{} is in no layer of ARCHITECTURE.md", module[0]));
            continue;
        };
        for target in uses.iter().filter(|t| t[0] != module[0]) {
            let to = layer_of(&target[0]).unwrap_or(usize::MAX);
            if to >= from {
                wrong.push(format!("{} uses {}", module.join("::"), target.join("::")));
            }
        }
    }
    assert!(wrong.is_empty(), "against the layering:\n{}", wrong.join("\n"));
    // The scan sees the references it checks.
    assert!(deps[&module(&["cpu", "backend"])].contains(&module(&["backend"])));
}

#[test]
fn no_files_depend_on_each_other() {
    let deps = dependencies();
    // Depth-first search for a back edge, reporting the cycle it closes.
    fn visit(
        m: &Vec<String>,
        deps: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, bool>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(true) => return None,
            Some(false) => {
                let at = stack.iter().position(|s| s == m).unwrap();
                return Some(stack[at..].iter().chain([m]).map(|s| s.join("::")).collect());
            }
            None => {}
        }
        state.insert(m.clone(), false);
        stack.push(m.clone());
        for next in deps.get(m).into_iter().flatten() {
            if let Some(cycle) = visit(next, deps, state, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        state.insert(m.clone(), true);
        None
    }
    let (mut state, mut stack) = (BTreeMap::new(), Vec::new());
    for m in deps.keys() {
        if let Some(cycle) = visit(m, &deps, &mut state, &mut stack) {
            panic!("a dependency cycle: {}", cycle.join(" -> "));
        }
    }
    // The scan resolves sibling references.
    assert!(deps[&module(&["cpu", "kernels", "avx2_f32"])].contains(&module(&["cpu", "kernels", "scalar_f32"])));
}
