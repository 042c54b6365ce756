//! README.md's sample outputs are the binary's real output: each block between
//! `<!-- sample: NAME -->` and `<!-- /sample -->` must equal what `scripts/readme-samples.sh NAME`
//! prints when it runs this build's binary on its fixture node (every root in the fixture, a clean
//! environment, a pod's memlock limit and capabilities). A change to a message fails here with a
//! diff and the command that rewrites the blocks.

mod common;

use std::path::Path;
use std::process::Command;

const REGENERATE: &str = "cargo build && bash scripts/readme-samples.sh --update";

/// The script's exit status when this machine cannot give the samples a pod's limits.
const CANNOT_HERE: i32 = 77;

/// Each `(name, text)` sample block of `readme`: the body of the fenced block between the markers.
fn blocks(readme: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.trim().strip_prefix("<!-- sample: ").and_then(|r| r.strip_suffix(" -->")) else {
            continue;
        };
        let mut body = String::new();
        let mut fenced = false;
        for inner in lines.by_ref() {
            if inner.trim() == "<!-- /sample -->" {
                break;
            }
            if inner.starts_with("```") {
                fenced = !fenced;
            } else if fenced {
                body.push_str(inner);
                body.push('\n');
            }
        }
        found.push((name.to_string(), body));
    }
    found
}

fn script() -> Command {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new("bash");
    cmd.current_dir(root).arg(root.join("scripts/readme-samples.sh")).arg("--bin").arg(common::BIN);
    // The script's own defaults must not differ from the test's: only what it needs is passed on.
    cmd.env_clear().env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
    cmd
}

/// A line diff of `want` (README) against `got` (the binary), `-` and `+` as `diff -u` marks them.
fn diff(want: &str, got: &str) -> String {
    let a: Vec<&str> = want.lines().collect();
    let b: Vec<&str> = got.lines().collect();
    // Longest common subsequence, from the end, so the walk below goes forwards.
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out += &format!("  {}\n", a[i]);
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out += &format!("- {}\n", a[i]);
            i += 1;
        } else {
            out += &format!("+ {}\n", b[j]);
            j += 1;
        }
    }
    out
}

#[test]
fn readme_samples_are_the_binarys_output() {
    if !common::runner().is_empty() {
        common::skip("the samples are the x86_64 binary's: the fixture image holds x86_64 libraries");
        return;
    }
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("README.md");
    let in_readme = blocks(&readme);

    let listed = common::output_within(script().arg("--list"), common::DEADLINE);
    assert!(listed.status.success(), "readme-samples.sh --list: {}", String::from_utf8_lossy(&listed.stderr));
    let names: Vec<String> = String::from_utf8_lossy(&listed.stdout).lines().map(String::from).collect();
    let mut in_readme_names: Vec<&str> = in_readme.iter().map(|(n, _)| n.as_str()).collect();
    in_readme_names.sort_unstable();
    let mut script_names: Vec<&str> = names.iter().map(String::as_str).collect();
    script_names.sort_unstable();
    assert_eq!(
        in_readme_names, script_names,
        "README.md's sample blocks and scripts/readme-samples.sh --list name different samples"
    );

    let mut stale = Vec::new();
    for (name, want) in &in_readme {
        let out = common::output_within(script().arg(name), common::DEADLINE);
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(CANNOT_HERE) {
            common::skip(err.trim());
            return;
        }
        assert!(out.status.success(), "scripts/readme-samples.sh {name} failed ({:?}):\n{err}", out.status);
        let got = String::from_utf8_lossy(&out.stdout);
        if got != *want {
            stale.push(format!("sample {name} (- README.md, + the binary):\n{}", diff(want, &got)));
        }
    }
    assert!(
        stale.is_empty(),
        "README.md's samples differ from the binary's output:\n\n{}\nIf the new output is right, rewrite the blocks: {REGENERATE}",
        stale.join("\n")
    );
}

#[test]
fn sample_blocks_are_read_between_their_markers() {
    let text = "intro\n<!-- sample: one -->\n```\na\nb\n```\n<!-- /sample -->\n```\nnot a sample\n```\n\
                <!-- sample: two -->\n```text\nc\n```\n<!-- /sample -->\n";
    assert_eq!(blocks(text), vec![("one".to_string(), "a\nb\n".to_string()), ("two".to_string(), "c\n".to_string())]);
}

#[test]
fn the_diff_marks_what_changed() {
    assert_eq!(diff("a\nb\nc\n", "a\nB\nc\n"), "  a\n- b\n+ B\n  c\n");
    assert_eq!(diff("a\n", "a\nb\n"), "  a\n+ b\n");
}
