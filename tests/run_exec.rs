//! The run path on this machine's real process limits: memlock, execve, exit codes, and what the
//! command receives.

mod common;
use common::Run;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::Command;

const NODE: &str = "h100-roce-sriov";

/// This process's RLIMIT_MEMLOCK hard limit in KiB as `ulimit -l` prints it (`unlimited` or a number).
fn hard_memlock_kib() -> String {
    let out = Command::new("sh").args(["-c", "ulimit -H -l"]).output().expect("sh");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn memlock_soft_limit_is_raised_to_the_hard_limit_for_the_command() {
    let hard = hard_memlock_kib();
    // Start with a soft limit of 64 KiB under the real hard limit; the command must see the hard one.
    let script = format!("ulimit -S -l 64 && exec {} -q -- sh -c 'ulimit -S -l'", common::bin_argv().join(" "));
    let out = Command::new("sh")
        .args(["-c", &script])
        .env("NCCL_WRAP_SYSFS_ROOT", common::fixture("no-rdma").join("sys"))
        .output()
        .expect("sh");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), hard, "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn memlock_report_matches_the_real_limits_and_capabilities() {
    let r = Run::node("no-rdma").args(["env", "--json"]);
    let j = r.success().json();
    let m = &j["memlock"];
    let hard = hard_memlock_kib();
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let cap_eff =
        status.lines().find_map(|l| l.strip_prefix("CapEff:")).map(|v| u64::from_str_radix(v.trim(), 16).expect("hex"));
    let sys_resource = cap_eff.map(|c| c >> 24 & 1 == 1);
    assert_eq!(m["cap_ipc_lock"], serde_json::json!(cap_eff.map(|c| c >> 14 & 1 == 1)), "{m}");
    assert_eq!(m["cap_sys_resource"], serde_json::json!(sys_resource), "{m}");
    if hard == "unlimited" || sys_resource == Some(true) {
        assert_eq!(m["after"]["soft_bytes"], "unlimited", "{m}");
    } else {
        // The field case of these machines: hard limit fixed, no CAP_SYS_RESOURCE.
        let kib: u64 = hard.parse().expect("kib");
        assert_eq!(m["after"]["soft_bytes"], kib * 1024, "{m}");
        assert_eq!(m["after"]["hard_bytes"], kib * 1024, "{m}");
        assert!(matches!(m["outcome"].as_str(), Some("capped_at_hard" | "soft_raised_to_hard")), "{m}");
    }
}

#[test]
fn without_cap_ipc_lock_the_summary_names_the_fix() {
    let hard = hard_memlock_kib();
    if hard == "unlimited" {
        common::skip("memlock hard limit is unlimited here; the limited case cannot be shown");
        return;
    }
    let probe = Command::new("setpriv").args(["--bounding-set=-ipc_lock,-sys_resource", "true"]).status();
    if !matches!(probe, Ok(s) if s.success()) {
        common::skip("setpriv cannot drop capabilities here");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--bounding-set=-ipc_lock,-sys_resource", "--inh-caps=-ipc_lock,-sys_resource"])
        .args(common::bin_argv())
        .args(["--require-memlock", "--", "true"])
        .env("NCCL_WRAP_SYSFS_ROOT", common::fixture("no-rdma").join("sys"))
        .output()
        .expect("setpriv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("CAP_IPC_LOCK is not effective either"), "{err}");
    assert!(err.contains("add CAP_IPC_LOCK to the container's securityContext"), "{err}");
}

#[test]
fn argv_and_environment_pass_through_byte_for_byte() {
    let odd_arg = std::ffi::OsString::from_vec(vec![b'a', 0xff, b' ', b'\'', b'$', b'(', b'x', b')']);
    let odd_val = std::ffi::OsString::from_vec(vec![0xfe, b'=', b'\n', 0x01]);
    let r = Run::node(NODE).env("ODD", &odd_val).args([
        std::ffi::OsStr::new("-q"),
        "--".as_ref(),
        "sh".as_ref(),
        "-c".as_ref(),
        r#"printf '%s' "$1"; printf '\0'; printf '%s' "$ODD""#.as_ref(),
        "sh".as_ref(),
        odd_arg.as_os_str(),
    ]);
    r.success();
    let mut want = odd_arg.as_bytes().to_vec();
    want.push(0);
    want.extend_from_slice(odd_val.as_bytes());
    assert_eq!(r.out.stdout, want);
}

#[test]
fn environment_order_is_kept_and_nccl_variables_appended() {
    let r = Run::node(NODE).with_env_file(NODE, "env").args(["-q", "--", "/usr/bin/env", "-0"]);
    let names: Vec<String> =
        r.success().child_env().into_iter().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
    let n = names.len();
    assert_eq!(&names[n - 2..], ["NCCL_IB_HCA", "NCCL_IB_GID_INDEX"], "{names:?}");
}

#[test]
fn exit_codes_follow_tini() {
    Run::node("no-rdma").args(["-q", "--", "sh", "-c", "exit 42"]).code_is(42);
    Run::node("no-rdma")
        .args(["-q", "--", "no-such-command-xyz"])
        .code_is(127)
        .stderr_has("\"no-such-command-xyz\": command not found in PATH");
    Run::node("no-rdma").args(["-q", "--", "/no/such/file"]).code_is(127).stderr_has("/no/such/file: cannot execute");
    let dir = std::env::temp_dir().join(format!("nccl-wrap-noexec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let file = dir.join("script");
    std::fs::write(&file, "#!/bin/sh\necho hi\n").expect("write");
    Run::node("no-rdma")
        .args([std::ffi::OsStr::new("-q"), "--".as_ref(), file.as_os_str()])
        .code_is(126)
        .stderr_has("Permission denied");
    // No shebang and executable: never handed to a shell.
    std::fs::write(&file, "echo hi\n").expect("write");
    Command::new("chmod").arg("+x").arg(&file).status().expect("chmod");
    Run::node("no-rdma")
        .args([std::ffi::OsStr::new("-q"), "--".as_ref(), file.as_os_str()])
        .code_is(126)
        .stderr_has("Exec format error");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn user_set_variables_are_kept_unless_override() {
    let r = Run::node(NODE).with_env_file(NODE, "env").env("NCCL_IB_HCA", "mlx5_1").args(["--", "/usr/bin/env", "-0"]);
    r.success().stderr_has("kept NCCL_IB_HCA='mlx5_1'").stderr_has("is a prefix match: mlx5_1 also selects");
    assert_eq!(r.child_var("NCCL_IB_HCA").as_deref(), Some("mlx5_1"));
    assert_eq!(r.child_var("NCCL_IB_GID_INDEX").as_deref(), Some("3"));
    let r = Run::node(NODE)
        .with_env_file(NODE, "env")
        .env("NCCL_IB_HCA", "mlx5_1")
        .env("NCCL_WRAP_OVERRIDE", "1")
        .args(["--", "/usr/bin/env", "-0"]);
    r.success().stderr_has("(overriding \"mlx5_1\")");
    assert_eq!(r.child_var("NCCL_IB_HCA").as_deref(), Some("=mlx5_6:1,mlx5_7:1,mlx5_10:1,mlx5_11:1"));
}

#[test]
fn env_output_is_safe_to_eval_and_matches_the_exec_path() {
    let env = Run::node(NODE).with_env_file(NODE, "env").args(["env"]);
    let script = format!("{}\nenv -0", env.success().stdout());
    let out = Command::new("sh").args(["-c", &script]).env_clear().output().expect("sh");
    let evaled: Vec<_> =
        out.stdout.split(|&b| b == 0).filter(|e| e.starts_with(b"NCCL_IB_")).map(<[u8]>::to_vec).collect();
    let run = Run::node(NODE).with_env_file(NODE, "env").args(["-q", "--", "/usr/bin/env", "-0"]);
    let executed: Vec<_> = run
        .success()
        .out
        .stdout
        .split(|&b| b == 0)
        .filter(|e| e.starts_with(b"NCCL_IB_"))
        .map(<[u8]>::to_vec)
        .collect();
    assert_eq!(evaled, executed);
    assert_eq!(evaled.len(), 2);
}

#[test]
fn help_documents_every_option_and_its_variable() {
    let r = Run::node(NODE).args(["--help"]);
    let out = r.success().stdout();
    for v in [
        "NCCL_WRAP_REQUIRE_RDMA",
        "NCCL_WRAP_REQUIRE_MEMLOCK",
        "NCCL_WRAP_OVERRIDE",
        "NCCL_WRAP_QUIET",
        "NCCL_WRAP_SYSFS_ROOT",
        "NCCL_WRAP_PROC_ROOT",
        "NCCL_WRAP_ANNOTATIONS",
        "NCCL_WRAP_LOG",
        "125",
    ] {
        assert!(out.contains(v), "--help lacks {v}\n{out}");
    }
}
