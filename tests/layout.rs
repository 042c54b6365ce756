//! The shape of `src/`, checked: the stages form a pipeline without import loops, `unsafe` lives
//! in the two modules that declare it, and a file past 600 lines says why at its top.
//!
//! Reads the source files as text (no compiler internals): every `crate::<module>` path outside a
//! comment is a dependency of the file's top-level module on `<module>`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The stages from the bottom up. A module may name modules of a lower rank only (and itself):
/// detection never names verification, the plan never names the runner, and so on.
const RANKS: &[(&str, u32)] = &[
    ("msg", 0),
    ("write", 0),
    ("termination", 0),
    ("nccl", 1),
    ("detect", 2),
    ("verbs", 3),
    ("process", 3),
    ("plan", 4),
    ("report", 5),
    ("doctor", 6),
    ("pairtest", 6),
    ("install", 6),
    ("cli", 6),
    ("ping", 7),
    ("health", 7),
    ("gate", 7),
];

/// The pair test's front ends: one rank above the layer, so that none names another (a rank
/// names only lower ranks) and the layer names none of them.
const FRONT_ENDS: &[&str] = &["ping", "gate", "health"];
const PAIR_TEST: &str = "pairtest";

/// The only files allowed `unsafe`: the ibverbs FFI fence and the raw process system calls.
const UNSAFE_FILES: &[&str] = &["verbs/ffi.rs", "process/sys.rs"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(path relative to src/, text)` for every source file, sorted.
fn sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src()).expect("under src").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).expect("read source");
            (rel, text)
        })
        .collect()
}

/// The top-level module a file belongs to: `detect/sysfs.rs` -> `detect`, `plan.rs` -> `plan`.
fn top_module(rel: &str) -> &str {
    rel.split('/').next().map(|s| s.trim_end_matches(".rs")).unwrap_or(rel)
}

fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")).map(|(i, l)| (i + 1, l))
}

/// Every `crate::name` a line names.
fn crate_refs(line: &str) -> Vec<&str> {
    line.match_indices("crate::")
        .filter(|(i, _)| !line[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))
        .map(|(i, m)| {
            let rest = &line[i + m.len()..];
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| !name.is_empty())
        .collect()
}

#[test]
fn stages_only_name_lower_stages() {
    let rank: BTreeMap<&str, u32> = RANKS.iter().copied().collect();
    let mut wrong = Vec::new();
    for (rel, text) in sources() {
        let from = top_module(&rel);
        if from == "main" || from == "lib" || from == "entry" {
            continue; // the roots: lib declares the stages, main wires them, entry starts main
        }
        let Some(&from_rank) = rank.get(from) else {
            wrong.push(format!("{rel}: module {from} has no rank in tests/layout.rs"));
            continue;
        };
        for (n, line) in code_lines(&text) {
            for to in crate_refs(line) {
                match rank.get(to) {
                    _ if to == from => {}
                    Some(&r) if r < from_rank => {}
                    Some(_) => {
                        wrong.push(format!("{rel}:{n}: {from} names {to}, which is not below it: {}", line.trim()))
                    }
                    None => wrong.push(format!("{rel}:{n}: names crate::{to}, which has no rank")),
                }
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken:\n{}", wrong.join("\n"));
}

#[test]
fn the_pair_tests_front_ends_stand_on_it_and_never_on_each_other() {
    let rank: BTreeMap<&str, u32> = RANKS.iter().copied().collect();
    let layer = rank[PAIR_TEST];
    for f in FRONT_ENDS {
        assert!(rank[f] > layer, "{f} must rank above {PAIR_TEST}");
        assert_eq!(rank[f], rank[FRONT_ENDS[0]], "the front ends share one rank, so none may name another");
    }
    // And by the text: no front end names another, the layer names none.
    let mut wrong = Vec::new();
    for (rel, text) in sources() {
        let from = top_module(&rel);
        for (n, line) in code_lines(&text) {
            for to in crate_refs(line) {
                let cross = FRONT_ENDS.contains(&from) && FRONT_ENDS.contains(&to) && to != from;
                let up = from == PAIR_TEST && FRONT_ENDS.contains(&to);
                if cross || up {
                    wrong.push(format!("{rel}:{n}: {from} names {to}: {}", line.trim()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "the pair test's layering broken:\n{}", wrong.join("\n"));
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
    // And the crate root denies it for everything else.
    for root in ["main.rs", "lib.rs"] {
        let text = std::fs::read_to_string(src().join(root)).expect("crate root");
        assert!(text.contains("#![deny(unsafe_code)]"), "{root} must deny unsafe_code");
    }
}

#[test]
fn long_files_say_why() {
    let mut wrong = Vec::new();
    for (rel, text) in sources() {
        let lines = text.lines().count();
        let header: String = text.lines().take_while(|l| l.starts_with("//!")).collect::<Vec<_>>().join("\n");
        if !header.contains("//!") {
            wrong.push(format!("{rel}: no //! header"));
        }
        if lines > 600 && !header.contains("Over 600 lines") {
            wrong.push(format!("{rel}: {lines} lines and no 'Over 600 lines: why' in its header"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reference_scanner_reads_paths() {
    assert_eq!(crate_refs("use crate::detect::{Device, Vars};"), vec!["detect"]);
    assert_eq!(crate_refs("x = crate::plan::gid_prefs(v).0 + crate::msg::X"), vec!["plan", "msg"]);
    assert!(crate_refs("let notcrate::x = 1;").is_empty());
    assert_eq!(top_module("detect/sysfs.rs"), "detect");
    assert_eq!(top_module("plan.rs"), "plan");
}
