//! The option table: every option's names, variable, scope, default, help line and setter.
//! Adding an option is one entry here; `--help` and the variable lookup follow from it.

use std::path::PathBuf;

use super::{Cli, Gate, PingArgs, Sub, SubName};

/// How an option takes its value.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// `--flag` (true) or `--flag=BOOL`; the variable holds a BOOL.
    Flag,
    /// `--opt VALUE` or `--opt=VALUE`.
    Value(&'static str),
}

/// One option: its names, its variable, where it applies, and how it is stored.
pub(super) struct Spec {
    pub long: &'static str,
    pub short: Option<char>,
    /// The variable read when the option is not given (empty: none).
    pub env: &'static str,
    pub kind: Kind,
    /// `None`: everywhere; `Some(sub)`: only after that subcommand.
    pub only: Option<SubName>,
    pub default: Option<&'static str>,
    pub help: &'static str,
    pub set: fn(&mut Cli, &str) -> Result<(), String>,
}

pub(super) fn boolish(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "y" | "yes" | "t" | "true" | "on" | "1" => Ok(true),
        "n" | "no" | "f" | "false" | "off" | "0" => Ok(false),
        _ => Err("not a boolean (true/false, yes/no, on/off, 1/0)".into()),
    }
}

fn number<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.parse().map_err(|_| "not a non-negative whole number".to_string())
}

fn path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        return Err("an empty path".into());
    }
    Ok(PathBuf::from(v))
}

macro_rules! flag {
    ($field:ident) => {
        |c: &mut Cli, v: &str| {
            c.opts.$field = boolish(v)?;
            Ok(())
        }
    };
}

/// An optional value of the run's options, parsed by `$parse`.
macro_rules! some {
    ($field:ident, $parse:expr) => {
        |c: &mut Cli, v: &str| {
            c.opts.$field = Some($parse(v)?);
            Ok(())
        }
    };
}

/// Setters of `ping`'s own options: a no-op outside `ping`, where these options are not found.
macro_rules! ping_flag {
    ($field:ident) => {
        |c: &mut Cli, v: &str| {
            let b = boolish(v)?;
            ping(c, |p| p.$field = b)
        }
    };
}
macro_rules! ping_number {
    ($field:ident) => {
        |c: &mut Cli, v: &str| {
            let n = number(v)?;
            ping(c, |p| p.$field = n)
        }
    };
}
macro_rules! ping_some_number {
    ($field:ident) => {
        |c: &mut Cli, v: &str| {
            let n = number(v)?;
            ping(c, |p| p.$field = Some(n))
        }
    };
}
macro_rules! ping_text {
    ($field:ident) => {
        |c: &mut Cli, v: &str| ping(c, |p| p.$field = Some(v.to_owned()))
    };
}

/// Every option. `--help` lists them in this order.
pub(super) const SPECS: &[Spec] = &[
    Spec {
        long: "require-rdma",
        short: None,
        env: "NCCL_WRAP_REQUIRE_RDMA",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "Refuse to start the command (exit 125) when no usable RDMA port is found",
        set: flag!(require_rdma),
    },
    Spec {
        long: "require-memlock",
        short: None,
        env: "NCCL_WRAP_REQUIRE_MEMLOCK",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "Refuse to start the command (exit 125) when memlock stays limited and CAP_IPC_LOCK is missing",
        set: flag!(require_memlock),
    },
    Spec {
        long: "override",
        short: None,
        env: "NCCL_WRAP_OVERRIDE",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "Replace NCCL variables the user already set (by default they are kept and reported)",
        set: flag!(override_user),
    },
    Spec {
        long: "quiet",
        short: Some('q'),
        env: "NCCL_WRAP_QUIET",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "Print only warnings, not the summary",
        set: flag!(quiet),
    },
    Spec {
        long: "selftest",
        short: None,
        env: "NCCL_WRAP_SELFTEST",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "Open each port through ibverbs and run a loopback RDMA WRITE and SEND on it before starting",
        set: flag!(selftest),
    },
    Spec {
        long: "selftest-bytes",
        short: None,
        env: "NCCL_WRAP_SELFTEST_BYTES",
        kind: Kind::Value("BYTES"),
        only: None,
        default: Some("67108864"),
        help: "Buffer the self-test registers, in bytes",
        set: |c, v| {
            c.opts.selftest_bytes = number(v)?;
            Ok(())
        },
    },
    Spec {
        long: "selftest-timeout-ms",
        short: None,
        env: "NCCL_WRAP_SELFTEST_TIMEOUT_MS",
        kind: Kind::Value("MS"),
        only: None,
        default: Some("2000"),
        help: "Deadline for each port's self-test, in milliseconds",
        set: |c, v| {
            c.opts.selftest_timeout_ms = number(v)?;
            Ok(())
        },
    },
    Spec {
        long: "skip-verbs",
        short: None,
        env: "NCCL_WRAP_SKIP_VERBS",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "Do not check ports through ibverbs (trust sysfs alone)",
        set: flag!(skip_verbs),
    },
    Spec {
        long: "sysfs-root",
        short: None,
        env: "NCCL_WRAP_SYSFS_ROOT",
        kind: Kind::Value("DIR"),
        only: None,
        default: Some("/sys"),
        help: "Root of the sysfs tree to read (for tests and chroots)",
        set: |c, v| {
            c.opts.sysfs_root = path(v)?;
            Ok(())
        },
    },
    Spec {
        long: "proc-root",
        short: None,
        env: "NCCL_WRAP_PROC_ROOT",
        kind: Kind::Value("DIR"),
        only: None,
        default: Some("/proc"),
        help: "Root of procfs (kernel command line, NVIDIA driver version; read by doctor)",
        set: |c, v| {
            c.opts.proc_root = path(v)?;
            Ok(())
        },
    },
    Spec {
        long: "init",
        short: None,
        env: "NCCL_WRAP_INIT",
        kind: Kind::Flag,
        only: None,
        default: None,
        help: "Run the command as a supervised child (forward signals, reap zombies), the default as PID 1; when not PID 1 nccl-wrap also becomes a child subreaper. --init=false always execs",
        set: |c, v| {
            c.opts.init = Some(boolish(v)?);
            Ok(())
        },
    },
    Spec {
        long: "kill-group",
        short: None,
        env: "NCCL_WRAP_KILL_GROUP",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "When supervising, start the command in its own process group and forward signals to the whole group (for launchers that leave workers behind)",
        set: flag!(kill_group),
    },
    Spec {
        long: "grace",
        short: None,
        env: "NCCL_WRAP_GRACE",
        kind: Kind::Value("SECONDS"),
        only: None,
        default: Some("0"),
        help: "When supervising, after the command exits: SIGTERM the processes it left (as PID 1 all others in the namespace, else its process group), SIGKILL them SECONDS later. 0: exit at once",
        set: |c, v| {
            c.opts.grace = number(v)?;
            Ok(())
        },
    },
    Spec {
        long: "dev-root",
        short: None,
        env: "NCCL_WRAP_DEV_ROOT",
        kind: Kind::Value("DIR"),
        only: None,
        default: Some("/dev"),
        help: "Root of the device tree holding infiniband/uverbsN (doctor)",
        set: |c, v| {
            c.opts.dev_root = path(v)?;
            Ok(())
        },
    },
    Spec {
        long: "annotations",
        short: None,
        env: "NCCL_WRAP_ANNOTATIONS",
        kind: Kind::Value("FILE"),
        only: None,
        default: Some("/etc/podnetinfo/annotations"),
        help: "Downward-API annotations file holding k8s.v1.cni.cncf.io/network-status",
        set: |c, v| {
            c.opts.annotations = path(v)?;
            Ok(())
        },
    },
    Spec {
        long: "gate",
        short: None,
        env: "NCCL_WRAP_GATE",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "Before starting the command, test RDMA between this job's pods (each pod with its ring successor, ping's test over every rail); start it only when every pair passes, else exit 125 on every pod. =warn: report and start anyway. See docs/gate.md",
        set: |c, v| {
            c.opts.gate = gate_mode(v)?;
            Ok(())
        },
    },
    Spec {
        long: "gate-coordinator",
        short: None,
        env: "NCCL_WRAP_GATE_COORDINATOR",
        kind: Kind::Value("HOST[:PORT]"),
        only: None,
        default: None,
        help: "Gate: rank 0's address (default: PET_MASTER_ADDR, else MASTER_ADDR); the port defaults to --gate-port",
        set: some!(gate_coordinator, |v: &str| Ok::<_, String>(v.to_owned())),
    },
    Spec {
        long: "gate-rank",
        short: None,
        env: "NCCL_WRAP_GATE_RANK",
        kind: Kind::Value("N"),
        only: None,
        default: None,
        help: "Gate: this pod's rank (default: PET_NODE_RANK, RANK, JOB_COMPLETION_INDEX, SLURM_NODEID, the first set)",
        set: some!(gate_rank, number),
    },
    Spec {
        long: "gate-size",
        short: None,
        env: "NCCL_WRAP_GATE_SIZE",
        kind: Kind::Value("N"),
        only: None,
        default: None,
        help: "Gate: the number of pods (default: PET_NNODES, WORLD_SIZE or SLURM_NNODES, with the rank's source)",
        set: some!(gate_size, number),
    },
    Spec {
        long: "gate-port",
        short: None,
        env: "NCCL_WRAP_GATE_PORT",
        kind: Kind::Value("PORT"),
        only: None,
        default: Some("18516"),
        help: "Gate: the TCP port every pod listens on (rank 0's also takes the other pods' joins)",
        set: |c, v| {
            c.opts.gate_port = number(v)?;
            if c.opts.gate_port == 0 {
                return Err("port 0".into());
            }
            Ok(())
        },
    },
    Spec {
        long: "gate-id",
        short: None,
        env: "NCCL_WRAP_GATE_ID",
        kind: Kind::Value("ID"),
        only: None,
        default: None,
        help: "Gate: the job identity every pod of one job shares; a pod with another is refused (default: the coordinator's HOST:PORT and the size)",
        set: some!(gate_id, |v: &str| Ok::<_, String>(v.to_owned())),
    },
    Spec {
        long: "gate-wait-ms",
        short: None,
        env: "NCCL_WRAP_GATE_WAIT_MS",
        kind: Kind::Value("MS"),
        only: None,
        default: Some("600000"),
        help: "Gate: how long to wait for late pods (image pulls), in milliseconds; after it the missing ranks are named",
        set: |c, v| {
            c.opts.gate_wait_ms = number(v)?;
            Ok(())
        },
    },
    Spec {
        long: "termination-log",
        short: None,
        env: "NCCL_WRAP_TERMINATION_LOG",
        kind: Kind::Value("FILE"),
        only: None,
        default: None,
        help: "Where a refusal's cause is written for Kubernetes (kubectl describe pod); default /dev/termination-log when it exists",
        set: some!(termination_log, path),
    },
    Spec {
        long: "json",
        short: None,
        env: "",
        kind: Kind::Flag,
        only: Some(SubName::Env),
        default: None,
        help: "Print the whole plan as JSON instead",
        set: |c, v| {
            if let Some(Sub::Env { json }) = &mut c.sub {
                *json = boolish(v)?;
            }
            Ok(())
        },
    },
    Spec {
        long: "json",
        short: None,
        env: "",
        kind: Kind::Flag,
        only: Some(SubName::Doctor),
        default: None,
        help: "Print the checks as JSON",
        set: |c, v| {
            if let Some(Sub::Doctor { json, .. }) = &mut c.sub {
                *json = boolish(v)?;
            }
            Ok(())
        },
    },
    Spec {
        long: "no-selftest",
        short: None,
        env: "",
        kind: Kind::Flag,
        only: Some(SubName::Doctor),
        default: None,
        help: "Do not run the loopback self-test through verbs",
        set: |c, v| {
            if let Some(Sub::Doctor { no_selftest, .. }) = &mut c.sub {
                *no_selftest = boolish(v)?;
            }
            Ok(())
        },
    },
    Spec {
        long: "target",
        short: None,
        env: "NCCL_WRAP_PING_TARGET",
        kind: Kind::Value("HOST:PORT"),
        only: Some(SubName::Ping),
        default: None,
        help: "The peer's listener (also the first word after `ping`)",
        set: ping_text!(target),
    },
    Spec {
        long: "listen",
        short: None,
        env: "NCCL_WRAP_PING_LISTEN",
        kind: Kind::Value("[ADDR:]PORT"),
        only: Some(SubName::Ping),
        default: None,
        help: "Wait for a peer on [ADDR:]PORT (one peer, unless --keep)",
        set: ping_text!(listen),
    },
    Spec {
        long: "keep",
        short: None,
        env: "NCCL_WRAP_PING_KEEP",
        kind: Kind::Flag,
        only: Some(SubName::Ping),
        default: Some("false"),
        help: "With --listen: serve peer after peer until stopped",
        set: ping_flag!(keep),
    },
    Spec {
        long: "all-pairs",
        short: None,
        env: "NCCL_WRAP_PING_ALL_PAIRS",
        kind: Kind::Flag,
        only: Some(SubName::Ping),
        default: Some("false"),
        help: "Test every local x remote port pair, not only rail i with rail i",
        set: ping_flag!(all_pairs),
    },
    Spec {
        long: "ring",
        short: None,
        env: "NCCL_WRAP_PING_RING",
        kind: Kind::Flag,
        only: Some(SubName::Ping),
        default: Some("false"),
        help: "Ring mode (Indexed Job, JobSet, StatefulSet): listen on --port and test the next index",
        set: ping_flag!(ring),
    },
    Spec {
        long: "peer-template",
        short: None,
        env: "NCCL_WRAP_PING_PEER_TEMPLATE",
        kind: Kind::Value("TEMPLATE"),
        only: Some(SubName::Ping),
        default: None,
        help: "Ring mode: the peer's host name, {index} for its index (e.g. 'train-{index}.train')",
        set: ping_text!(peer_template),
    },
    Spec {
        long: "index",
        short: None,
        env: "NCCL_WRAP_PING_INDEX",
        kind: Kind::Value("N"),
        only: Some(SubName::Ping),
        default: None,
        help: "Ring mode: this pod's index (default: JOB_COMPLETION_INDEX, else the hostname's -N)",
        set: ping_some_number!(index),
    },
    Spec {
        long: "size",
        short: None,
        env: "NCCL_WRAP_PING_SIZE",
        kind: Kind::Value("N"),
        only: Some(SubName::Ping),
        default: None,
        help: "Ring mode: the number of pods",
        set: ping_some_number!(size),
    },
    Spec {
        long: "port",
        short: None,
        env: "NCCL_WRAP_PING_PORT",
        kind: Kind::Value("PORT"),
        only: Some(SubName::Ping),
        default: Some("18515"),
        help: "Ring mode: the TCP port every pod listens on and connects to",
        set: ping_number!(port),
    },
    Spec {
        long: "json",
        short: None,
        env: "NCCL_WRAP_PING_JSON",
        kind: Kind::Flag,
        only: Some(SubName::Ping),
        default: Some("false"),
        help: "Print one JSON object per line: one per pair, then a summary",
        set: ping_flag!(json),
    },
    Spec {
        long: "bytes",
        short: None,
        env: "NCCL_WRAP_PING_BYTES",
        kind: Kind::Value("N"),
        only: Some(SubName::Ping),
        default: Some("1048576"),
        help: "Bandwidth message size in bytes (also the buffer each pair exposes to the peer)",
        set: ping_number!(bytes),
    },
    Spec {
        long: "duration-ms",
        short: None,
        env: "NCCL_WRAP_PING_DURATION_MS",
        kind: Kind::Value("MS"),
        only: Some(SubName::Ping),
        default: Some("1000"),
        help: "Length of the bandwidth run, in milliseconds (0: no bandwidth run)",
        set: ping_number!(duration_ms),
    },
    Spec {
        long: "iters",
        short: None,
        env: "NCCL_WRAP_PING_ITERS",
        kind: Kind::Value("N"),
        only: Some(SubName::Ping),
        default: Some("1000"),
        help: "Latency round trips per pair",
        set: ping_number!(iters),
    },
    Spec {
        long: "timeout-ms",
        short: None,
        env: "NCCL_WRAP_PING_TIMEOUT_MS",
        kind: Kind::Value("MS"),
        only: Some(SubName::Ping),
        default: Some("3000"),
        help: "Deadline of each phase of each pair (and of each message), in milliseconds",
        set: ping_number!(timeout_ms),
    },
    Spec {
        long: "wait-ms",
        short: None,
        env: "NCCL_WRAP_PING_WAIT_MS",
        kind: Kind::Value("MS"),
        only: Some(SubName::Ping),
        default: Some("60000"),
        help: "How long to wait for the peer (to connect, or to come), in milliseconds",
        set: ping_number!(wait_ms),
    },
];

/// Index of the `target` entry: the positional HOST:PORT of `ping` counts as giving it.
pub(super) const TARGET: usize = {
    let mut i = 0;
    while !matches!(SPECS[i].only, Some(SubName::Ping)) {
        i += 1;
    }
    i
};

/// Applies `f` to ping's options; outside `ping` (where these options are not found on the
/// command line) to the gate's pair test, which reads ping's variables.
fn ping(c: &mut Cli, f: impl FnOnce(&mut PingArgs)) -> Result<(), String> {
    match &mut c.sub {
        Some(Sub::Ping(p)) => f(p),
        None => f(&mut c.opts.gate_ping),
        Some(_) => {}
    }
    Ok(())
}

fn gate_mode(v: &str) -> Result<Gate, String> {
    if v.eq_ignore_ascii_case("warn") {
        return Ok(Gate::Warn);
    }
    match boolish(v) {
        Ok(true) => Ok(Gate::Refuse),
        Ok(false) => Ok(Gate::Off),
        Err(_) => Err("not a boolean or `warn` (true/false, yes/no, on/off, 1/0, warn)".into()),
    }
}
