//! `--version` as a release is identified by it: one line per fact (the version, the commit it
//! was built from, the rdma-core release it links, whether it is static), each checked against
//! the source of that fact here rather than against the binary's own claim.

mod common;

use std::process::Command;

/// The text of a command's standard output, if it ran and succeeded.
fn output_of(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn version_says_the_version_the_commit_the_rdma_core_linked_and_static() {
    let out = common::bin_command().arg("--version").output().expect("run nccl-wrap --version");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "one line per fact:\n{text}");
    assert_eq!(lines[0], format!("nccl-wrap {}", env!("CARGO_PKG_VERSION")), "{text}");

    // The commit of this checkout (the build watches HEAD, so a new commit rebuilds); outside
    // git, "unknown".
    let commit = output_of("git", &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    assert_eq!(lines[1], format!("commit: {commit}"), "{text}");

    // rdma-core 44.0 is libibverbs 1.14.44.0 to pkg-config: the release is its last two parts.
    // (A cross build asks the target's pkg-config, which tells the same release on Debian.)
    match output_of("pkg-config", &["--modversion", "libibverbs"]) {
        Some(v) => {
            let parts: Vec<&str> = v.split('.').collect();
            assert_eq!(parts.len(), 4, "libibverbs {v}");
            assert_eq!(lines[2], format!("rdma-core: {}.{}", parts[2], parts[3]), "{text}");
        }
        None => assert!(lines[2].starts_with("rdma-core: "), "{text}"),
    }

    // .cargo/config.toml builds every binary with +crt-static; `file` agrees where it is here.
    assert_eq!(lines[3], "static: yes", "{text}");
    if let Some(kind) = output_of("file", &["-bL", common::BIN]) {
        assert!(kind.contains("statically linked"), "{kind}");
    }
}

/// `-V` is the same answer, and a subcommand's `--version` too.
#[test]
fn short_version_and_a_subcommands_version_are_the_same_answer() {
    let run = |args: &[&str]| {
        let out = common::bin_command().args(args).output().expect("run nccl-wrap");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let long = run(&["--version"]);
    assert_eq!(run(&["-V"]), long);
    assert_eq!(run(&["doctor", "--version"]), long);
}
