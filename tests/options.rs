//! The command line as a hurried person or a pod spec gets it wrong, through the real binary: an
//! option left without its value before an interlock (the interlock still holds).

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
