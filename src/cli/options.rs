//! The option table: every option's names, variable, scope, default, help line and setter.
//! Adding an option is one entry here; `--help` and the variable lookup follow from it.
//!
//! Over 600 lines: one ordered table is what `--help` prints, in this order, and what the
//! variable lookup walks; split across files, an option's place in the help would depend on
//! which file it landed in.

use super::setters::{
    boolish, gate_mode, interval_ms, number_in, path, ping, ring_target, set_features, set_metrics, watch,
};

/// The largest job the gate takes, and the largest buffer a pair test exposes: the wire
/// protocol's own bounds (`ping::wire`), which a value past them would only meet later.
pub(super) const MAX_GATE_SIZE: u32 = 1 << 16;
pub(super) const MAX_BYTES: u32 = 1 << 30;

/// The longest `--grace`: a day, far past any pod's termination grace period.
pub(super) const GRACE_MAX: u64 = 86_400;
use super::{Cli, Sub, SubName};

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

/// A health file option of `doctor` or `watch` (both take the same two, with the same variables).
macro_rules! file_spec {
    ($long:literal, $env:literal, $sub:ident, $help:expr, $set:expr) => {
        Spec {
            long: $long,
            short: None,
            env: $env,
            kind: Kind::Value("FILE"),
            only: Some(SubName::$sub),
            default: None,
            help: $help,
            set: $set,
        }
    };
}

const FEATURES_HELP: &str = "Also write Node Feature Discovery's local feature file (`name=value` labels under nccl-wrap.feature.node.kubernetes.io/), atomically; for NFD's features.d directory";
const METRICS_HELP: &str = "Also write the Prometheus text format (nccl_wrap_* metrics), atomically; for node_exporter's textfile directory (name it *.prom)";

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
        help: "Buffer the self-test registers, in bytes (4096 to 1073741824)",
        set: |c, v| {
            c.opts.selftest_bytes = number_in(v, 4096, 1 << 30)?;
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
        help: "Deadline for each port's self-test, in milliseconds (1 to 600000)",
        set: |c, v| {
            c.opts.selftest_timeout_ms = number_in(v, 1, 600_000)?;
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
        long: "supervise",
        short: None,
        env: "NCCL_WRAP_SUPERVISE",
        kind: Kind::Flag,
        only: None,
        default: None,
        help: "Run the command as a supervised child (forward signals, reap zombies, watch the RDMA ports and say what changed on them if it fails), the default as PID 1; when not PID 1 nccl-wrap also becomes a child subreaper. =false always execs. Also --init (NCCL_WRAP_INIT)",
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
        help: "When supervising, after the command exits: SIGTERM the processes it left (as PID 1 all others in the namespace, else its process group), SIGKILL them SECONDS later. 0: exit at once (0 to 86400)",
        set: |c, v| {
            c.opts.grace = number_in(v, 0, GRACE_MAX)?;
            Ok(())
        },
    },
    Spec {
        long: "report",
        short: None,
        env: "NCCL_WRAP_REPORT",
        kind: Kind::Value("PATH"),
        only: None,
        default: None,
        help: "When supervising, write the post-mortem (port transitions, counters that moved) as JSON to PATH when the command ends",
        set: |c, v| {
            c.opts.report = Some(path(v)?);
            Ok(())
        },
    },
    Spec {
        long: "watch-ms",
        short: None,
        env: "NCCL_WRAP_WATCH_MS",
        kind: Kind::Value("MS"),
        only: None,
        default: Some("1000"),
        help: "When supervising, how often to read the state of the ports in use, in milliseconds (0: only at start and exit) (0 to 3600000)",
        set: |c, v| {
            c.opts.watch_ms = number_in(v, 0, 3_600_000)?;
            Ok(())
        },
    },
    Spec {
        long: "stall-ms",
        short: None,
        env: "NCCL_WRAP_STALL_MS",
        kind: Kind::Value("MS"),
        only: None,
        default: Some("0"),
        help: "When supervising, ask NCCL's RAS every quarter of MS (at least 1 s) and say which ranks are behind when no collective was launched for MS milliseconds; 0: off (RAS is still asked at SIGTERM and when the command fails); 0 or 1000 up (0 to 86400000)",
        set: super::setters::stall_ms,
    },
    Spec {
        long: "state-file",
        short: None,
        env: "NCCL_WRAP_STATE_FILE",
        kind: Kind::Value("FILE"),
        only: None,
        default: Some(nw_postmortem::state::DEFAULT_PATH),
        help: "When supervising, where the first reading of the ports is kept (removed at exit) for `nccl-wrap status`, which reads it from the same place; the default is used only as PID 1 (a container's init)",
        set: |c, v| {
            c.opts.state_file = path(v)?;
            Ok(())
        },
    },
    Spec {
        long: "json",
        short: None,
        env: "",
        kind: Kind::Flag,
        only: Some(SubName::Status),
        default: None,
        help: "Print the status as JSON (docs/schemas/status.schema.json)",
        set: |c, v| {
            if let Some(Sub::Status { json }) = &mut c.sub {
                *json = boolish(v)?;
            }
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
        long: "image-root",
        short: None,
        env: "NCCL_WRAP_IMAGE_ROOT",
        kind: Kind::Value("DIR"),
        only: None,
        default: Some("/"),
        help: "Root of the training image whose libibverbs, providers, NCCL and net plugin are checked, by its loader's rules (for tests and chroots)",
        set: |c, v| {
            c.opts.image_root = path(v)?;
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
        help: "Gate: this pod's rank (default: PET_NODE_RANK, RANK, JOB_COMPLETION_INDEX, SLURM_NODEID, the first set) (0 to 65535)",
        set: some!(gate_rank, |v| number_in(v, 0, MAX_GATE_SIZE - 1)),
    },
    Spec {
        long: "gate-size",
        short: None,
        env: "NCCL_WRAP_GATE_SIZE",
        kind: Kind::Value("N"),
        only: None,
        default: None,
        help: "Gate: the number of pods (default: PET_NNODES, WORLD_SIZE or SLURM_NNODES, with the rank's source) (1 to 65536)",
        set: some!(gate_size, |v| number_in(v, 1, MAX_GATE_SIZE)),
    },
    Spec {
        long: "gate-port",
        short: None,
        env: "NCCL_WRAP_GATE_PORT",
        kind: Kind::Value("PORT"),
        only: None,
        default: Some("18516"),
        help: "Gate: the TCP port every pod listens on (rank 0's also takes the other pods' joins) (1 to 65535)",
        set: |c, v| {
            c.opts.gate_port = number_in(v, 1, u16::MAX)?;
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
        long: "gate-secret",
        short: None,
        env: "NCCL_WRAP_GATE_SECRET",
        kind: Kind::Value("SECRET"),
        only: None,
        default: None,
        help: "Gate: the job's secret, the same on every pod: every gate frame carries its HMAC-SHA256, and a pod with another or none is refused. Prefer the variable or --gate-secret-file (a flag shows in the process list). Default: none (the job is not authenticated, said once)",
        set: some!(gate_secret, |v: &str| {
            // The gate reads it as bytes with the whitespace around it taken off (seal::Secret).
            match v.trim().len() {
                0 => Err("an empty secret (only whitespace): every pod needs the same non-empty secret".to_owned()),
                n if n > 4096 => Err(format!("{n} bytes, more than 4096")),
                _ => Ok(v.to_owned()),
            }
        }),
    },
    Spec {
        long: "gate-secret-file",
        short: None,
        env: "NCCL_WRAP_GATE_SECRET_FILE",
        kind: Kind::Value("FILE"),
        only: None,
        default: None,
        help: "Gate: read the job's secret from FILE (a mounted Secret; at most 4096 bytes, surrounding whitespace ignored); unreadable while --gate is on: exit 125",
        set: some!(gate_secret_file, |v: &str| Ok::<_, String>(std::path::PathBuf::from(v))),
    },
    Spec {
        long: "gate-slow",
        short: None,
        env: "NCCL_WRAP_GATE_SLOW",
        kind: Kind::Value("PERCENT"),
        only: None,
        default: Some("70"),
        help: "Gate: a pair that passes below this percent of the job's median bandwidth, or of its rated speed (the slower end's port rate; hardware ports only), is named as slow with both figures; the command still starts unless --gate-refuse-slow. 0: bandwidth not judged (0 to 100)",
        set: |c, v| {
            c.opts.gate_slow_pct = number_in(v, 0, 100)?;
            Ok(())
        },
    },
    Spec {
        long: "gate-refuse-slow",
        short: None,
        env: "NCCL_WRAP_GATE_REFUSE_SLOW",
        kind: Kind::Flag,
        only: None,
        default: Some("false"),
        help: "Gate: a slow pair (see --gate-slow) fails the gate like a broken one: no pod starts, exit 125",
        set: flag!(gate_refuse_slow),
    },
    Spec {
        long: "gate-wait-ms",
        short: None,
        env: "NCCL_WRAP_GATE_WAIT_MS",
        kind: Kind::Value("MS"),
        only: None,
        default: Some("600000"),
        help: "Gate: how long to wait for late pods (image pulls), in milliseconds; after it the missing ranks are named (1 to 86400000)",
        set: |c, v| {
            c.opts.gate_wait_ms = number_in(v, 1, 86_400_000)?;
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
    file_spec!("features", "NCCL_WRAP_FEATURES", Doctor, FEATURES_HELP, set_features),
    file_spec!("metrics", "NCCL_WRAP_METRICS", Doctor, METRICS_HELP, set_metrics),
    file_spec!("features", "NCCL_WRAP_FEATURES", Watch, FEATURES_HELP, set_features),
    file_spec!("metrics", "NCCL_WRAP_METRICS", Watch, METRICS_HELP, set_metrics),
    Spec {
        long: "interval",
        short: None,
        env: "NCCL_WRAP_WATCH_INTERVAL",
        kind: Kind::Value("SECONDS"),
        only: Some(SubName::Watch),
        default: Some("60"),
        help: "Seconds between the starts of two rounds (a fraction allowed; 0.1 to 86400)",
        set: |c, v| {
            let ms = interval_ms(v)?;
            watch(c, |w| w.interval_ms = ms)
        },
    },
    Spec {
        long: "jitter",
        short: None,
        env: "NCCL_WRAP_WATCH_JITTER",
        kind: Kind::Value("PERCENT"),
        only: Some(SubName::Watch),
        default: Some("10"),
        help: "Each wait is the interval +/- up to PERCENT (0 to 50), so that a DaemonSet's agents do not run in step",
        set: |c, v| {
            let pct: u32 = number_in(v, 0, 50)?;
            watch(c, |w| w.jitter_pct = pct)
        },
    },
    Spec {
        long: "rounds",
        short: None,
        env: "NCCL_WRAP_WATCH_ROUNDS",
        kind: Kind::Value("N"),
        only: Some(SubName::Watch),
        default: Some("0"),
        help: "Stop after N rounds (0: run until SIGTERM or SIGINT) (0 to 1000000000)",
        set: |c, v| {
            let n: u64 = number_in(v, 0, 1_000_000_000)?;
            watch(c, |w| w.rounds = n)
        },
    },
    Spec {
        long: "ring",
        short: None,
        env: "NCCL_WRAP_WATCH_RING",
        kind: Kind::Value("SERVICE[:PORT]"),
        only: Some(SubName::Watch),
        default: None,
        help: "Off unless given. Every --ring-every rounds, test this node's RDMA ports towards the next of the agents the headless Service SERVICE resolves to (sorted addresses, wrapping), with ping's pair test, and answer the previous one's test on PORT (default 18517) for the agent's life; needs the uverbs devices, IPC_LOCK or a large memlock limit, and the host port (docs/health.md)",
        set: |c, v| {
            let target = ring_target(v)?;
            watch(c, |w| w.ring = Some(target))
        },
    },
    Spec {
        long: "ring-every",
        short: None,
        env: "NCCL_WRAP_WATCH_RING_EVERY",
        kind: Kind::Value("N"),
        only: Some(SubName::Watch),
        default: Some("10"),
        help: "With --ring: a ring round every N rounds, the first round included (1 to 10000)",
        set: |c, v| {
            let n: u64 = number_in(v, 1, 10_000)?;
            watch(c, |w| w.ring_every = n)
        },
    },
    Spec {
        long: "ring-timeout-ms",
        short: None,
        env: "NCCL_WRAP_WATCH_RING_TIMEOUT_MS",
        kind: Kind::Value("MS"),
        only: Some(SubName::Watch),
        default: Some("2000"),
        help: "With --ring: each phase's deadline of the pair test, both ways (as ping's --timeout-ms; software RoCE under emulation needs 20000) (100 to 600000)",
        set: |c, v| {
            let ms: u64 = number_in(v, 100, 600_000)?;
            watch(c, |w| w.ring_timeout_ms = ms)
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
        long: "allow",
        short: None,
        env: "NCCL_WRAP_PING_ALLOW",
        kind: Kind::Value("CIDR,..."),
        only: Some(SubName::Ping),
        default: None,
        help: "With --listen or --ring: answer only peers in these IPv4/IPv6 networks (e.g. the pod network 10.0.0.0/8,fd00::/8); others are closed unread. Default: anyone",
        set: ping_text!(allow),
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
        help: "Ring mode: this pod's index (default: JOB_COMPLETION_INDEX, else the hostname's -N) (0 to 65535)",
        set: ping_some_number!(index, 0, MAX_GATE_SIZE - 1),
    },
    Spec {
        long: "size",
        short: None,
        env: "NCCL_WRAP_PING_SIZE",
        kind: Kind::Value("N"),
        only: Some(SubName::Ping),
        default: None,
        help: "Ring mode: the number of pods (1 to 65536)",
        set: ping_some_number!(size, 1, MAX_GATE_SIZE),
    },
    Spec {
        long: "port",
        short: None,
        env: "NCCL_WRAP_PING_PORT",
        kind: Kind::Value("PORT"),
        only: Some(SubName::Ping),
        default: Some("18515"),
        help: "Ring mode: the TCP port every pod listens on and connects to (1 to 65535)",
        set: ping_number!(port, 1, u16::MAX),
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
        help: "Bandwidth message size in bytes (also the buffer each pair exposes to the peer) (1 to 1073741824)",
        set: ping_number!(bytes, 1, MAX_BYTES),
    },
    Spec {
        long: "duration-ms",
        short: None,
        env: "NCCL_WRAP_PING_DURATION_MS",
        kind: Kind::Value("MS"),
        only: Some(SubName::Ping),
        default: Some("1000"),
        help: "Length of the bandwidth run, in milliseconds (0: no bandwidth run) (0 to 600000)",
        set: ping_number!(duration_ms, 0, 600_000),
    },
    Spec {
        long: "iters",
        short: None,
        env: "NCCL_WRAP_PING_ITERS",
        kind: Kind::Value("N"),
        only: Some(SubName::Ping),
        default: Some("1000"),
        help: "Latency round trips per pair (0 to 1000000)",
        set: ping_number!(iters, 0, 1_000_000),
    },
    Spec {
        long: "timeout-ms",
        short: None,
        env: "NCCL_WRAP_PING_TIMEOUT_MS",
        kind: Kind::Value("MS"),
        only: Some(SubName::Ping),
        default: Some("3000"),
        help: "Deadline of each phase of each pair (and of each message), in milliseconds (1 to 600000)",
        set: ping_number!(timeout_ms, 1, 600_000),
    },
    Spec {
        long: "wait-ms",
        short: None,
        env: "NCCL_WRAP_PING_WAIT_MS",
        kind: Kind::Value("MS"),
        only: Some(SubName::Ping),
        default: Some("60000"),
        help: "How long to wait for the peer (to connect, or to come), in milliseconds (0 to 86400000)",
        set: ping_number!(wait_ms, 0, 86_400_000),
    },
];

/// Former names that still work: (long name, variable, the long name of the entry they stand
/// for). `--init` became `--supervise` when supervision grew the post-mortem; pod specs written
/// with `--init` or `NCCL_WRAP_INIT` keep working. The entry's own name wins over an alias.
pub(super) const ALIASES: &[(&str, &str, &str)] = &[("init", "NCCL_WRAP_INIT", "supervise")];

/// Index of the `target` entry: the positional HOST:PORT of `ping` counts as giving it.
pub(super) const TARGET: usize = {
    let mut i = 0;
    while !matches!(SPECS[i].only, Some(SubName::Ping)) {
        i += 1;
    }
    i
};
