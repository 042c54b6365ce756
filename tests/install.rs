//! `nccl-wrap install DIR` with the real binary: into a fresh directory, again over itself, and
//! into volumes that are missing, read-only or full. The read-only and full volumes are real
//! mounts (a read-only bind mount, a 64 KiB tmpfs) in a private mount namespace of their own
//! (`unshare -m`), which disappears with the process: nothing stays mounted, failures included.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use common::{bin_argv, bin_command, output_within, BIN, DEADLINE};

fn install(dir: &std::path::Path) -> std::process::Output {
    output_within(bin_command().env_clear().arg("install").arg(dir), DEADLINE)
}

/// `program` as a command line, through the emulator the tests run under, if any.
fn command_for(program: &std::path::Path) -> Command {
    let mut argv = bin_argv();
    argv.pop();
    let mut cmd = match argv.first() {
        Some(emulator) => {
            let mut c = Command::new(emulator);
            c.args(&argv[1..]).arg(program);
            c
        }
        None => Command::new(program),
    };
    cmd.env_clear();
    cmd
}

/// Runs `script` as root in a private mount namespace, or says why it cannot.
fn in_mount_ns(script: &str) -> Option<std::process::Output> {
    let probe = Command::new("unshare").args(["-m", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        common::skip("unshare -m is not available here (needs root)");
        return None;
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-euc", script])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("WRAP", bin_argv().join(" "));
    Some(output_within(&mut cmd, DEADLINE))
}

#[test]
fn installs_itself_byte_for_byte_and_again_harmlessly() {
    let t = common::Scratch::new("install-it-ok");
    for _ in 0..2 {
        let out = install(&t.0);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let path = t.0.join("nccl-wrap");
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{}\n", path.display()));
        assert_eq!(std::fs::read(&path).expect("installed"), std::fs::read(BIN).expect("binary"));
        assert_eq!(std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777, 0o755);
        assert_eq!(std::fs::read_dir(&t.0).expect("ls").count(), 1, "no temporary file stays behind");
    }
    // The installed copy runs, and installs over itself while running.
    let copy = t.0.join("nccl-wrap");
    let out = output_within(command_for(&copy).arg("install").arg(&t.0), DEADLINE);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_missing_directory_is_named_with_the_fix() {
    let t = common::Scratch::new("install-it-missing");
    let out = install(&t.0.join("not-there"));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not-there does not exist: create it, or mount the shared volume"), "{err}");
    let out = output_within(bin_command().env_clear().arg("install"), DEADLINE);
    assert_eq!(out.status.code(), Some(2), "no DIR is a usage error");
}

#[test]
fn a_read_only_volume_is_named_and_left_untouched() {
    let t = common::Scratch::new("install-it-ro");
    let dir = t.0.join("vol");
    std::fs::create_dir(&dir).expect("mkdir");
    let script = format!(
        "mount --bind '{d}' '{d}'; mount -o remount,bind,ro '{d}'; exec $WRAP install '{d}'",
        d = dir.display()
    );
    let Some(out) = in_mount_ns(&script) else { return };
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is read-only") && err.contains("mount the shared volume writable"), "{err}");
    assert_eq!(std::fs::read_dir(&dir).expect("ls").count(), 0);
}

#[test]
fn a_full_volume_is_named_and_no_partial_file_stays() {
    let t = common::Scratch::new("install-it-full");
    let dir = t.0.join("vol");
    std::fs::create_dir(&dir).expect("mkdir");
    let script = format!(
        "mount -t tmpfs -o size=64k tmpfs '{d}'; $WRAP install '{d}' && exit 0; rc=$?; ls -A '{d}' >&2; exit $rc",
        d = dir.display()
    );
    let Some(out) = in_mount_ns(&script) else { return };
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is full") && err.contains("bytes there"), "{err}");
    assert!(!err.contains(".nccl-wrap.tmp"), "the temporary file was removed: {err}");
}
