//! Runs the real nccl-wrap binary against fixture nodes with a clean, explicit environment, and
//! shows output readably when an assertion fails.
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_nccl-wrap");

/// The emulator these tests run under, from `NCCL_WRAP_TEST_RUNNER` (set by the aarch64 runner in
/// `.cargo/config.toml`), split into words; empty when they run natively.
pub fn runner() -> Vec<String> {
    std::env::var("NCCL_WRAP_TEST_RUNNER").map(|r| r.split_whitespace().map(String::from).collect()).unwrap_or_default()
}

/// The binary as a command line: `BIN`, or the emulator and `BIN`. A process that an emulated one
/// starts runs natively, so without binfmt_misc the kernel cannot exec an aarch64 BIN from here
/// (ENOEXEC); naming the emulator gives the same process binfmt_misc would (`qemu-aarch64 BIN`).
pub fn bin_argv() -> Vec<String> {
    let mut argv = runner();
    argv.push(BIN.to_string());
    argv
}

/// A `Command` that runs the binary, through the emulator where there is one.
pub fn bin_command() -> Command {
    let argv = bin_argv();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

pub fn fixture(node: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/nodes").join(node)
}

/// A fixture image root (`fixtures/images/<name>`): what NCCL in a training image would load.
pub fn image(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/images").join(name)
}

/// Reads a fixture `env` file: `NAME=VALUE` lines, the value raw to the end of the line.
pub fn env_file(node: &str, file: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(fixture(node).join(file)).unwrap_or_default();
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A run of the binary on one node: roots point into the fixture, the environment holds only
/// PATH and what the test adds.
pub struct Run {
    cmd: Command,
}

impl Run {
    pub fn node(node: &str) -> Run {
        let root = fixture(node);
        let mut cmd = bin_command();
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("NCCL_WRAP_SYSFS_ROOT", root.join("sys"))
            .env("NCCL_WRAP_ANNOTATIONS", root.join("podnetinfo/annotations"))
            .env("NCCL_WRAP_IMAGE_ROOT", image("full"))
            // The node's proc tree holds no routing table: no bootstrap interface is exported
            // unless a test gives one (tests/bootstrap.rs runs in network namespaces).
            .env("NCCL_WRAP_PROC_ROOT", root.join("proc"));
        Run { cmd }
    }

    /// Loads the node's device-plugin variables from `file` (`env`, `env.v3.6`, ...).
    pub fn with_env_file(mut self, node: &str, file: &str) -> Run {
        for (k, v) in env_file(node, file) {
            self.cmd.env(k, v);
        }
        self
    }

    pub fn no_annotations(mut self) -> Run {
        self.cmd.env("NCCL_WRAP_ANNOTATIONS", "/nonexistent/annotations");
        self
    }

    pub fn env(mut self, k: impl AsRef<std::ffi::OsStr>, v: impl AsRef<std::ffi::OsStr>) -> Run {
        self.cmd.env(k, v);
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Done
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.cmd.args(args);
        Done { out: output_within(&mut self.cmd, DEADLINE) }
    }
}

/// No run of the binary may take longer: a test that would hang fails instead, naming the hang.
pub const DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `cmd` to completion, or kills it at `deadline` and fails the test.
#[track_caller]
pub fn output_within(cmd: &mut Command, deadline: std::time::Duration) -> Output {
    use std::process::Stdio;
    let mut child =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn nccl-wrap");
    // Drain both pipes on threads, so a chatty child cannot block on a full pipe meanwhile.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut b);
        b
    });
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut b);
        b
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {deadline:?}: it hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    Output { status, stdout: t_out.join().unwrap_or_default(), stderr: t_err.join().unwrap_or_default() }
}

pub struct Done {
    pub out: Output,
}

impl Done {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
    fn show(&self) -> String {
        format!("--- exit {:?}\n--- stdout\n{}--- stderr\n{}", self.code(), self.stdout(), self.stderr())
    }
    #[track_caller]
    pub fn success(&self) -> &Done {
        assert_eq!(self.code(), Some(0), "expected success\n{}", self.show());
        self
    }
    #[track_caller]
    pub fn code_is(&self, code: i32) -> &Done {
        assert_eq!(self.code(), Some(code), "expected exit {code}\n{}", self.show());
        self
    }
    #[track_caller]
    pub fn stdout_is(&self, want: &str) -> &Done {
        assert_eq!(self.stdout(), want, "stdout differs\n{}", self.show());
        self
    }
    #[track_caller]
    pub fn stderr_has(&self, needle: &str) -> &Done {
        assert!(self.stderr().contains(needle), "stderr lacks {needle:?}\n{}", self.show());
        self
    }
    #[track_caller]
    pub fn stderr_lacks(&self, needle: &str) -> &Done {
        assert!(!self.stderr().contains(needle), "stderr has {needle:?}\n{}", self.show());
        self
    }
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.out.stdout).unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", self.show()))
    }
    /// The child's environment when the command was `/usr/bin/env -0`.
    pub fn child_env(&self) -> Vec<(OsString, OsString)> {
        use std::os::unix::ffi::OsStrExt;
        self.out
            .stdout
            .split(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .filter_map(|e| {
                let pos = e.iter().position(|&b| b == b'=')?;
                Some((
                    std::ffi::OsStr::from_bytes(&e[..pos]).to_os_string(),
                    std::ffi::OsStr::from_bytes(&e[pos + 1..]).to_os_string(),
                ))
            })
            .collect()
    }
    pub fn child_var(&self, name: &str) -> Option<String> {
        self.child_env().into_iter().find(|(k, _)| k == name).map(|(_, v)| v.to_string_lossy().into_owned())
    }
}

/// A test's own directory, empty or holding a copy of a fixture node (symlinks kept) that the
/// test may change; removed on drop (tempfile's `TempDir`), so on a failing assertion too. The one
/// temporary-directory guard of the integration tests.
pub struct Scratch(pub PathBuf, #[allow(dead_code)] tempfile::TempDir);

impl Scratch {
    /// An empty directory, named for the test's `tag`.
    pub fn new(tag: &str) -> Scratch {
        let dir = tempfile::Builder::new().prefix(&format!("nccl-wrap-{tag}-")).tempdir().expect("mkdir");
        Scratch(dir.path().to_path_buf(), dir)
    }
    pub fn node(node: &str, tag: &str) -> Scratch {
        let dir = Scratch::new(tag);
        let st = Command::new("cp").arg("-a").arg(fixture(node)).arg(dir.0.join("node")).status().expect("cp");
        assert!(st.success(), "cp -a {node}");
        dir
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// The copied node's root (holding `sys/`, `env`...).
    pub fn root(&self) -> PathBuf {
        self.0.join("node")
    }
}

/// The variable naming the file where skipped tests are recorded (scripts/test.sh sets it).
/// Not `NCCL_WRAP_*`: the binary would name it as a variable it does not read.
pub const SKIP_LOG: &str = "TESTS_SKIPPED_LOG";

/// Says why the calling test cannot run here, and records it, so that the closing total of
/// scripts/test.sh counts the test as skipped, not passed. The test returns right after.
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    eprintln!("SKIPPED {test}: {why}");
    if let Some(path) = std::env::var_os(SKIP_LOG) {
        use std::io::Write;
        // One short append per line: concurrent tests do not interleave within a line.
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
            let _ = f.write_all(format!("{} {test}: {why}\n", env!("CARGO_CRATE_NAME")).as_bytes());
        }
    }
}

/// Whether this machine cannot make a network namespace with a veth pair (unshare, ip, root):
/// then the caller's test is recorded as skipped, with why, and should return.
pub fn no_netns() -> bool {
    let out = Command::new("unshare")
        .args(["--net", "--", "ip", "link", "add", "probe0", "type", "veth", "peer", "name", "probe1"])
        .output();
    let why = match out {
        Ok(o) if o.status.success() => return false,
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => format!("cannot run unshare or ip: {e}"),
    };
    skip(&format!("no network namespace with veth interfaces here ({why}); run as root with iproute2"));
    true
}
