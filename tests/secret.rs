//! The gate's job secret stays nccl-wrap's: the command never sees it in its environment, and no
//! message repeats it, not even in part (a value too long to use is named, never shown).

mod common;

use common::Run;

const NODE: &str = "h100-roce-sriov";

#[test]
fn the_command_never_sees_the_gate_secret() {
    let r = Run::node(NODE)
        .with_env_file(NODE, "env")
        .no_annotations()
        .env("NCCL_WRAP_GATE_SECRET", "correct-horse-battery-staple")
        .args(["--", "/usr/bin/env", "-0"]);
    r.success();
    assert_eq!(r.child_var("NCCL_WRAP_GATE_SECRET"), None);
    assert!(r.child_var("NCCL_IB_HCA").is_some(), "the run still applies its settings");
    assert!(!r.stderr().contains("correct-horse"), "{}", r.stderr());
}

#[test]
fn a_secret_that_cannot_be_used_is_named_never_shown() {
    let long = format!("TOPSECRET{}", "x".repeat(5000));
    let r = Run::node(NODE).with_env_file(NODE, "env").no_annotations().env("NCCL_WRAP_GATE_SECRET", &long).args([
        "--",
        "/usr/bin/env",
        "-0",
    ]);
    r.success();
    let err = r.stderr();
    assert!(err.contains("NCCL_WRAP_GATE_SECRET"), "the variable is named: {err}");
    assert!(!err.contains("TOPSECRET"), "the value is shown: {err}");
    assert_eq!(r.child_var("NCCL_WRAP_GATE_SECRET"), None);
}

/// Regression (issue 40): while nccl-wrap supervised the command, its own `/proc/PID/environ`
/// still held the secret (the block the kernel filled at execve), readable by the command it
/// hands a clean environment to. The command here reads its parent's, nccl-wrap's.
#[test]
fn regression_the_secret_leaves_the_supervisors_own_environ() {
    if !common::runner().is_empty() {
        // Under qemu-user the process is the emulator, whose /proc/PID/environ is the emulator's
        // own block, not the one nccl-wrap scrubs in the emulated memory.
        common::skip("/proc/PID/environ under qemu-user is the emulator's, not nccl-wrap's");
        return;
    }
    let r = Run::node(NODE)
        .with_env_file(NODE, "env")
        .no_annotations()
        .env("NCCL_WRAP_GATE_SECRET", "correct-horse-battery-staple")
        .args(["--supervise", "--", "sh", "-c", "tr '\\0' '\\n' < /proc/$PPID/environ"]);
    r.success();
    let environ = r.stdout();
    assert!(environ.contains("NCCL_WRAP_SYSFS_ROOT="), "nccl-wrap's environment was read: {environ}");
    assert!(!environ.contains("correct-horse"), "the secret is in nccl-wrap's environ: {environ}");
    assert!(!environ.contains("horse-battery"), "part of it: {environ}");
}
