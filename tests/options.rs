//! The command line as a hurried person or a pod spec gets it wrong, through the real binary: an
//! option left without its value before an interlock (the interlock still holds), an empty job
//! secret from each of its sources (refused before anything is printed), a mistyped subcommand
//! (a usage error, never a command to exec), and each command's own help and usage.

mod common;

use common::Run;

/// A node without RDMA: `--require-rdma` refuses there.
const NO_RDMA: &str = "no-rdma";

/// The options of a run that take a value, as `-h` lists them.
fn value_options() -> Vec<String> {
    let help = Run::node(NO_RDMA).args(["-h"]).success().stdout();
    let options: Vec<String> = help
        .lines()
        .filter_map(|l| l.strip_prefix("      --"))
        .filter(|l| l.split_whitespace().next().is_some_and(|n| !n.contains('[')))
        .filter_map(|l| l.split(' ').next())
        .map(|n| format!("--{n}"))
        .collect();
    assert!(options.len() > 20 && options.contains(&"--grace".to_owned()), "{options:?}");
    options
}

/// Issue 40.3's reproductions: each exited 0 with its interlock silently off.
#[test]
fn an_option_without_its_value_never_swallows_the_interlock_after_it() {
    for args in [["--grace", "--require-rdma"], ["--gate-id", "--require-rdma"]] {
        let r = Run::node(NO_RDMA).args([args[0], args[1], "--", "sh", "-c", "echo the command ran"]);
        r.code_is(125).stderr_has(&format!("{} ignored", args[0])).stderr_has("it needs a value");
        r.stderr_has("refusing to start \"sh\": --require-rdma");
        assert_eq!(r.stdout(), "", "{args:?}: the command ran");
    }
    // The gate is not dropped either: it runs (here: refused, as no launcher says who this pod is).
    let r = Run::node(NO_RDMA).args(["--report", "--gate", "--", "sh", "-c", "echo the command ran"]);
    r.code_is(125).stderr_has("gate-usage: the gate needs this pod's rank");
    assert_eq!(r.stdout(), "");
}

/// Every value-taking option of a run left without its value, before each interlock: the run
/// refuses as the interlock alone makes it refuse, or, for the memlock interlock whose outcome
/// depends on this machine, ends as the interlock alone makes it end; never the command run with
/// the interlock off.
#[test]
fn every_option_without_its_value_before_each_interlock_keeps_the_interlock() {
    let cmd = ["--", "sh", "-c", "echo the command ran"];
    let memlock_alone = Run::node(NO_RDMA).args(["--require-memlock", "--supervise=false"].iter().chain(&cmd)).code();
    for option in value_options() {
        for interlock in ["--require-rdma", "--gate", "--require-memlock"] {
            // The sysfs root left to its default is the machine's, whose ports are another matter.
            if option == "--sysfs-root" && interlock == "--require-rdma" {
                continue;
            }
            let r = Run::node(NO_RDMA).args([option.as_str(), interlock, "--supervise=false"].iter().chain(&cmd));
            let shown = format!("{option} {interlock}");
            assert!(
                r.stderr().contains(&format!("{option} ")),
                "{shown}: the missing value is not named\n{}",
                r.stderr()
            );
            if interlock == "--require-memlock" {
                assert_eq!(r.code(), memlock_alone, "{shown}\n{}", r.stderr());
                continue;
            }
            assert_eq!(r.code(), Some(125), "{shown}: must refuse\n{}", r.stderr());
            assert_eq!(r.stdout(), "", "{shown}: the command ran");
        }
    }
}

/// The gate is on for a job of one pod: only the secret stands between it and running.
fn gated() -> Run {
    let port = (20_000 + std::process::id() % 20_000).to_string();
    Run::node(NO_RDMA)
        .env("NCCL_WRAP_GATE", "1")
        .env("NCCL_WRAP_GATE_RANK", "0")
        .env("NCCL_WRAP_GATE_SIZE", "1")
        .env("NCCL_WRAP_GATE_COORDINATOR", "127.0.0.1")
        .env("NCCL_WRAP_GATE_PORT", port)
        .env("NCCL_WRAP_GATE_WAIT_MS", "1000")
}

/// Issue 40.4: an empty or whitespace secret, from any source, with the gate on: refused (125)
/// and named, before the summary or the gate (an empty variable once ran the gate unauthenticated).
#[test]
fn an_empty_secret_from_any_source_refuses_before_anything_runs() {
    let dir = std::env::temp_dir().join(format!("nccl-wrap-options-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let (empty, blank) = (dir.join("empty"), dir.join("blank"));
    std::fs::write(&empty, "").expect("write");
    std::fs::write(&blank, " \n\t\n").expect("write");
    let cmd = ["--", "sh", "-c", "echo the command ran"];
    let cases: [(&str, Run, &[&str]); 7] = [
        ("NCCL_WRAP_GATE_SECRET", gated().env("NCCL_WRAP_GATE_SECRET", ""), &[]),
        ("NCCL_WRAP_GATE_SECRET", gated().env("NCCL_WRAP_GATE_SECRET", " \t "), &[]),
        ("NCCL_WRAP_GATE_SECRET_FILE", gated().env("NCCL_WRAP_GATE_SECRET_FILE", ""), &[]),
        ("'--gate-secret'", gated(), &["--gate-secret="]),
        ("'--gate-secret-file'", gated(), &["--gate-secret-file="]),
        ("NCCL_WRAP_GATE_SECRET_FILE", gated().env("NCCL_WRAP_GATE_SECRET_FILE", &empty), &[]),
        ("NCCL_WRAP_GATE_SECRET_FILE", gated().env("NCCL_WRAP_GATE_SECRET_FILE", &blank), &[]),
    ];
    for (source, run, args) in cases {
        let r = run.args(args.iter().chain(&cmd));
        r.code_is(125).stderr_has("refusing to start").stderr_has(source);
        r.stderr_lacks("gate: rank").stderr_lacks("RDMA port(s) usable");
        assert_eq!(r.stdout(), "", "{source}: the command ran");
    }
    // The gate off, a secret is none of the run's business: named, and the command runs.
    let r = Run::node(NO_RDMA).env("NCCL_WRAP_GATE_SECRET", "").args(["--supervise=false"].iter().chain(&cmd));
    r.success().stderr_has("warning: NCCL_WRAP_GATE_SECRET=").stdout_is("the command ran\n");
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 39: a first word a letter off a subcommand is a usage error naming the subcommand, not
/// a summary followed by an attempt to exec it (exit 127).
#[test]
fn a_mistyped_subcommand_is_a_usage_error_with_the_closest() {
    for (word, near) in [("doctr", "doctor"), ("stauts", "status"), ("evn", "env")] {
        let r = Run::node(NO_RDMA).args([word]);
        r.code_is(2).stderr_has(&format!("'{word}' is not a subcommand")).stderr_has(&format!("did you mean {near}?"));
        r.stderr_lacks("RDMA port(s) usable");
    }
    // After `--` it is the command, as any other.
    Run::node(NO_RDMA).args(["--supervise=false", "--", "doctr"]).code_is(127);
}

/// Issue 39: a usage error shows its own command's usage; each command's help names only its own
/// options and words, within 100 columns, `-h` briefer than `--help`.
#[test]
fn usage_and_help_are_each_commands_own() {
    let r = Run::node(NO_RDMA).args(["doctor", "--bogus"]);
    r.code_is(2).stderr_has("usage: nccl-wrap doctor [OPTIONS] (see nccl-wrap doctor --help)");
    let r = Run::node(NO_RDMA).args(["ping", "--listen", "--json"]);
    r.code_is(2).stderr_has("option '--listen' needs a value").stderr_has("usage: nccl-wrap ping [OPTIONS] <HOST:PORT");
    Run::node(NO_RDMA).args(["install"]).code_is(2).stderr_has("usage: nccl-wrap install DIR");
    let r = Run::node(NO_RDMA).args(["status", "--gate"]);
    r.code_is(2).stderr_has("'--gate' is not an option of `nccl-wrap status`");

    let install = Run::node(NO_RDMA).args(["install", "--help"]).success().stdout();
    assert!(install.contains("Usage: nccl-wrap install DIR") && !install.contains("--gate-secret"), "{install}");
    let ping = Run::node(NO_RDMA).args(["ping", "--help"]).success().stdout();
    assert!(ping.contains("HOST:PORT") && ping.contains("--peer-template") && !ping.contains("--grace"), "{ping}");
    for sub in [None, Some("env"), Some("doctor"), Some("ping"), Some("watch"), Some("install"), Some("status")] {
        let short = Run::node(NO_RDMA).args(sub.into_iter().chain(["-h"])).success().stdout();
        let long = Run::node(NO_RDMA).args(sub.into_iter().chain(["--help"])).success().stdout();
        assert!(short.len() < long.len(), "{sub:?}: -h is not briefer than --help");
        for line in short.lines().chain(long.lines()) {
            assert!(line.chars().count() <= 100, "{sub:?}: {line:?}");
        }
    }
}
