//! The option table: each option's names, variable, commands, type (with its default and range),
//! field and help. The parser, defaults, help and messages read it; nothing else states a default.
//! No I/O.

use std::path::PathBuf;

use crate::gate::seal::Secret;
use crate::gate::wire::MAX_GATE_SIZE;

use super::{Cli, Gate, Sub, SubName, WatchArgs};

/// The commands an option belongs to, as bits: the run (no subcommand) and each subcommand.
pub(super) type Scope = u8;
pub(super) const RUN: Scope = 1;
const ENV: Scope = SubName::Env.bit();
const DOCTOR: Scope = SubName::Doctor.bit();
const PING: Scope = SubName::Ping.bit();
const WATCH: Scope = SubName::Watch.bit();
const STATUS: Scope = SubName::Status.bit();
/// Every command that detects and plans as a run does, so that `env` prints what a run does.
const PLAN: Scope = RUN | ENV | DOCTOR | PING;

pub(super) fn bit(cmd: Option<SubName>) -> Scope {
    cmd.map_or(RUN, SubName::bit)
}

/// How an option's value is written, with its typed default and range.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    /// `--flag` (true) or `--flag=BOOL`; false unless given.
    Flag,
    /// As a flag, but unset unless given: its absence means "decide" (`--supervise`).
    Maybe,
    /// A flag that also takes `warn` (`--gate`).
    Mode,
    /// A whole number from LO to HI, and its default (or none): (METAVAR, LO, HI, DEFAULT).
    Num(&'static str, u64, u64, Option<u64>),
    /// 0 (off, the default) or a whole number from LO to HI: (METAVAR, LO, HI).
    OffOr(&'static str, u64, u64),
    /// Seconds, a fraction allowed, kept in milliseconds: (LO, HI, DEFAULT), in milliseconds.
    Secs(u64, u64, u64),
    /// A path (never empty), and its default (or none).
    Path(&'static str, Option<&'static str>),
    /// Text whose form its one user checks (a peer's address, a template, an identity).
    Text(&'static str),
    /// The job's secret, or the file holding it. A variable set to nothing still counts as set:
    /// an empty secret is a mistake that would otherwise turn the gate's authentication off.
    Secret,
    SecretFile,
    /// `SERVICE[:PORT]`: a DNS name, and the ring's port unless given.
    Service,
    /// `--rails` terms, checked by `nw_decide::rails::Selector::parse` (validate keeps the value
    /// parsed).
    Rails,
}

#[derive(Debug, Clone)]
pub(super) enum Val {
    Bool(bool),
    Num(u64),
    Path(PathBuf),
    Text(String),
    Gate(Gate),
    Secret(Secret),
    Service(String, u16),
}

impl Ty {
    /// Whether it takes a value (`--opt VALUE`); a flag takes one only inline (`--flag=BOOL`).
    pub(super) fn takes_value(self) -> bool {
        !matches!(self, Ty::Flag | Ty::Maybe | Ty::Mode)
    }

    /// Whether its variable set to nothing counts as set (see [`Ty::Secret`]).
    pub(super) fn empty_is_set(self) -> bool {
        matches!(self, Ty::Secret | Ty::SecretFile)
    }

    /// What `--help` calls its value.
    pub(super) fn meta(self) -> &'static str {
        match self {
            Ty::Flag | Ty::Maybe => "BOOL",
            Ty::Mode => "BOOL|warn",
            Ty::Num(m, ..) | Ty::OffOr(m, ..) | Ty::Path(m, _) | Ty::Text(m) => m,
            Ty::Secs(..) => "SECONDS",
            Ty::Secret => "SECRET",
            Ty::SecretFile => "FILE",
            Ty::Service => "SERVICE[:PORT]",
            Ty::Rails => "TERM[,TERM...]",
        }
    }

    /// The value as given, in its type, or why it is not one.
    pub(super) fn read(self, v: &str) -> Result<Val, String> {
        match self {
            Ty::Flag | Ty::Maybe => boolish(v).map(Val::Bool),
            Ty::Mode if v.eq_ignore_ascii_case("warn") => Ok(Val::Gate(Gate::Warn)),
            Ty::Mode => match boolish(v) {
                Ok(on) => Ok(Val::Gate(if on { Gate::Refuse } else { Gate::Off })),
                Err(_) => Err("not a boolean or `warn` (true/false, yes/no, on/off, 1/0, warn)".into()),
            },
            Ty::Num(_, lo, hi, _) => number_in(v, lo, hi).map(Val::Num),
            Ty::OffOr(_, lo, hi) => match number_in(v, 0, hi) {
                Ok(n) if n == 0 || n >= lo => Ok(Val::Num(n)),
                _ => Err(format!("0 (off), or a whole number from {lo} to {hi}")),
            },
            Ty::Secs(lo, hi, _) => {
                let s: f64 = v.trim().parse().map_err(|_| "not a number of seconds".to_string())?;
                let ms = s * 1000.0;
                if !(lo as f64..=hi as f64).contains(&ms) {
                    return Err(format!("must be between {} and {} seconds", secs(lo), secs(hi)));
                }
                Ok(Val::Num(ms.round() as u64))
            }
            Ty::Path(..) | Ty::SecretFile if v.is_empty() => Err("an empty path".into()),
            Ty::Path(..) | Ty::SecretFile => Ok(Val::Path(PathBuf::from(v))),
            Ty::Text(_) => Ok(Val::Text(v.to_owned())),
            Ty::Secret => Secret::new(v.as_bytes()).map(Val::Secret).map_err(|e| match e {
                crate::gate::seal::SecretError::Empty => {
                    "an empty secret (only whitespace): every pod needs the same non-empty secret".into()
                }
                e => e.to_string(),
            }),
            Ty::Service => service(v).map(|(host, port)| Val::Service(host, port)),
            Ty::Rails => {
                nw_decide::rails::Selector::parse(v).map(|_| Val::Text(v.to_owned())).map_err(|e| e.to_string())
            }
        }
    }

    pub(super) fn default(self) -> Option<Val> {
        match self {
            Ty::Flag => Some(Val::Bool(false)),
            Ty::Mode => Some(Val::Gate(Gate::Off)),
            Ty::Num(.., d) => d.map(Val::Num),
            Ty::OffOr(..) => Some(Val::Num(0)),
            Ty::Secs(.., d) => Some(Val::Num(d)),
            Ty::Path(_, d) => d.map(|p| Val::Path(PathBuf::from(p))),
            Ty::Maybe | Ty::Text(_) | Ty::Secret | Ty::SecretFile | Ty::Service | Ty::Rails => None,
        }
    }

    /// The default as `--help` and the messages say it.
    pub(super) fn default_text(self) -> Option<String> {
        Some(match (self, self.default()?) {
            (Ty::Secs(..), Val::Num(ms)) => secs(ms),
            (_, Val::Num(n)) => n.to_string(),
            (_, Val::Path(p)) => p.display().to_string(),
            _ => "false".into(),
        })
    }

    /// The range as `--help` says it.
    pub(super) fn range_text(self) -> Option<String> {
        match self {
            Ty::Num(_, lo, hi, _) => Some(format!("{lo} to {hi}")),
            Ty::OffOr(_, lo, hi) => Some(format!("0, or {lo} to {hi}")),
            Ty::Secs(lo, hi, _) => Some(format!("{} to {}", secs(lo), secs(hi))),
            _ => None,
        }
    }
}

/// Milliseconds as seconds, as a person writes them: `0.1`, `60`.
fn secs(ms: u64) -> String {
    (ms as f64 / 1000.0).to_string()
}

pub(super) fn boolish(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "y" | "yes" | "t" | "true" | "on" | "1" => Ok(true),
        "n" | "no" | "f" | "false" | "off" | "0" => Ok(false),
        _ => Err("not a boolean (true/false, yes/no, on/off, 1/0)".into()),
    }
}

fn number_in(v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match v.trim().parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("not a whole number from {lo} to {hi}")),
    }
}

/// `SERVICE[:PORT]`: a DNS name (a headless Service's), with the ring's port unless given.
fn service(spec: &str) -> Result<(String, u16), String> {
    let (host, port) = match spec.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(port) if port != 0 => (h, port),
            _ => return Err(format!("{p:?} is not a port number in 1..=65535")),
        },
        None => (spec, super::RING_PORT),
    };
    if !crate::ping::order::is_host_name(host) {
        return Err(format!("{host:?} is not a DNS name (a headless Service's, such as nccl-wrap-ring.nccl-wrap.svc)"));
    }
    Ok((host.to_owned(), port))
}

/// A field's type, from a value read by its entry's [`Ty`].
pub(super) trait FromVal: Sized {
    fn from_val(v: Val) -> Option<Self>;
}

impl<T: FromVal> FromVal for Option<T> {
    fn from_val(v: Val) -> Option<Self> {
        T::from_val(v).map(Some)
    }
}

macro_rules! from_val {
    ($($t:ty: $pat:pat => $e:expr),* $(,)?) => {
        $(impl FromVal for $t {
            fn from_val(v: Val) -> Option<Self> {
                match v {
                    $pat => $e,
                    _ => None,
                }
            }
        })*
    };
}

from_val! {
    bool: Val::Bool(b) => Some(b),
    Gate: Val::Gate(g) => Some(g),
    PathBuf: Val::Path(p) => Some(p),
    String: Val::Text(t) => Some(t),
    Secret: Val::Secret(s) => Some(s),
    (String, u16): Val::Service(h, p) => Some((h, p)),
    u8: Val::Num(n) => n.try_into().ok(),
    u16: Val::Num(n) => n.try_into().ok(),
    u32: Val::Num(n) => n.try_into().ok(),
    u64: Val::Num(n) => Some(n),
    usize: Val::Num(n) => n.try_into().ok(),
}

pub(super) struct Opt {
    pub long: &'static str,
    pub short: Option<char>,
    /// The variable read when the option is not given (empty: none).
    pub var: &'static str,
    pub scope: Scope,
    pub ty: Ty,
    /// Stores the value where its command reads it.
    pub set: fn(&mut Cli, Val) -> Result<(), String>,
    pub help: &'static str,
}

const fn o(
    long: &'static str,
    var: &'static str,
    scope: Scope,
    ty: Ty,
    set: fn(&mut Cli, Val) -> Result<(), String>,
    help: &'static str,
) -> Opt {
    Opt { long, short: None, var, scope, ty, set, help }
}

/// Stores the value in the field `field` finds (a command without it takes none); a value that
/// does not fit its field's type is the table's mistake, which its tests find.
/// `field` is a trait object so that the table's many setters share one instance of this per
/// field type, not one each.
fn put<T: FromVal>(c: &mut Cli, v: Val, field: &dyn Fn(&mut Cli) -> Option<&mut T>) -> Result<(), String> {
    let x = T::from_val(v.clone()).ok_or_else(|| misfit(&v))?;
    if let Some(f) = field(c) {
        *f = x;
    }
    Ok(())
}

/// `put`'s message, written once rather than in each of its (one per option) instances.
#[inline(never)]
fn misfit(v: &Val) -> String {
    format!("{v:?} does not fit its field")
}

/// A field of the run's options.
macro_rules! opts {
    ($f:ident) => {
        |c: &mut Cli, v: Val| put(c, v, &|c| Some(&mut c.opts.$f))
    };
}

/// A field of ping's options: outside `ping`, of the gate's pair test, which reads ping's
/// variables (where `ping`'s options are not found on the command line).
macro_rules! ping {
    ($f:ident) => {
        |c: &mut Cli, v: Val| {
            put(c, v, &|c| match &mut c.sub {
                Some(Sub::Ping(p)) => Some(&mut p.$f),
                _ => Some(&mut c.opts.gate_ping.$f),
            })
        }
    };
}

/// A field of `watch`'s options.
macro_rules! watch {
    ($f:ident) => {
        |c: &mut Cli, v: Val| put(c, v, &|c| if let Some(Sub::Watch(w)) = &mut c.sub { Some(&mut w.$f) } else { None })
    };
}

/// A health file of `doctor` or `watch`.
macro_rules! files {
    ($f:ident) => {
        |c: &mut Cli, v: Val| {
            put(c, v, &|c| match &mut c.sub {
                Some(Sub::Doctor { files, .. } | Sub::Watch(WatchArgs { files, .. })) => Some(&mut files.$f),
                _ => None,
            })
        }
    };
}

/// `--json` of `env`, `doctor` and `status`.
fn json(c: &mut Cli, v: Val) -> Result<(), String> {
    put(c, v, &|c| match &mut c.sub {
        Some(Sub::Env { json } | Sub::Doctor { json, .. } | Sub::Status { json }) => Some(json),
        _ => None,
    })
}

fn no_selftest(c: &mut Cli, v: Val) -> Result<(), String> {
    put(c, v, &|c| if let Some(Sub::Doctor { no_selftest, .. }) = &mut c.sub { Some(no_selftest) } else { None })
}

const MS_DAY: u64 = 86_400_000;
const FEATURES: &str = "Also write Node Feature Discovery's local feature file (`name=value` labels under \
    nccl-wrap.feature.node.kubernetes.io/), atomically; for NFD's features.d directory";
const METRICS: &str = "Also write the Prometheus text format (nccl_wrap_* metrics), atomically; for node_exporter's \
    textfile directory (name it *.prom)";

/// Every option; `--help` lists a command's own first, then the rest in this order.
/// (name, variable, commands, type with its default and range, where it goes, help)
#[rustfmt::skip]
pub(super) const OPTS: &[Opt] = &[
    o("require-rdma", "NCCL_WRAP_REQUIRE_RDMA", PLAN, Ty::Flag, opts!(require_rdma),
        "Refuse to start the command (exit 125) when no usable RDMA port is found"),
    o("require-memlock", "NCCL_WRAP_REQUIRE_MEMLOCK", RUN, Ty::Flag, opts!(require_memlock),
        "Refuse to start the command (exit 125) when memlock stays limited and CAP_IPC_LOCK is missing"),
    o("override", "NCCL_WRAP_OVERRIDE", PLAN, Ty::Flag, opts!(override_user),
        "Replace NCCL variables the user already set (by default they are kept and reported)"),
    o("rails", "NCCL_WRAP_RAILS", PLAN, Ty::Rails, opts!(rails),
        "Where the pod sees every RDMA port (hostNetwork): the rails NCCL gets, by device (mlx5_*, \
         mlx5_3:1), net device (netdev:rdma*) or PCI address (pci:1b:00.0), comma-separated, instead of \
         the rule's choice; matching none warns, or refuses under --require-rdma. See docs/rails.md"),
    Opt { short: Some('q'), ..o("quiet", "NCCL_WRAP_QUIET", RUN | ENV, Ty::Flag, opts!(quiet),
        "Print only warnings, not the summary") },
    o("selftest", "NCCL_WRAP_SELFTEST", PLAN, Ty::Flag, opts!(selftest),
        "Open each port through ibverbs and run a loopback RDMA WRITE and SEND on it before starting"),
    o("selftest-bytes", "NCCL_WRAP_SELFTEST_BYTES", PLAN, Ty::Num("BYTES", 4096, 1 << 30, Some(64 << 20)),
        opts!(selftest_bytes), "Buffer the self-test registers, in bytes"),
    o("selftest-timeout-ms", "NCCL_WRAP_SELFTEST_TIMEOUT_MS", PLAN, Ty::Num("MS", 1, 600_000, Some(2000)),
        opts!(selftest_timeout_ms), "Deadline for each port's self-test, in milliseconds"),
    o("skip-verbs", "NCCL_WRAP_SKIP_VERBS", PLAN | WATCH, Ty::Flag, opts!(skip_verbs),
        "Do not check ports through ibverbs (trust sysfs alone)"),
    o("sysfs-root", "NCCL_WRAP_SYSFS_ROOT", PLAN | WATCH | STATUS, Ty::Path("DIR", Some("/sys")), opts!(sysfs_root),
        "Root of the sysfs tree to read (for tests and chroots)"),
    o("proc-root", "NCCL_WRAP_PROC_ROOT", PLAN | WATCH, Ty::Path("DIR", Some("/proc")), opts!(proc_root),
        "Root of procfs (routes, kernel command line, NVIDIA driver version)"),
    o("supervise", "NCCL_WRAP_SUPERVISE", RUN, Ty::Maybe, opts!(init),
        "Run the command as a supervised child (forward signals, reap zombies, watch the RDMA ports and say \
         what changed on them if it fails), the default as PID 1; when not PID 1 nccl-wrap also becomes a \
         child subreaper. =false always execs. Also --init (NCCL_WRAP_INIT)"),
    o("kill-group", "NCCL_WRAP_KILL_GROUP", RUN, Ty::Flag, opts!(kill_group),
        "When supervising, start the command in its own process group and forward signals to the whole \
         group (for launchers that leave workers behind)"),
    o("grace", "NCCL_WRAP_GRACE", RUN, Ty::Num("SECONDS", 0, 86_400, Some(0)), opts!(grace),
        "When supervising, after the command exits: SIGTERM the processes it left (as PID 1 all others in \
         the namespace, else its process group), SIGKILL them SECONDS later. 0: exit at once"),
    o("report", "NCCL_WRAP_REPORT", RUN, Ty::Path("PATH", None), opts!(report),
        "When supervising, write the post-mortem (port transitions, counters that moved) as JSON to PATH \
         when the command ends"),
    o("watch-ms", "NCCL_WRAP_WATCH_MS", RUN, Ty::Num("MS", 0, 3_600_000, Some(1000)), opts!(watch_ms),
        "When supervising, how often to read the state of the ports in use, in milliseconds (0: only at \
         start and exit)"),
    o("stall-ms", "NCCL_WRAP_STALL_MS", RUN, Ty::OffOr("MS", 1000, MS_DAY), opts!(stall_ms),
        "When supervising, ask NCCL's RAS every quarter of MS (at least 1 s) and say which ranks are behind \
         when no collective was launched for MS milliseconds; 0: off (RAS is still asked at SIGTERM and \
         when the command fails)"),
    o("state-file", "NCCL_WRAP_STATE_FILE", RUN | STATUS, Ty::Path("FILE", Some(nw_postmortem::state::DEFAULT_PATH)),
        opts!(state_file),
        "Where the supervisor keeps the first reading of the ports (removed at exit) for `nccl-wrap \
         status`, which reads it from the same place; the default is used only as PID 1 (a container's init)"),
    o("dev-root", "NCCL_WRAP_DEV_ROOT", PLAN | WATCH, Ty::Path("DIR", Some("/dev")), opts!(dev_root),
        "Root of the device tree holding infiniband/uverbsN and termination-log"),
    o("image-root", "NCCL_WRAP_IMAGE_ROOT", PLAN, Ty::Path("DIR", Some("/")), opts!(image_root),
        "Root of the training image whose libibverbs, providers, NCCL and net plugin are checked, by its \
         loader's rules (for tests and chroots)"),
    o("annotations", "NCCL_WRAP_ANNOTATIONS", PLAN, Ty::Path("FILE", Some("/etc/podnetinfo/annotations")),
        opts!(annotations), "Downward-API annotations file holding k8s.v1.cni.cncf.io/network-status"),
    o("gate", "NCCL_WRAP_GATE", RUN | ENV, Ty::Mode, opts!(gate),
        "Before starting the command, test RDMA between this job's pods (each pod with its ring successor, \
         ping's test over every rail); start it only when every pair passes, else exit 125 on every pod. \
         =warn: report and start anyway. See docs/gate.md"),
    o("gate-coordinator", "NCCL_WRAP_GATE_COORDINATOR", PLAN, Ty::Text("HOST[:PORT]"), opts!(gate_coordinator),
        "Gate: rank 0's address (default: PET_MASTER_ADDR, else MASTER_ADDR); the port defaults to \
         --gate-port"),
    o("gate-rank", "NCCL_WRAP_GATE_RANK", RUN, Ty::Num("N", 0, MAX_GATE_SIZE as u64 - 1, None), opts!(gate_rank),
        "Gate: this pod's rank (default: PET_NODE_RANK, RANK, JOB_COMPLETION_INDEX, SLURM_NODEID, the \
         first set)"),
    o("gate-size", "NCCL_WRAP_GATE_SIZE", RUN, Ty::Num("N", 1, MAX_GATE_SIZE as u64, None), opts!(gate_size),
        "Gate: the number of pods (default: PET_NNODES, WORLD_SIZE or SLURM_NNODES, with the rank's source)"),
    o("gate-port", "NCCL_WRAP_GATE_PORT", RUN, Ty::Num("PORT", 1, 65_535, Some(super::GATE_PORT as u64)),
        opts!(gate_port),
        "Gate: the TCP port every pod listens on (rank 0's also takes the other pods' joins)"),
    o("gate-id", "NCCL_WRAP_GATE_ID", RUN, Ty::Text("ID"), opts!(gate_id),
        "Gate: the job identity every pod of one job shares; a pod with another is refused (default: the \
         coordinator's HOST:PORT and the size)"),
    o("gate-secret", "NCCL_WRAP_GATE_SECRET", RUN, Ty::Secret, opts!(gate_secret),
        "Gate: the job's secret, the same on every pod: every gate frame carries its HMAC-SHA256, and a pod \
         with another or none is refused. Prefer the variable or --gate-secret-file (a flag shows in the \
         process list). Default: none (the job is not authenticated, said once); set but empty: exit 125"),
    o("gate-secret-file", "NCCL_WRAP_GATE_SECRET_FILE", RUN, Ty::SecretFile, opts!(gate_secret_file),
        "Gate: read the job's secret from FILE (a mounted Secret; at most 4096 bytes, surrounding \
         whitespace ignored); unreadable or empty while --gate is on: exit 125"),
    o("gate-slow", "NCCL_WRAP_GATE_SLOW", RUN, Ty::Num("PERCENT", 0, 100, Some(70)), opts!(gate_slow_pct),
        "Gate: a pair that passes below this percent of the job's median bandwidth, or of its rated speed \
         (the slower end's port rate; hardware ports only), is named as slow with both figures; the \
         command still starts unless --gate-refuse-slow. 0: bandwidth not judged"),
    o("gate-refuse-slow", "NCCL_WRAP_GATE_REFUSE_SLOW", RUN, Ty::Flag, opts!(gate_refuse_slow),
        "Gate: a slow pair (see --gate-slow) fails the gate like a broken one: no pod starts, exit 125"),
    o("gate-prune", "NCCL_WRAP_GATE_PRUNE", RUN, Ty::Flag, opts!(gate_prune),
        "Gate: a rail whose pair fails on any pod is dropped on every pod (by its place in the list) and \
         the command starts on the rest, said on every pod; refused as without it when every rail or a \
         whole pod fails. Needs --gate"),
    o("gate-wait-ms", "NCCL_WRAP_GATE_WAIT_MS", RUN, Ty::Num("MS", 1, MS_DAY, Some(super::GATE_WAIT_MS)),
        opts!(gate_wait_ms),
        "Gate: how long to wait for late pods (image pulls), in milliseconds; after it the missing ranks \
         are named"),
    o("termination-log", "NCCL_WRAP_TERMINATION_LOG", RUN, Ty::Path("FILE", None), opts!(termination_log),
        "Where a refusal's cause is written for Kubernetes (kubectl describe pod); default \
         /dev/termination-log when it exists"),
    o("json", "", ENV, Ty::Flag, json, "Print the whole plan as JSON instead"),
    o("json", "", DOCTOR, Ty::Flag, json, "Print the checks as JSON"),
    o("json", "", STATUS, Ty::Flag, json, "Print the status as JSON (docs/schemas/status.schema.json)"),
    o("no-selftest", "", DOCTOR, Ty::Flag, no_selftest, "Do not run the loopback self-test through verbs"),
    // A person's flag, without a variable: a pod's NCCL_WRAP_QUIET (for its run) must not thin
    // the doctor someone runs in it with kubectl exec.
    Opt { short: Some('q'), ..o("quiet", "", DOCTOR, Ty::Flag, opts!(quiet),
        "Print only the checks that do not pass, failures first, and the tally") },
    o("features", "NCCL_WRAP_FEATURES", DOCTOR | WATCH, Ty::Path("FILE", None), files!(features), FEATURES),
    o("metrics", "NCCL_WRAP_METRICS", DOCTOR | WATCH, Ty::Path("FILE", None), files!(metrics), METRICS),
    o("interval", "NCCL_WRAP_WATCH_INTERVAL", WATCH, Ty::Secs(100, MS_DAY, 60_000), watch!(interval_ms),
        "Seconds between the starts of two rounds, a fraction allowed"),
    o("jitter", "NCCL_WRAP_WATCH_JITTER", WATCH, Ty::Num("PERCENT", 0, 50, Some(10)), watch!(jitter_pct),
        "Each wait is the interval +/- up to PERCENT, so that a DaemonSet's agents do not run in step"),
    o("rounds", "NCCL_WRAP_WATCH_ROUNDS", WATCH, Ty::Num("N", 0, 1_000_000_000, Some(0)), watch!(rounds),
        "Stop after N rounds (0: run until SIGTERM or SIGINT)"),
    o("ring", "NCCL_WRAP_WATCH_RING", WATCH, Ty::Service, watch!(ring),
        "Off unless given. Every --ring-every rounds, test this node's RDMA ports towards the next of the \
         agents the headless Service SERVICE resolves to (sorted addresses, wrapping), with ping's pair \
         test, and answer the previous one's test on PORT (default 18517) for the agent's life; needs the \
         uverbs devices, IPC_LOCK or a large memlock limit, and the host port (docs/health.md)"),
    o("ring-every", "NCCL_WRAP_WATCH_RING_EVERY", WATCH, Ty::Num("N", 1, 10_000, Some(super::RING_EVERY)),
        watch!(ring_every), "With --ring: a ring round every N rounds, the first round included"),
    o("ring-timeout-ms", "NCCL_WRAP_WATCH_RING_TIMEOUT_MS", WATCH, Ty::Num("MS", 100, 600_000, Some(2000)),
        watch!(ring_timeout_ms),
        "With --ring: each phase's deadline of the pair test, both ways (as ping's --timeout-ms; software \
         RoCE under emulation needs 20000)"),
    o("target", "NCCL_WRAP_PING_TARGET", PING, Ty::Text("HOST:PORT"), ping!(target),
        "The peer's listener (also the first word after `ping`)"),
    o("listen", "NCCL_WRAP_PING_LISTEN", PING, Ty::Text("[ADDR:]PORT"), ping!(listen),
        "Wait for a peer on [ADDR:]PORT (one peer, unless --keep)"),
    o("keep", "NCCL_WRAP_PING_KEEP", PING, Ty::Flag, ping!(keep),
        "With --listen: serve peer after peer until stopped"),
    o("allow", "NCCL_WRAP_PING_ALLOW", PING, Ty::Text("CIDR,..."), ping!(allow),
        "With --listen or --ring: answer only peers in these IPv4/IPv6 networks (e.g. the pod network \
         10.0.0.0/8,fd00::/8); others are closed unread. Default: anyone"),
    o("all-pairs", "NCCL_WRAP_PING_ALL_PAIRS", PING, Ty::Flag, ping!(all_pairs),
        "Test every local x remote port pair, not only rail i with rail i"),
    o("ring", "NCCL_WRAP_PING_RING", PING, Ty::Flag, ping!(ring),
        "Ring mode (Indexed Job, JobSet, StatefulSet): listen on --port and test the next index"),
    o("peer-template", "NCCL_WRAP_PING_PEER_TEMPLATE", PING, Ty::Text("TEMPLATE"), ping!(peer_template),
        "Ring mode: the peer's host name, {index} for its index (e.g. 'train-{index}.train')"),
    o("index", "NCCL_WRAP_PING_INDEX", PING, Ty::Num("N", 0, MAX_GATE_SIZE as u64 - 1, None), ping!(index),
        "Ring mode: this pod's index (default: JOB_COMPLETION_INDEX, else the hostname's -N)"),
    o("size", "NCCL_WRAP_PING_SIZE", PING, Ty::Num("N", 1, MAX_GATE_SIZE as u64, None), ping!(size),
        "Ring mode: the number of pods"),
    o("port", "NCCL_WRAP_PING_PORT", PING, Ty::Num("PORT", 1, 65_535, Some(18_515)), ping!(port),
        "Ring mode: the TCP port every pod listens on and connects to"),
    o("json", "NCCL_WRAP_PING_JSON", PING, Ty::Flag, ping!(json),
        "Print one JSON object per line: one per pair, then a summary"),
    o("bytes", "NCCL_WRAP_PING_BYTES", PING, Ty::Num("N", 1, 1 << 30, Some(1 << 20)), ping!(bytes),
        "Bandwidth message size in bytes (also the buffer each pair exposes to the peer)"),
    o("duration-ms", "NCCL_WRAP_PING_DURATION_MS", PING, Ty::Num("MS", 0, 600_000, Some(1000)), ping!(duration_ms),
        "Length of the bandwidth run, in milliseconds (0: no bandwidth run)"),
    o("iters", "NCCL_WRAP_PING_ITERS", PING, Ty::Num("N", 0, 1_000_000, Some(1000)), ping!(iters),
        "Latency round trips per pair"),
    o("timeout-ms", "NCCL_WRAP_PING_TIMEOUT_MS", PING, Ty::Num("MS", 1, 600_000, Some(3000)), ping!(timeout_ms),
        "Deadline of each phase of each pair (and of each message), in milliseconds"),
    o("wait-ms", "NCCL_WRAP_PING_WAIT_MS", PING, Ty::Num("MS", 0, MS_DAY, Some(60_000)), ping!(wait_ms),
        "How long to wait for the peer (to connect, or to come), in milliseconds"),
];

/// Former names that still work, for pod specs written with them: (long name, variable, the long
/// name of the entry they stand for). The entry's own name wins over an alias.
pub(super) const ALIASES: &[(&str, &str, &str)] = &[("init", "NCCL_WRAP_INIT", "supervise")];
