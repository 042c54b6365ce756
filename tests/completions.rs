//! The shell completions and the man page that `tools/docs.rs` writes from the option table,
//! checked against what the binary's own `-h` offers for each command: every option of each
//! command is completed under that command (bash, zsh, fish) and described in its part of the
//! man page, the scripts parse in their shells, and `man -l` renders the page.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use nccl_wrap::cli::{completions, man_page, SHELLS};

/// Each command as the scripts label it, with the words that ask for its `-h`.
const COMMANDS: &[(&str, &[&str])] = &[
    ("run", &["-h"]),
    ("env", &["env", "-h"]),
    ("doctor", &["doctor", "-h"]),
    ("ping", &["ping", "-h"]),
    ("watch", &["watch", "-h"]),
    ("install", &["install", "-h"]),
    ("status", &["status", "-h"]),
];

/// The options a command's `-h` lists: `--quiet` and `-q` of `  -q, --quiet[=BOOL]  ...`.
fn options_of(args: &[&str]) -> Vec<String> {
    let out = common::bin_command().args(args).output().expect("run nccl-wrap -h");
    assert!(out.status.success(), "{args:?}: {out:?}");
    let help = String::from_utf8(out.stdout).expect("UTF-8");
    let mut names = Vec::new();
    for line in help.lines().skip_while(|l| *l != "Options:").skip(1) {
        for word in line.split_whitespace().take_while(|w| w.starts_with('-')) {
            let name = word.trim_end_matches(',');
            let name = name.split(['[', '=']).next().unwrap_or(name);
            names.push(name.to_owned());
        }
    }
    assert!(names.contains(&"--help".to_owned()) && names.contains(&"-V".to_owned()), "{args:?}: {names:?}");
    names
}

/// Whether `text` names `option` as a whole word (`--ring` is not found in `--ring-every`).
fn names_option(text: &str, option: &str) -> bool {
    text.match_indices(option).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + option.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '-')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// The part of a script that completes one command.
fn part(shell: &str, script: &str, label: &str) -> String {
    match shell {
        "bash" => {
            let head = format!("        {label}) opts=\"");
            script.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("bash: no {head}")).to_owned()
        }
        "zsh" => {
            let head = format!("_nccl_wrap_{label}() {{");
            let from = script.find(&head).unwrap_or_else(|| panic!("zsh: no {head}"));
            let body = &script[from..];
            body[..body.find("\n}\n").expect("the function ends")].to_owned()
        }
        _ => {
            let cond = match label {
                "run" => "-n 'not __fish_seen_subcommand_from ".to_owned(),
                sub => format!("-n '__fish_seen_subcommand_from {sub}'"),
            };
            // fish names options as `-l quiet` and `-s q`: as `--quiet` and `-q` here.
            let lines = script.lines().filter(|l| l.contains(&cond) && (l.contains(" -l ") || l.contains(" -s ")));
            lines.map(|l| l.replace(" -l ", " --").replace(" -s ", " -")).collect::<Vec<_>>().join("\n")
        }
    }
}

#[test]
fn every_completion_script_completes_every_option_of_each_command() {
    for shell in SHELLS {
        let script = completions(shell).expect("a script for each shell");
        for (label, args) in COMMANDS {
            let part = part(shell, &script, label);
            for option in options_of(args) {
                assert!(names_option(&part, &option), "{shell}: `{label}` does not complete {option}:\n{part}");
            }
        }
    }
    assert!(completions("tcsh").is_none());
}

/// Each script parses in its shell where that shell is installed (bash always is).
#[test]
fn every_completion_script_parses_in_its_shell() {
    let mut checked = Vec::new();
    for shell in SHELLS {
        let script = completions(shell).expect("a script");
        let mut child = match Command::new(shell).arg("-n").stdin(Stdio::piped()).stderr(Stdio::piped()).spawn() {
            Ok(child) => child,
            Err(_) if shell != "bash" => continue,
            Err(e) => panic!("bash: {e}"),
        };
        child.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("write the script");
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "{shell} -n: {}", String::from_utf8_lossy(&out.stderr));
        checked.push(shell);
    }
    if checked.len() < SHELLS.len() {
        eprintln!("parsed with {checked:?} only: the other shells are not installed");
    }
    // bash: the completion function is defined and registered when the script is sourced.
    let script = completions("bash").expect("a script");
    let out =
        Command::new("bash").args(["-c", &format!("{script}\ncomplete -p nccl-wrap")]).output().expect("run bash");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "complete -F _nccl_wrap nccl-wrap", "{out:?}");
}

/// The rendered page, as `man -l` shows it; `None` where man-db is not installed.
fn rendered(page: &str) -> Option<String> {
    let dir = std::env::temp_dir().join(format!("nccl-wrap-man-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let file = dir.join("nccl-wrap.1");
    std::fs::write(&file, page).expect("write the page");
    // groff's own warnings (-ww) about the roff text, where groff is here: none.
    if let Ok(out) = Command::new("groff").args(["-man", "-Tutf8", "-ww", "-z"]).arg(&file).output() {
        assert!(out.status.success() && out.stderr.is_empty(), "groff: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = Command::new("man").arg("-l").arg(&file).env("MANWIDTH", "100").env("MANPAGER", "cat").output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.ok()?;
    assert!(out.status.success(), "man -l: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8(out.stdout).expect("UTF-8"))
}

#[test]
fn the_man_page_renders_and_describes_every_option_of_each_command() {
    let page = man_page();
    assert!(page.starts_with(".TH NCCL\\-WRAP 1 "), "{}", &page[..80]);
    let Some(text) = rendered(&page) else {
        return common::skip("man (man-db) is not installed: the page is not rendered");
    };
    // Its parts: the run's options, then a section per subcommand, then the notes.
    let section = |label: &str| -> String {
        let (from, to) = match label {
            "run" => ("\nOPTIONS\n".to_owned(), "\nCOMMANDS\n".to_owned()),
            sub => (format!("\n   nccl-wrap {sub} "), "\n   nccl-wrap ".to_owned()),
        };
        let start = text.find(&from).unwrap_or_else(|| panic!("no {from:?} in the page:\n{text}")) + from.len();
        let rest = &text[start..];
        let end = [rest.find(&to), rest.find("\nNOTES\n")].into_iter().flatten().min().unwrap_or(rest.len());
        rest[..end].to_owned()
    };
    for (label, args) in COMMANDS {
        let part = section(label);
        for option in options_of(args) {
            // A subcommand's help and version are the run's.
            let here = if ["-h", "--help", "-V", "--version"].contains(&option.as_str()) {
                section("run")
            } else {
                part.clone()
            };
            assert!(names_option(&here, &option), "the man page's `{label}` does not name {option}:\n{here}");
        }
    }
    assert!(text.contains("NCCL_WRAP_REQUIRE_RDMA") && text.contains("Exit status"), "{text}");
}
