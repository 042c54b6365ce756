//! Command-line options. Every option also reads an `NCCL_WRAP_*` variable, because a pod spec
//! sets environment more easily than arguments. Parsing only: nothing here does I/O, and the
//! environment comes in as a lookup, so tests and fuzz targets hand in their own.
//!
//! Hand-written over one table of options ([`SPECS`]) rather than a parser library: every pod
//! pays this parse at start, and a general parser cost about a third of nccl-wrap's own
//! instructions there (bench/startup.sh). The table also renders `--help`, so an option cannot
//! exist without its variable and its help line.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

mod help;
#[macro_use]
mod setters;

mod options;
pub mod validate;

use help::help;
use options::{Kind, Spec, ALIASES, SPECS, TARGET};
use validate::Origin;
pub use validate::{verdict, Problem, Verdict};

/// Exit code of the wrapper's own refusals (`--require-*`), as `timeout` and `env` use 125 for
/// their own failures: never a code the training command's 0-124 or 126+ could be mistaken for.
pub const EXIT_REFUSED: u8 = 125;
/// Usage errors (bad options, no command).
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubName {
    Env,
    Doctor,
    Ping,
    Watch,
    Install,
    Status,
}

impl SubName {
    const ALL: [SubName; 6] =
        [SubName::Env, SubName::Doctor, SubName::Ping, SubName::Watch, SubName::Install, SubName::Status];

    fn name(self) -> &'static str {
        match self {
            SubName::Env => "env",
            SubName::Doctor => "doctor",
            SubName::Ping => "ping",
            SubName::Watch => "watch",
            SubName::Install => "install",
            SubName::Status => "status",
        }
    }

    fn about(self) -> &'static str {
        match self {
            SubName::Env => "Print what a run would set, as `export NAME='value'` lines safe to eval",
            SubName::Doctor => "Check this pod's RDMA setup and name what would make NCCL hang or fall back to sockets. Exit status: 0 nothing fails, 1 a check fails, 2 doctor itself could not run",
            SubName::Status => "For kubectl exec while the job runs: the ports nccl-wrap chose as they are now, the counters that moved since the command started, and NCCL's RAS view of the job (which ranks answer). Exit status: 0 nothing to see, 1 something needs a look, 2 no supervisor state",
            SubName::Install => "Copy this binary into DIR (atomically, mode 0755) and print its path: for an init container, since the image holds nothing else. Exit status: 0 installed, 1 it could not be, 2 usage",
            SubName::Watch => "The node agent: every --interval, check this node's RDMA health in the node's view (every device but VFs and SFs; sysfs only) and rewrite the --features (NFD) and --metrics (Prometheus) files atomically; stops cleanly on SIGTERM. Exit status: 0 stopped, 2 it could not start (signals, the first round's files)",
            SubName::Ping => "Test RDMA between this pod and another over the ports a run would use: a latency ping-pong and a bandwidth run per rail pair. Exit status: 0 every pair passes, 1 a pair fails, 2 the check could not run (usage, no RDMA port, the peer never came)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sub {
    /// Print what a run would set, as `export NAME='value'` lines safe to eval.
    Env {
        /// Print the whole plan as JSON instead.
        json: bool,
    },
    /// Check this pod's RDMA setup.
    Doctor {
        /// Print the checks as JSON.
        json: bool,
        /// Do not run the loopback self-test through verbs.
        no_selftest: bool,
        /// Also write the findings as NFD labels and Prometheus metrics.
        files: HealthFiles,
    },
    /// The node agent.
    Watch(WatchArgs),
    /// Test RDMA with another pod (or a ring of pods).
    Ping(PingArgs),
    /// Copy this binary into `dir`.
    Install { dir: PathBuf },
    /// The running job's ports, counters and RAS view.
    Status {
        /// Print it as JSON.
        json: bool,
    },
}

/// Where `doctor` and `watch` write node health: NFD's feature file and a Prometheus textfile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthFiles {
    pub features: Option<PathBuf>,
    pub metrics: Option<PathBuf>,
}

/// `nccl-wrap watch`'s own options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchArgs {
    pub files: HealthFiles,
    /// Between the starts of two rounds, before jitter.
    pub interval_ms: u64,
    /// Each wait is the interval +/- up to this many percent.
    pub jitter_pct: u32,
    /// Stop after this many rounds; 0: until SIGTERM.
    pub rounds: u64,
    /// `--ring SERVICE[:PORT]`: the headless Service's name and the ring's port.
    pub ring: Option<(String, u16)>,
    /// A ring round every this many rounds.
    pub ring_every: u64,
    /// Each phase's deadline of the ring's pair test.
    pub ring_timeout_ms: u64,
}

impl Default for WatchArgs {
    fn default() -> Self {
        WatchArgs {
            files: HealthFiles::default(),
            interval_ms: 60_000,
            jitter_pct: 10,
            rounds: 0,
            ring: None,
            ring_every: RING_EVERY,
            ring_timeout_ms: 2000,
        }
    }
}

/// `nccl-wrap ping`'s own options; exactly one of `target`, `listen` and `ring` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingArgs {
    /// The peer's listener, HOST:PORT.
    pub target: Option<String>,
    /// Wait for a peer on [ADDR:]PORT.
    pub listen: Option<String>,
    /// With --listen: serve peer after peer.
    pub keep: bool,
    /// Who the listener answers: `CIDR,...` (checked by ping before anything is opened).
    pub allow: Option<String>,
    /// Every local x remote port pair, not only rail i with rail i.
    pub all_pairs: bool,
    /// Ring mode: listen on `port` and test the next index.
    pub ring: bool,
    pub peer_template: Option<String>,
    pub index: Option<u32>,
    pub size: Option<u32>,
    pub port: u16,
    pub json: bool,
    /// Bandwidth message size in bytes (also the buffer each pair exposes to the peer).
    pub bytes: u32,
    pub duration_ms: u32,
    pub iters: u32,
    pub timeout_ms: u64,
    pub wait_ms: u64,
}

impl Default for PingArgs {
    fn default() -> Self {
        PingArgs {
            target: None,
            listen: None,
            keep: false,
            allow: None,
            all_pairs: false,
            ring: false,
            peer_template: None,
            index: None,
            size: None,
            port: 18515,
            json: false,
            bytes: 1 << 20,
            duration_ms: 1000,
            iters: 1000,
            timeout_ms: 3000,
            wait_ms: 60000,
        }
    }
}

impl Sub {
    fn new(name: SubName) -> Sub {
        match name {
            SubName::Env => Sub::Env { json: false },
            SubName::Doctor => Sub::Doctor { json: false, no_selftest: false, files: HealthFiles::default() },
            SubName::Ping => Sub::Ping(PingArgs::default()),
            SubName::Watch => Sub::Watch(WatchArgs::default()),
            SubName::Install => Sub::Install { dir: PathBuf::new() },
            SubName::Status => Sub::Status { json: false },
        }
    }
}

/// `--gate`: check the job's pods against each other before starting the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gate {
    #[default]
    Off,
    /// Start the command only when every pair passes (otherwise exit 125).
    Refuse,
    /// Report what fails and start the command anyway.
    Warn,
}

/// The gate's default TCP port (one above ping's ring port; never the launcher's MASTER_PORT).
pub const GATE_PORT: u16 = 18516;
/// The node agents' ring port: not ping's 18515 nor the gate's 18516, so that the three never meet.
pub const RING_PORT: u16 = 18517;
/// A ring round every this many of watch's rounds (10 minutes at the default 60 s interval).
pub const RING_EVERY: u64 = 10;
/// How long the gate waits for late pods by default: 10 minutes, for image pulls.
pub const GATE_WAIT_MS: u64 = 600_000;
/// `--gate-slow`'s default: a pair below 70 % of the job's median (or of its rated speed) is slow.
pub const GATE_SLOW_PCT: u8 = 70;

/// `ping`'s test knobs that the gate reads from `NCCL_WRAP_PING_*` (the gate's pairs run ping's
/// test); the others (target, listen, ring...) are ping's own.
pub const GATE_PING_KNOBS: &[&str] = &["all-pairs", "json", "bytes", "duration-ms", "iters", "timeout-ms"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opts {
    pub require_rdma: bool,
    pub require_memlock: bool,
    pub override_user: bool,
    pub quiet: bool,
    pub selftest: bool,
    pub selftest_bytes: usize,
    pub selftest_timeout_ms: u64,
    pub skip_verbs: bool,
    pub sysfs_root: PathBuf,
    pub proc_root: PathBuf,
    /// `--supervise` (or its former name `--init`); `None`: decide by whether nccl-wrap is PID 1.
    pub init: Option<bool>,
    pub kill_group: bool,
    pub grace: u64,
    /// Where to write the post-mortem as JSON (supervision only).
    pub report: Option<PathBuf>,
    /// How often supervision reads the ports' state, in milliseconds; 0: only at start and exit.
    pub watch_ms: u64,
    /// `--stall-ms`: when no collective was launched for this long, say which ranks are behind.
    pub stall_ms: u64,
    /// Where the supervisor keeps its first reading for `nccl-wrap status`.
    pub state_file: PathBuf,
    pub dev_root: PathBuf,
    /// The root of the training image whose loader rules the userspace check follows.
    pub image_root: PathBuf,
    pub annotations: PathBuf,
    pub gate: Gate,
    /// The gate's rank 0: HOST or HOST:PORT.
    pub gate_coordinator: Option<String>,
    pub gate_rank: Option<u32>,
    pub gate_size: Option<u32>,
    pub gate_port: u16,
    pub gate_id: Option<String>,
    /// The job's secret, as given (read and checked by the gate only when it runs).
    pub gate_secret: Option<String>,
    /// A file holding the job's secret (a mounted Secret).
    pub gate_secret_file: Option<PathBuf>,
    pub gate_wait_ms: u64,
    /// A pair below this percent of the job's median bandwidth, or of its rated speed, is named
    /// slow (0: not judged); with `gate_refuse_slow` it fails the gate.
    pub gate_slow_pct: u8,
    pub gate_refuse_slow: bool,
    /// Where a refusal's cause goes for Kubernetes (`None`: `/dev/termination-log` if present).
    pub termination_log: Option<PathBuf>,
    /// The gate's pair test, from ping's options' variables.
    pub gate_ping: PingArgs,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            require_rdma: false,
            require_memlock: false,
            override_user: false,
            quiet: false,
            selftest: false,
            selftest_bytes: 64 << 20,
            selftest_timeout_ms: 2000,
            skip_verbs: false,
            sysfs_root: PathBuf::from("/sys"),
            proc_root: PathBuf::from("/proc"),
            init: None,
            kill_group: false,
            grace: 0,
            report: None,
            watch_ms: 1000,
            stall_ms: 0,
            state_file: PathBuf::from(nw_postmortem::state::DEFAULT_PATH),
            dev_root: PathBuf::from("/dev"),
            image_root: PathBuf::from("/"),
            annotations: PathBuf::from("/etc/podnetinfo/annotations"),
            gate: Gate::Off,
            gate_coordinator: None,
            gate_rank: None,
            gate_size: None,
            gate_port: GATE_PORT,
            gate_id: None,
            gate_secret: None,
            gate_secret_file: None,
            gate_wait_ms: GATE_WAIT_MS,
            gate_slow_pct: GATE_SLOW_PCT,
            gate_refuse_slow: false,
            termination_log: None,
            gate_ping: PingArgs::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cli {
    pub sub: Option<Sub>,
    pub opts: Opts,
    /// The training command and its arguments (after `--`, or from the first word that is not
    /// an option or a subcommand).
    pub command: Vec<OsString>,
    /// Every option or variable that could not be used, in the order met; `validate::verdict`
    /// says what each costs.
    pub problems: Vec<Problem>,
}

/// What the parse ended in instead of a [`Cli`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    /// `--help`: the text to print on stdout, exit 0.
    #[error("{0}")]
    Help(String),
    /// `--version`: the line to print on stdout, exit 0.
    #[error("{0}")]
    Version(String),
    #[error("unexpected argument '{0}' found (to pass it to the command, put it after `--`)")]
    Unexpected(String),
    #[error("option '{0}' needs a value")]
    MissingValue(String),
    #[error("option '{0}' takes no value")]
    NoValueWanted(String),
    #[error("invalid value '{value}' for {source_name}: {why}")]
    BadValue { source_name: String, value: String, why: String },
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    /// Help and version are answers, not errors.
    pub fn is_answer(&self) -> bool {
        matches!(self, CliError::Help(_) | CliError::Version(_))
    }
}

impl Cli {
    /// Parses `args` (the program name first) with `env` looked up for every option not given.
    /// Options may come before or after the subcommand; a subcommand's own options only after it.
    pub fn parse(args: &[OsString], env: impl Fn(&str) -> Option<OsString>) -> Result<Cli, CliError> {
        let mut cli = Cli { sub: None, opts: Opts::default(), command: Vec::new(), problems: Vec::new() };
        let mut given = vec![false; SPECS.len()];
        let mut rest = args.iter().skip(1).peekable();
        while let Some(arg) = rest.next() {
            let bytes = arg.as_bytes();
            if bytes == b"--" {
                cli.command.extend(rest.by_ref().cloned());
                if let (Some(sub), Some(first)) = (&cli.sub, cli.command.first()) {
                    // A subcommand runs no command: dropping it silently would hide a mistake.
                    return Err(CliError::Usage(format!(
                        "{} takes no command, but {:?} follows `--`: drop `{}` to run the command",
                        sub_name(sub).name(),
                        first.to_string_lossy(),
                        sub_name(sub).name()
                    )));
                }
                break;
            }
            if bytes == b"-h" || bytes == b"--help" {
                return Err(CliError::Help(help(cli.sub.as_ref().map(sub_name))));
            }
            if bytes == b"-V" || bytes == b"--version" {
                return Err(CliError::Version(format!("nccl-wrap {}", env!("CARGO_PKG_VERSION"))));
            }
            if bytes.starts_with(b"-") && bytes.len() > 1 {
                let text = arg.to_string_lossy();
                let (name, inline) = match text.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (&*text, None),
                };
                let found = arg.to_str().and_then(|_| find(name, cli.sub.as_ref().map(sub_name)));
                let Some(index) = found else {
                    // Unknown: with a command after `--` (and no subcommand), named and
                    // skipped with the words up to `--`, which may be its value; otherwise where
                    // the command starts cannot be told, a usage error.
                    if cli.sub.is_some() || !rest.clone().any(|a| a == "--") {
                        return Err(CliError::Unexpected(text.into_owned()));
                    }
                    while rest.next_if(|a| *a != "--" && !a.as_bytes().starts_with(b"-")).is_some() {}
                    cli.problems.push(Problem::unknown_option(name));
                    continue;
                };
                let spec = &SPECS[index];
                // A bad value is ignored alone: the option counts as given, so its variable
                // does not stand in for what the command line said.
                given[index] = true;
                // (The value, whether it is valid UTF-8.)
                let (value, utf8) = match (spec.kind, inline) {
                    (Kind::Flag, v) => (v.unwrap_or("true").to_owned(), true),
                    (Kind::Value(_), Some(v)) => (v.to_owned(), true),
                    // `--` is never a value: `--grace -- cmd` is a missing value, not a command.
                    (Kind::Value(_), None) => match rest.next_if(|a| *a != "--") {
                        Some(v) => (v.to_string_lossy().into_owned(), v.to_str().is_some()),
                        None => {
                            cli.problems.push(Problem::missing(name, spec.long));
                            continue;
                        }
                    },
                };
                let source = format!("'--{}'", spec.long);
                let set = if utf8 { (spec.set)(&mut cli, &value) } else { Err("not valid UTF-8".to_string()) };
                if let Err(why) = set {
                    cli.problems.push(Problem::bad(Origin::Arg, &source, &value, &why, spec.long, false));
                }
                continue;
            }
            if cli.sub.is_none() && cli.command.is_empty() {
                if let Some(name) = SubName::ALL.into_iter().find(|s| OsStr::new(s.name()) == arg.as_os_str()) {
                    cli.sub = Some(Sub::new(name));
                    continue;
                }
                if arg == "help" {
                    return Err(CliError::Help(help(
                        rest.next().and_then(|a| SubName::ALL.into_iter().find(|s| a == s.name())),
                    )));
                }
            }
            if let Some(Sub::Ping(p)) = &mut cli.sub {
                if p.target.is_none() {
                    let text =
                        arg.to_str().ok_or_else(|| bad("HOST:PORT", &arg.to_string_lossy(), "not valid UTF-8"))?;
                    p.target = Some(text.to_owned());
                    given[TARGET] = true;
                    continue;
                }
            }
            if let Some(Sub::Install { dir }) = &mut cli.sub {
                if dir.as_os_str().is_empty() && !arg.is_empty() {
                    *dir = PathBuf::from(arg);
                    continue;
                }
            }
            if cli.sub.is_some() {
                return Err(CliError::Unexpected(arg.to_string_lossy().into_owned()));
            }
            // The first word that is neither an option nor a subcommand starts the command.
            cli.command.push(arg.clone());
            cli.command.extend(rest.by_ref().cloned());
            break;
        }
        // A command line that runs no command (a subcommand, or nothing after the options) is
        // a usage error at its first problem: nothing would be started anyway, and a person
        // typed it. With a command, each problem is ignored alone or refuses (`verdict`).
        if cli.sub.is_some() || cli.command.is_empty() {
            if let Some(p) = cli.problems.iter().find(|p| p.origin == Origin::Arg) {
                return Err(p.to_error());
            }
        }
        let sub = cli.sub.as_ref().map(sub_name);
        for (index, spec) in SPECS.iter().enumerate() {
            if given[index] || spec.env.is_empty() || (spec.only.is_some() && spec.only != sub) {
                continue;
            }
            let names = std::iter::once(spec.env)
                .chain(ALIASES.iter().filter(|(_, _, to)| *to == spec.long).map(|(_, var, _)| *var));
            let Some((var, value)) = names.filter_map(|n| env(n).filter(|v| !v.is_empty()).map(|v| (n, v))).next()
            else {
                continue;
            };
            from_var(&mut cli, spec, var, &value, false);
        }
        if sub.is_none() && cli.opts.gate != Gate::Off {
            // The gate's pairs run ping's test: its knobs come from ping's variables.
            for spec in SPECS.iter().filter(|s| s.only == Some(SubName::Ping) && GATE_PING_KNOBS.contains(&s.long)) {
                let Some(value) = env(spec.env).filter(|v| !v.is_empty()) else { continue };
                from_var(&mut cli, spec, spec.env, &value, true);
            }
        }
        if let Some(Sub::Install { dir }) = &cli.sub {
            if dir.as_os_str().is_empty() {
                return Err(CliError::Usage("install needs a directory: nccl-wrap install DIR".into()));
            }
        }
        if let Some(Sub::Ping(p)) = &cli.sub {
            let modes = [p.target.is_some(), p.listen.is_some(), p.ring].iter().filter(|m| **m).count();
            if modes != 1 {
                return Err(CliError::Usage(
                    "ping needs exactly one of HOST:PORT (connect), --listen [ADDR:]PORT, or --ring (see nccl-wrap ping --help)".into(),
                ));
            }
        }
        Ok(cli)
    }
}

/// Applies one variable's value, or records why it cannot be (`knob`: one of ping's, read for
/// the gate's pair test).
fn from_var(cli: &mut Cli, spec: &Spec, var: &str, value: &OsStr, knob: bool) {
    let set = match value.to_str() {
        Some(text) => (spec.set)(cli, text),
        None => Err("not valid UTF-8".to_string()),
    };
    if let Err(why) = set {
        cli.problems.push(Problem::bad(Origin::Var, var, &value.to_string_lossy(), &why, spec.long, knob));
    }
}

fn bad(source_name: &str, value: &str, why: &str) -> CliError {
    CliError::BadValue { source_name: source_name.into(), value: value.into(), why: why.into() }
}

fn sub_name(sub: &Sub) -> SubName {
    match sub {
        Sub::Env { .. } => SubName::Env,
        Sub::Doctor { .. } => SubName::Doctor,
        Sub::Ping(_) => SubName::Ping,
        Sub::Watch(_) => SubName::Watch,
        Sub::Install { .. } => SubName::Install,
        Sub::Status { .. } => SubName::Status,
    }
}

/// The option `name` (`--long` or `-s`) means here: a subcommand's own options first; a former
/// name (`ALIASES`) finds its entry.
fn find(name: &str, sub: Option<SubName>) -> Option<usize> {
    let long = name
        .strip_prefix("--")
        .map(|long| ALIASES.iter().find(|(old, _, _)| *old == long).map_or(long, |(_, _, to)| *to));
    let matches = |s: &Spec| match long {
        Some(long) => s.long == long,
        None => name.len() == 2 && s.short.is_some_and(|c| name.ends_with(c)),
    };
    SPECS
        .iter()
        .position(|s| s.only.is_some() && s.only == sub && matches(s))
        .or_else(|| SPECS.iter().position(|s| s.only.is_none() && matches(s)))
}

impl From<&Opts> for nw_pid1::supervise::Options {
    fn from(o: &Opts) -> Self {
        nw_pid1::supervise::Options {
            kill_group: o.kill_group,
            grace: std::time::Duration::from_secs(o.grace),
            // The ports come from the plan, which main adds.
            watch: nw_postmortem::portwatch::Config {
                root: o.sysfs_root.clone(),
                ports: Vec::new(),
                every: std::time::Duration::from_millis(o.watch_ms),
                report: o.report.clone(),
            },
            // The termination message's file is main's to pick, as for the gate.
            hang: nw_postmortem::hang::Config { stall_ms: o.stall_ms, termination_log: None },
            state_file: Some(o.state_file.clone()),
        }
    }
}

/// Finds the command after a literal `--`, for running it untouched when the options are bad.
pub fn command_after_dashes(raw: &[OsString]) -> Option<&[OsString]> {
    let pos = raw.iter().position(|a| a == "--")?;
    let cmd = &raw[pos + 1..];
    (!cmd.is_empty()).then_some(cmd)
}

#[cfg(test)]
mod tests;
