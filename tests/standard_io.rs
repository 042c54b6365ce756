//! What nccl-wrap relies on from the start of the process: a write to a reader that has gone,
//! and closed standard descriptors. A write to a reader that has gone fails
//! with EPIPE instead of killing nccl-wrap, and a command started with a descriptor 0, 1 or 2
//! closed finds it open on /dev/null, so that no file nccl-wrap opened took its number.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use common::{bin_argv, bin_command, fixture, runner};

#[test]
fn a_gone_reader_is_an_error_not_a_sigpipe() {
    let (read, write) = nix::unistd::pipe().expect("pipe");
    drop(read);
    let out = bin_command()
        .env_clear()
        .args(["env", "--sysfs-root"])
        .arg(fixture("h100-roce-sriov").join("sys"))
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "killed by a signal: {:?}\n{err}", out.status);
    assert_eq!(out.status.code(), Some(1), "{err}");
}

#[test]
fn a_closed_standard_descriptor_reaches_the_command_as_dev_null() {
    if !runner().is_empty() {
        // qemu-user opens descriptors of its own: the numbers would be the emulator's.
        common::skip("descriptor numbering under an emulator is the emulator's");
        return;
    }
    let bin = bin_argv().join(" ");
    let sys = fixture("h100-roce-sriov").join("sys");
    let script = format!(
        "exec 0<&- 2>/dev/null; exec {bin} -q --sysfs-root {} --supervise=false -- /bin/sh -c 'readlink /proc/self/fd/0'",
        sys.display()
    );
    let out = std::process::Command::new("/bin/sh").arg("-c").arg(script).env_clear().output().expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{:?} {stdout}", out.status);
    assert_eq!(stdout.trim(), "/dev/null");
}
