//! Command-line options. Every option also reads an `NCCL_WRAP_*` variable, because a pod spec
//! sets environment more easily than arguments. Parsing only: nothing here does I/O.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::{Args, Parser, Subcommand};

/// Exit code of the wrapper's own refusals (`--require-*`), as `timeout` and `env` use 125 for
/// their own failures: never a code the training command's 0-124 or 126+ could be mistaken for.
pub const EXIT_REFUSED: u8 = 125;
/// Usage errors (bad options, no command).
pub const EXIT_USAGE: u8 = 2;

const AFTER_HELP: &str = "\
Sources of devices, in order: PCIDEVICE_*_INFO / PCIDEVICE_* (SR-IOV device plugin), the
network-status annotation file, then sysfs (devices whose net device is in this namespace).

Exit status: the command's own; 128+N when it died of signal N; 126 when it cannot be executed;
127 when it is not found; 125 when a --require-* option refuses to start it; 2 on usage errors.

As PID 1 (or with --init) the command runs as a child: signals are forwarded to it, zombies are
reaped, and the exit status is the command's as above.

Logging detail: NCCL_WRAP_LOG=debug (env_logger syntax).";

#[derive(Debug, Parser)]
#[command(
    name = "nccl-wrap",
    version,
    about = "Find this pod's RDMA ports, export NCCL settings, raise memlock, run the command",
    override_usage = "nccl-wrap [OPTIONS] -- COMMAND [ARGS]...\n       nccl-wrap env [--json] [OPTIONS]\n       nccl-wrap doctor [--json] [OPTIONS]\n       nccl-wrap ping [HOST:PORT | --listen [ADDR:]PORT | --ring] [--json] [OPTIONS]",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub sub: Option<Sub>,
    #[command(flatten)]
    pub opts: Opts,
    /// The training command and its arguments (after `--`).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Subcommand)]
pub enum Sub {
    /// Print what a run would set, as `export NAME='value'` lines safe to eval.
    Env {
        /// Print the whole plan as JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Check this pod's RDMA setup and name what would make NCCL hang or fall back to sockets.
    /// Exit status: 0 nothing fails, 1 a check fails, 2 doctor itself could not run.
    Doctor {
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
        /// Do not run the loopback self-test through verbs.
        #[arg(long)]
        no_selftest: bool,
    },
    /// Test RDMA between this pod and another over the ports a run would use: a latency
    /// ping-pong and a bandwidth run per rail pair. Exit status: 0 every pair passes, 1 a pair
    /// fails, 2 the check could not run (usage, no RDMA port, the peer never came).
    #[command(after_help = PING_AFTER_HELP)]
    Ping(PingArgs),
}

const PING_AFTER_HELP: &str = "\
Two pods:   nccl-wrap ping --listen 18515        (pod A)
            nccl-wrap ping train-0.train:18515   (pod B)
A ring:     nccl-wrap ping --ring --peer-template 'train-{index}.train' --size 4
            (each pod listens on --port and tests the next index; its own index from --index,
            JOB_COMPLETION_INDEX, or the hostname's -N)
See docs/ping.md for the protocol and every cause.";

const BOOL: fn() -> BoolishValueParser = BoolishValueParser::new;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["target", "listen", "ring"])))]
pub struct PingArgs {
    /// The peer's listener, HOST:PORT.
    #[arg(env = "NCCL_WRAP_PING_TARGET", value_name = "HOST:PORT", conflicts_with_all = ["listen", "ring"])]
    pub target: Option<String>,
    /// Wait for a peer on [ADDR:]PORT (one peer, unless --keep).
    #[arg(long, env = "NCCL_WRAP_PING_LISTEN", value_name = "[ADDR:]PORT", conflicts_with = "ring")]
    pub listen: Option<String>,
    /// With --listen: serve peer after peer until stopped.
    #[arg(long, env = "NCCL_WRAP_PING_KEEP", value_parser = BOOL(), num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub keep: bool,
    /// Test every local x remote port pair, not only rail i with rail i.
    #[arg(long, env = "NCCL_WRAP_PING_ALL_PAIRS", value_parser = BOOL(), num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub all_pairs: bool,
    /// Ring mode (Indexed Job, JobSet, StatefulSet): listen on --port and test the next index.
    #[arg(long, env = "NCCL_WRAP_PING_RING", value_parser = BOOL(), num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub ring: bool,
    /// Ring mode: the peer's host name, with {index} for its index (e.g. 'train-{index}.train').
    #[arg(long, env = "NCCL_WRAP_PING_PEER_TEMPLATE", value_name = "TEMPLATE")]
    pub peer_template: Option<String>,
    /// Ring mode: this pod's index (default: JOB_COMPLETION_INDEX, else the hostname's -N).
    #[arg(long, env = "NCCL_WRAP_PING_INDEX", value_name = "N")]
    pub index: Option<u32>,
    /// Ring mode: the number of pods.
    #[arg(long, env = "NCCL_WRAP_PING_SIZE", value_name = "N")]
    pub size: Option<u32>,
    /// Ring mode: the TCP port every pod listens on and connects to.
    #[arg(long, env = "NCCL_WRAP_PING_PORT", default_value_t = 18515, value_name = "PORT")]
    pub port: u16,
    /// Print one JSON object per line: one per pair, then a summary.
    #[arg(long, env = "NCCL_WRAP_PING_JSON", value_parser = BOOL(), num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub json: bool,
    /// Bandwidth message size in bytes (also the buffer each pair exposes to the peer).
    #[arg(long, env = "NCCL_WRAP_PING_BYTES", default_value_t = 1 << 20, value_name = "N")]
    pub bytes: u32,
    /// Length of the bandwidth run, in milliseconds (0: no bandwidth run).
    #[arg(long, env = "NCCL_WRAP_PING_DURATION_MS", default_value_t = 1000, value_name = "MS")]
    pub duration_ms: u32,
    /// Latency round trips per pair.
    #[arg(long, env = "NCCL_WRAP_PING_ITERS", default_value_t = 1000, value_name = "N")]
    pub iters: u32,
    /// Deadline of each phase of each pair (and of each message), in milliseconds.
    #[arg(long, env = "NCCL_WRAP_PING_TIMEOUT_MS", default_value_t = 3000, value_name = "MS")]
    pub timeout_ms: u64,
    /// How long to wait for the peer (to connect, or to come), in milliseconds.
    #[arg(long, env = "NCCL_WRAP_PING_WAIT_MS", default_value_t = 60000, value_name = "MS")]
    pub wait_ms: u64,
}

#[derive(Debug, Args)]
pub struct Opts {
    /// Refuse to start the command (exit 125) when no usable RDMA port is found.
    #[arg(long, global = true, env = "NCCL_WRAP_REQUIRE_RDMA", value_parser = BoolishValueParser::new(),
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub require_rdma: bool,

    /// Refuse to start the command (exit 125) when memlock stays limited and CAP_IPC_LOCK is missing.
    #[arg(long, global = true, env = "NCCL_WRAP_REQUIRE_MEMLOCK", value_parser = BoolishValueParser::new(),
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub require_memlock: bool,

    /// Replace NCCL variables the user already set (by default they are kept and reported).
    #[arg(long = "override", global = true, env = "NCCL_WRAP_OVERRIDE", value_parser = BoolishValueParser::new(),
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub override_user: bool,

    /// Print only warnings, not the summary.
    #[arg(long, short, global = true, env = "NCCL_WRAP_QUIET", value_parser = BoolishValueParser::new(),
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub quiet: bool,

    /// Open each port through ibverbs and run a loopback RDMA WRITE and SEND on it before starting.
    #[arg(long, global = true, env = "NCCL_WRAP_SELFTEST", value_parser = BoolishValueParser::new(),
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub selftest: bool,

    /// Buffer the self-test registers, in bytes.
    #[arg(long, global = true, env = "NCCL_WRAP_SELFTEST_BYTES", default_value_t = 64 << 20, value_name = "BYTES")]
    pub selftest_bytes: usize,

    /// Deadline for each port's self-test, in milliseconds.
    #[arg(long, global = true, env = "NCCL_WRAP_SELFTEST_TIMEOUT_MS", default_value_t = 2000, value_name = "MS")]
    pub selftest_timeout_ms: u64,

    /// Do not check ports through ibverbs (trust sysfs alone).
    #[arg(long, global = true, env = "NCCL_WRAP_SKIP_VERBS", value_parser = BoolishValueParser::new(),
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub skip_verbs: bool,

    /// Root of the sysfs tree to read (for tests and chroots).
    #[arg(long, global = true, env = "NCCL_WRAP_SYSFS_ROOT", default_value = "/sys", value_name = "DIR")]
    pub sysfs_root: PathBuf,

    /// Root of procfs (kernel command line, NVIDIA driver version; read by doctor).
    #[arg(long, global = true, env = "NCCL_WRAP_PROC_ROOT", default_value = "/proc", value_name = "DIR")]
    pub proc_root: PathBuf,

    /// Run the command as a supervised child (forward signals, reap zombies), the default as PID 1;
    /// when not PID 1 nccl-wrap also becomes a child subreaper. --init=false always execs.
    #[arg(long, env = "NCCL_WRAP_INIT", value_parser = BoolishValueParser::new(),
          num_args = 0..=1, require_equals = true, default_missing_value = "true", hide_possible_values = true)]
    pub init: Option<bool>,

    /// When supervising, start the command in its own process group and forward signals to the
    /// whole group (for launchers that leave workers behind).
    #[arg(long, env = "NCCL_WRAP_KILL_GROUP", value_parser = BoolishValueParser::new(),
          num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", hide_possible_values = true)]
    pub kill_group: bool,

    /// When supervising, after the command exits: SIGTERM the processes it left (as PID 1 all
    /// others in the namespace, else its process group), SIGKILL them SECONDS later. 0: exit at once.
    #[arg(long, env = "NCCL_WRAP_GRACE", default_value = "0", value_name = "SECONDS")]
    pub grace: u64,

    /// Root of the device tree holding infiniband/uverbsN (doctor).
    #[arg(long, global = true, env = "NCCL_WRAP_DEV_ROOT", default_value = "/dev", value_name = "DIR")]
    pub dev_root: PathBuf,

    /// Downward-API annotations file holding k8s.v1.cni.cncf.io/network-status.
    #[arg(
        long,
        global = true,
        env = "NCCL_WRAP_ANNOTATIONS",
        default_value = "/etc/podnetinfo/annotations",
        value_name = "FILE"
    )]
    pub annotations: PathBuf,
}

impl From<&Opts> for crate::process::supervise::Options {
    fn from(o: &Opts) -> Self {
        crate::process::supervise::Options { kill_group: o.kill_group, grace: std::time::Duration::from_secs(o.grace) }
    }
}

/// Finds the command after a literal `--`, for running it untouched when the options are bad.
pub fn command_after_dashes(raw: &[OsString]) -> Option<&[OsString]> {
    let pos = raw.iter().position(|a| a == "--")?;
    let cmd = &raw[pos + 1..];
    (!cmd.is_empty()).then_some(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_after_double_dash() {
        let raw: Vec<OsString> =
            ["nccl-wrap", "--bogus", "--", "torchrun", "--", "x"].iter().map(OsString::from).collect();
        assert_eq!(command_after_dashes(&raw).map(<[OsString]>::len), Some(3));
        let raw: Vec<OsString> = ["nccl-wrap", "--"].iter().map(OsString::from).collect();
        assert!(command_after_dashes(&raw).is_none());
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
