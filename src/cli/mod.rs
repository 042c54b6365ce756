//! Command-line options, low layer: every option (each also an `NCCL_WRAP_*` variable) read into
//! its type by the one option table, every unusable value kept as a [`Problem`]. No I/O; hand-written
//! because a general parser cost a third of nccl-wrap's start (bench/startup.sh).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::gate::seal::Secret;

mod complete;
pub mod configs;
mod help;
mod man;
mod problem;
mod table;
mod validate;

/// Where `doctor` and `watch` write node health: NFD's feature file and a Prometheus textfile.
pub use crate::health::Outputs as HealthFiles;
pub use complete::{completions, SHELLS};
pub use man::man_page;
use problem::shown;
pub use problem::{interlock_asked, suggest, unknown_variables, verdict, Belongs, Fault, Origin, Problem, Verdict};
use table::{bit, Opt, ALIASES, OPTS, RUN};
pub use validate::{validate, Config, GateConfig};

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

    pub fn name(self) -> &'static str {
        ["env", "doctor", "ping", "watch", "install", "status"][self as usize]
    }

    /// Its bit in an option's commands (the run's is 1).
    const fn bit(self) -> u8 {
        2 << self as u8
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

    /// Its words that are not options: (name, what it is).
    fn args(self) -> &'static [(&'static str, &'static str)] {
        match self {
            SubName::Ping => &[("[HOST:PORT]", "The peer's listener (as --target)")],
            SubName::Install => &[("DIR", "Where to copy this binary: a volume the training container mounts")],
            _ => &[],
        }
    }
}

pub fn usage(sub: Option<SubName>) -> String {
    match sub {
        None => "nccl-wrap [OPTIONS] -- COMMAND [ARGS]...".into(),
        Some(SubName::Ping) => "nccl-wrap ping [OPTIONS] <HOST:PORT | --listen [ADDR:]PORT | --ring>".into(),
        Some(SubName::Install) => "nccl-wrap install DIR".into(),
        Some(s) => format!("nccl-wrap {} [OPTIONS]", s.name()),
    }
}

/// A subcommand and its own options (what each is: [`SubName::about`] and the option table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sub {
    Env { json: bool },
    Doctor { json: bool, no_selftest: bool, files: HealthFiles },
    Watch(WatchArgs),
    Ping(PingArgs),
    Install { dir: PathBuf },
    Status { json: bool },
}

impl Sub {
    /// Blank: its own options' defaults are the table's, written on by [`Cli::enter`].
    fn blank(name: SubName) -> Sub {
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

/// `nccl-wrap watch`'s own options (each field as its option's help says). `Default` is blank: the
/// defaults are the option table's, as for [`PingArgs`] and [`Opts`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchArgs {
    pub files: HealthFiles,
    pub interval_ms: u64,
    pub jitter_pct: u32,
    pub rounds: u64,
    /// `--ring SERVICE[:PORT]`: the headless Service's name and the ring's port.
    pub ring: Option<(String, u16)>,
    pub ring_every: u64,
    pub ring_timeout_ms: u64,
}

/// `nccl-wrap ping`'s own options; exactly one of `target`, `listen` and `ring` is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PingArgs {
    pub target: Option<String>,
    pub listen: Option<String>,
    pub keep: bool,
    /// Who the listener answers: `CIDR,...` (checked by ping before anything is opened).
    pub allow: Option<String>,
    pub all_pairs: bool,
    pub ring: bool,
    pub peer_template: Option<String>,
    pub index: Option<u32>,
    pub size: Option<u32>,
    pub port: u16,
    pub json: bool,
    pub bytes: u32,
    pub duration_ms: u32,
    pub iters: u32,
    pub timeout_ms: u64,
    pub wait_ms: u64,
}

/// `--gate`: off, on (start the command only when every pair passes, else 125), or `warn`
/// (report what fails and start the command anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gate {
    #[default]
    Off,
    Refuse,
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

/// `ping`'s test knobs that the gate reads from `NCCL_WRAP_PING_*` (the gate's pairs run ping's
/// test); the others (target, listen, ring...) are ping's own.
pub const GATE_PING_KNOBS: &[&str] = &["all-pairs", "json", "bytes", "duration-ms", "iters", "timeout-ms"];

/// The run's options, and the plan's inputs that `env`, `doctor` and `ping` share with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    pub report: Option<PathBuf>,
    pub watch_ms: u64,
    pub stall_ms: u64,
    pub state_file: PathBuf,
    pub dev_root: PathBuf,
    pub image_root: PathBuf,
    pub annotations: PathBuf,
    pub gate: Gate,
    pub gate_coordinator: Option<String>,
    /// `--rails` as given (its form checked by the table; validate keeps it parsed).
    pub rails: Option<String>,
    pub gate_rank: Option<u32>,
    pub gate_size: Option<u32>,
    pub gate_port: u16,
    pub gate_id: Option<String>,
    pub gate_secret: Option<Secret>,
    /// Read by [`validate`] when the gate runs.
    pub gate_secret_file: Option<PathBuf>,
    pub gate_wait_ms: u64,
    pub gate_slow_pct: u8,
    pub gate_refuse_slow: bool,
    /// Rails whose pairs fail are dropped on every pod instead of refusing; needs the gate.
    pub gate_prune: bool,
    pub termination_log: Option<PathBuf>,
    /// The gate's pair test, from ping's options' variables.
    pub gate_ping: PingArgs,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cli {
    pub sub: Option<Sub>,
    pub opts: Opts,
    /// The training command and its arguments (after `--`, or from the first word that is not
    /// an option or a subcommand).
    pub command: Vec<OsString>,
    /// Every option or variable that could not be used, in the order met; [`verdict`] says what
    /// each costs.
    pub problems: Vec<Problem>,
}

/// What the parse ended in instead of a [`Cli`], and the command it was read for (whose usage
/// a usage error shows).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct CliError {
    pub sub: Option<SubName>,
    pub kind: ErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// `-h` or `--help`: the text to print on stdout, exit 0.
    #[error("{0}")]
    Help(String),
    /// `--version`: the line to print on stdout, exit 0.
    #[error("{0}")]
    Version(String),
    #[error("unexpected argument '{0}' found (to pass it to the command, put it after `--`)")]
    Unexpected(String),
    #[error("'{option}' is not an option of `nccl-wrap {sub}` (see nccl-wrap {sub} --help)")]
    NotHere { option: String, sub: &'static str },
    /// A first word a letter or two from a subcommand's name: a typo, not a command to run.
    #[error("'{word}' is not a subcommand (to run a command of that name, put it after `--`)")]
    NotASubcommand { word: String, near: &'static str },
    #[error("option '{0}' needs a value")]
    MissingValue(String),
    #[error("invalid value '{value}' for {source_name}: {why}")]
    BadValue { source_name: String, value: String, why: String },
    #[error("{0}")]
    Usage(String),
}

/// A word a value-taking option never takes as its value (`--`, `--long`, `-x`; given inline
/// instead): an option given no value must not swallow an interlock (`--grace --require-rdma`).
fn is_option_word(word: &OsStr) -> bool {
    let b = word.as_bytes();
    b.starts_with(b"--") || (b.len() == 2 && b[0] == b'-' && b[1].is_ascii_alphabetic())
}

impl Cli {
    /// Blank options with the run's defaults, and ping's for the gate's pair test.
    fn new() -> Cli {
        let mut cli = Cli { sub: None, opts: Opts::default(), command: Vec::new(), problems: Vec::new() };
        cli.defaults(|scope| scope & (RUN | SubName::Ping.bit()) != 0);
        cli
    }

    fn enter(&mut self, name: SubName) {
        self.sub = Some(Sub::blank(name));
        self.defaults(|scope| scope & RUN == 0 && scope & name.bit() != 0);
    }

    fn defaults(&mut self, pick: impl Fn(u8) -> bool) {
        for opt in OPTS.iter().filter(|o| pick(o.scope)) {
            if let Some(v) = opt.ty.default() {
                let set = (opt.set)(self, v);
                debug_assert!(set.is_ok(), "--{}'s default: {set:?}", opt.long);
            }
        }
    }

    /// Parses `args` (the program name first) with `env` looked up for every option not given.
    /// Options may come before or after the subcommand; a subcommand's own options only after it.
    pub fn parse(args: &[OsString], env: impl Fn(&str) -> Option<OsString>) -> Result<Cli, CliError> {
        let mut cli = Cli::new();
        let mut sub: Option<SubName> = None;
        let fail = |sub, kind| Err(CliError { sub, kind });
        let mut given = vec![false; OPTS.len()];
        let mut rest = args.iter().skip(1).peekable();
        while let Some(arg) = rest.next() {
            let bytes = arg.as_bytes();
            if bytes == b"--" {
                cli.command.extend(rest.by_ref().cloned());
                if let (Some(s), Some(first)) = (sub, cli.command.first()) {
                    // A subcommand runs no command: dropping it silently would hide a mistake.
                    let (name, first) = (s.name(), shown(&first.to_string_lossy()));
                    let why = format!(
                        "{name} takes no command, but {first:?} follows `--`: drop `{name}` to run the command"
                    );
                    return fail(sub, ErrorKind::Usage(why));
                }
                break;
            }
            if bytes == b"-h" || bytes == b"--help" {
                return fail(sub, ErrorKind::Help(help::help(sub, bytes == b"--help")));
            }
            if bytes == b"-V" || bytes == b"--version" {
                return fail(sub, ErrorKind::Version(help::version()));
            }
            if bytes.starts_with(b"-") && bytes.len() > 1 {
                let text = arg.to_string_lossy();
                let (name, inline) = text.split_once('=').map_or((&*text, None), |(n, v)| (n, Some(v)));
                let Some(index) = arg.to_str().and_then(|_| find(name, Some(sub))) else {
                    if let Some(s) = sub.filter(|_| find(name, None).is_some()) {
                        return fail(sub, ErrorKind::NotHere { option: shown(name), sub: s.name() });
                    }
                    // Unknown: with a command after `--` (and no subcommand), named and
                    // skipped with the words up to `--`, which may be its value; otherwise where
                    // the command starts cannot be told, a usage error.
                    if sub.is_some() || !rest.clone().any(|a| a == "--") {
                        return fail(sub, ErrorKind::Unexpected(text.into_owned()));
                    }
                    while rest.next_if(|a| *a != "--" && !a.as_bytes().starts_with(b"-")).is_some() {}
                    cli.problems.push(Problem::unknown_option(name));
                    continue;
                };
                let opt = &OPTS[index];
                // A bad value is ignored alone: the option counts as given, so its variable
                // does not stand in for what the command line said.
                given[index] = true;
                // (The value, whether it is valid UTF-8.)
                let (value, utf8) = match (opt.ty.takes_value(), inline) {
                    (false, v) => (v.unwrap_or("true").to_owned(), true),
                    (true, Some(v)) => (v.to_owned(), true),
                    (true, None) => match rest.next_if(|a| !is_option_word(a)) {
                        Some(v) => (v.to_string_lossy().into_owned(), v.to_str().is_some()),
                        None => {
                            cli.problems.push(Problem::missing(name, opt.long));
                            continue;
                        }
                    },
                };
                if let Err(why) = cli.set(opt, &value, utf8) {
                    let source = format!("'--{}'", opt.long);
                    cli.problems.push(Problem::bad(Origin::Arg, &source, &value, &why, opt.long, false));
                }
                continue;
            }
            if cli.sub.is_none() && cli.command.is_empty() {
                if let Some(name) = SubName::ALL.into_iter().find(|s| OsStr::new(s.name()) == arg.as_os_str()) {
                    cli.enter(name);
                    sub = Some(name);
                    continue;
                }
                if arg == "help" {
                    let target = rest.next().and_then(|a| SubName::ALL.into_iter().find(|s| a == s.name()));
                    return fail(sub, ErrorKind::Help(help::help(target, true)));
                }
                if let Some(near) = near_subcommand(arg) {
                    return fail(sub, ErrorKind::NotASubcommand { word: shown(&arg.to_string_lossy()), near });
                }
            }
            match &mut cli.sub {
                Some(Sub::Ping(p)) if p.target.is_none() => {
                    let Some(text) = arg.to_str() else {
                        let value = arg.to_string_lossy().into_owned();
                        let why = "not valid UTF-8".into();
                        return fail(sub, ErrorKind::BadValue { source_name: "HOST:PORT".into(), value, why });
                    };
                    p.target = Some(text.to_owned());
                    // It counts as giving --target: the variable does not stand in for it.
                    if let Some(target) = find("--target", Some(Some(SubName::Ping))) {
                        given[target] = true;
                    }
                    continue;
                }
                Some(Sub::Install { dir }) if dir.as_os_str().is_empty() && !arg.is_empty() => {
                    *dir = PathBuf::from(arg);
                    continue;
                }
                Some(_) => return fail(sub, ErrorKind::Unexpected(arg.to_string_lossy().into_owned())),
                None => {}
            }
            // The first word that is neither an option nor a subcommand starts the command.
            cli.command.push(arg.clone());
            cli.command.extend(rest.by_ref().cloned());
            break;
        }
        // An option given before the subcommand must be one of the subcommand's.
        if let Some(s) = sub {
            if let Some(opt) = OPTS.iter().zip(&given).find(|(o, g)| **g && o.scope & s.bit() == 0).map(|(o, _)| o) {
                return fail(sub, ErrorKind::NotHere { option: format!("--{}", opt.long), sub: s.name() });
            }
        }
        // A command line that runs no command is a usage error at its first problem; with a
        // command, each problem is ignored alone or refuses (`verdict`).
        if sub.is_some() || cli.command.is_empty() {
            if let Some(kind) = cli.problems.iter().find(|p| p.origin == Origin::Arg).map(Problem::to_error) {
                return fail(sub, kind);
            }
        }
        for (opt, _) in OPTS.iter().zip(&given).filter(|(o, g)| !**g && !o.var.is_empty() && o.scope & bit(sub) != 0) {
            let names = std::iter::once(opt.var)
                .chain(ALIASES.iter().filter(|(_, _, to)| *to == opt.long).map(|(_, var, _)| *var));
            let set = |v: &OsString| !v.is_empty() || opt.ty.empty_is_set();
            if let Some((var, value)) = names.filter_map(|n| env(n).filter(set).map(|v| (n, v))).next() {
                cli.set_var(opt, var, &value, false);
            }
        }
        if sub.is_none() && cli.opts.gate != Gate::Off {
            // The gate's pairs run ping's test: its knobs come from ping's variables.
            for opt in OPTS.iter().filter(|o| o.scope == SubName::Ping.bit() && GATE_PING_KNOBS.contains(&o.long)) {
                let Some(value) = env(opt.var).filter(|v| !v.is_empty()) else { continue };
                cli.set_var(opt, opt.var, &value, true);
            }
        }
        match &cli.sub {
            Some(Sub::Install { dir }) if dir.as_os_str().is_empty() => {
                fail(sub, ErrorKind::Usage("install needs a directory: nccl-wrap install DIR".into()))
            }
            Some(Sub::Ping(p))
                if [p.target.is_some(), p.listen.is_some(), p.ring].iter().filter(|m| **m).count() != 1 =>
            {
                let why = "ping needs exactly one of HOST:PORT (connect), --listen [ADDR:]PORT, or --ring (see nccl-wrap ping --help)";
                fail(sub, ErrorKind::Usage(why.into()))
            }
            _ => Ok(cli),
        }
    }

    /// Reads `value` into `opt`'s type and stores it, or says why it cannot be.
    fn set(&mut self, opt: &Opt, value: &str, utf8: bool) -> Result<(), String> {
        if !utf8 {
            return Err("not valid UTF-8".into());
        }
        (opt.set)(self, opt.ty.read(value)?)
    }

    /// Applies one variable's value, or records why it cannot be (`knob`: one of ping's, read for
    /// the gate's pair test).
    fn set_var(&mut self, opt: &Opt, var: &str, value: &OsStr, knob: bool) {
        let text = value.to_string_lossy();
        if let Err(why) = self.set(opt, &text, value.to_str().is_some()) {
            self.problems.push(Problem::bad(Origin::Var, var, &text, &why, opt.long, knob));
        }
    }
}

/// The option `name` (`--long` or `-s`) means under `cmd` (`None`: under any command; no two
/// entries of one name share a command); a former name (`ALIASES`) finds its entry.
fn find(name: &str, cmd: Option<Option<SubName>>) -> Option<usize> {
    let long = name
        .strip_prefix("--")
        .map(|long| ALIASES.iter().find(|(old, _, _)| *old == long).map_or(long, |(_, _, to)| *to));
    let matches = |o: &Opt| match long {
        Some(long) => o.long == long,
        None => name.len() == 2 && o.short.is_some_and(|c| name.ends_with(c)),
    };
    OPTS.iter().position(|o| matches(o) && cmd.is_none_or(|c| o.scope & bit(c) != 0))
}

/// The subcommand a first word is a typo of, if it is one (never a path, which names a command).
fn near_subcommand(word: &OsStr) -> Option<&'static str> {
    let word = word.to_str().filter(|w| !w.contains('/'))?;
    problem::closest(word, SubName::ALL.into_iter().map(SubName::name))
}

/// Finds the command after a literal `--`, for running it untouched when the options are bad.
pub fn command_after_dashes(raw: &[OsString]) -> Option<&[OsString]> {
    let pos = raw.iter().position(|a| a == "--")?;
    Some(&raw[pos + 1..]).filter(|cmd| !cmd.is_empty())
}

#[cfg(test)]
mod tests;
