//! The shape of the workspace, checked where the compiler cannot: each layer's crate names only
//! the crates its layer may stand on (Cargo refuses a loop, not a wrong direction), `unsafe`
//! lives in the two modules that declare it, and every file says what it is for.
//!
//! docs/architecture.md draws the same layers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each layer's crate and the crates it may name. A crate below never names a crate above:
/// observation never names a decision, the pair test never names a front end.
const MAY_NAME: &[(&str, &[&str])] = &[
    ("output", &[]),
    ("nccl", &[]),
    ("observe", &["nccl"]),
    ("decide", &["nccl", "observe"]),
    ("postmortem", &["nccl", "observe", "output"]),
    ("pid1", &["output", "postmortem"]),
    ("pairtest", &["decide", "nccl", "observe", "output"]),
];

/// The only files allowed `unsafe`: the ibverbs FFI fence and the raw process system calls.
const UNSAFE_FILES: &[&str] = &["crates/observe/src/verbs/ffi.rs", "crates/pid1/src/sys.rs"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read source folder") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(path relative to the workspace, text)` for every source file of every crate, sorted.
fn sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    for (name, _) in MAY_NAME {
        rust_files(&root().join("crates").join(name).join("src"), &mut files);
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(root()).expect("under the workspace").to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(&p).expect("read source"))
        })
        .collect()
}

/// The workspace crates a crate's manifest depends on: `nw-observe = { path = "../observe" }`.
fn named_crates(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nw-"))
        .filter_map(|rest| rest.split([' ', '=', '.']).next())
        .map(str::to_owned)
        .collect()
}

fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")).map(|(i, l)| (i + 1, l))
}

#[test]
fn each_layer_names_only_the_layers_below_it() {
    let allowed: BTreeMap<&str, &[&str]> = MAY_NAME.iter().copied().collect();
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let dir = entry.expect("dir entry").path();
        let name = dir.file_name().expect("name").to_string_lossy().into_owned();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("crate manifest");
        let Some(may) = allowed.get(name.as_str()) else {
            wrong.push(format!("crates/{name}: a crate this test does not place in a layer (MAY_NAME)"));
            continue;
        };
        for dep in named_crates(&manifest) {
            if !may.contains(&dep.as_str()) {
                wrong.push(format!("crates/{name} names nw-{dep}, which its layer must not stand on"));
            }
        }
        seen.push(name);
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
    assert_eq!(seen.len(), MAY_NAME.len(), "crates found: {seen:?}");
}

#[test]
fn the_manifest_reader_reads_dependencies() {
    let m = "[dependencies]\nnw-nccl = { path = \"../nccl\" }\nnw-observe.workspace = true\nlog.workspace = true\n";
    assert_eq!(named_crates(m), vec!["nccl", "observe"]);
}

#[test]
fn unsafe_only_in_the_two_fenced_modules() {
    let mut wrong = Vec::new();
    for (rel, text) in sources() {
        let allowed = UNSAFE_FILES.contains(&rel.as_str());
        for (n, line) in code_lines(&text) {
            let uses_unsafe = line.contains("unsafe {") || line.contains("unsafe fn") || line.contains("unsafe impl");
            if uses_unsafe && !allowed {
                wrong.push(format!("{rel}:{n}: {}", line.trim()));
            }
            if line.contains("allow(unsafe_code)") {
                // Allowed only on the `mod` line of a fenced module.
                let next = text.lines().nth(n).unwrap_or("");
                let names_fenced = UNSAFE_FILES.iter().any(|f| {
                    let stem = f.rsplit('/').next().unwrap_or(f).trim_end_matches(".rs");
                    next.trim() == format!("pub mod {stem};") || next.trim() == format!("mod {stem};")
                });
                if !names_fenced || !line.trim_start().starts_with("#[") {
                    wrong.push(format!("{rel}:{n}: allow(unsafe_code) outside the fenced modules' mod lines"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "unsafe outside {UNSAFE_FILES:?}:\n{}", wrong.join("\n"));
    // And each crate root denies it for everything else.
    let mut roots = vec![root().join("src/main.rs"), root().join("src/lib.rs")];
    roots.extend(MAY_NAME.iter().map(|(name, _)| root().join("crates").join(name).join("src/lib.rs")));
    for path in roots {
        let text = std::fs::read_to_string(&path).expect("crate root");
        assert!(text.contains("#![deny(unsafe_code)]"), "{} must deny unsafe_code", path.display());
    }
}

#[test]
fn every_file_says_what_it_is_for() {
    let missing: Vec<String> =
        sources().into_iter().filter(|(_, text)| !text.starts_with("//!")).map(|(rel, _)| rel).collect();
    assert!(missing.is_empty(), "no //! header:\n{}", missing.join("\n"));
}
