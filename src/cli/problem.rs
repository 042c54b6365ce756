//! What a value that could not be used costs: ignored alone, or a refusal (125) when it belongs to
//! an interlock asked for; the unread `NCCL_WRAP_*` names and mistyped options with their closest
//! name. No I/O; a switch set to something unreadable counts as asked for.

use std::ffi::OsStr;

use super::table::{boolish, ALIASES, OPTS, RUN};
use super::{Cli, CliError, ErrorKind, Gate, SubName, GATE_PING_KNOBS};

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The command line.
    Arg,
    /// An `NCCL_WRAP_*` variable.
    Var,
}

/// What was wrong with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Not in the accepted form, or out of range.
    BadValue,
    /// An option that takes a value, given none.
    MissingValue,
    /// A name nccl-wrap does not know.
    Unknown,
}

/// What the value is part of, which decides what its problem costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Belongs {
    /// An interlock's own switch (`--require-*`, `--gate`): set, even unreadably, it is asked for.
    Switch,
    /// A setting of the gate (`--gate-*`, and ping's knobs that the gate's pair test reads).
    Gate,
    /// Anything else: ignored alone.
    Other,
}

/// One option or variable that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub origin: Origin,
    pub fault: Fault,
    /// The name as given: `'--grace'`, `--grace`, `NCCL_WRAP_GRACE`.
    pub source: String,
    /// The value as given (lossy), bounded for printing.
    pub value: Option<String>,
    /// The accepted form, or why the value was refused.
    pub why: String,
    /// The option table's long name it stands for (for an unknown name: the closest, if near).
    pub long: Option<&'static str>,
    pub belongs: Belongs,
    /// For an unknown name: the closest known one.
    pub suggestion: Option<String>,
}

/// The longest part of a name or value repeated in a message: they are the user's, but a
/// message must stay one short line, without control characters (a terminal escape, a forged
/// line), which become `?`.
const SHOWN: usize = 64;

pub(super) fn shown(value: &str) -> String {
    let mut v: String = value.chars().take(SHOWN).map(|c| if c.is_control() { '?' } else { c }).collect();
    if value.chars().count() > SHOWN {
        v.push_str("...");
    }
    v
}

impl Problem {
    /// A problem of `long`'s entry, or of no entry (`long`: `None`, belonging to nothing).
    fn new(origin: Origin, fault: Fault, source: String, why: String, long: Option<&'static str>) -> Self {
        let belongs = long.map_or(Belongs::Other, |l| belongs(l, false));
        Problem { origin, fault, source, value: None, why, long, belongs, suggestion: None }
    }

    pub(super) fn bad(origin: Origin, source: &str, value: &str, why: &str, long: &'static str, knob: bool) -> Self {
        let why = why.chars().take(4 * SHOWN).map(|c| if c.is_control() { '?' } else { c }).collect();
        Problem {
            // A secret's value is never repeated, not even in part.
            value: Some(if long == "gate-secret" { "(not shown)".to_string() } else { shown(value) }),
            belongs: belongs(long, knob),
            ..Problem::new(origin, Fault::BadValue, source.into(), why, Some(long))
        }
    }

    pub(super) fn missing(source: &str, long: &'static str) -> Self {
        Problem::new(Origin::Arg, Fault::MissingValue, source.into(), "it needs a value".into(), Some(long))
    }

    /// An option name not in the table (`--requre-rdma`), with its closest known name.
    pub(super) fn unknown_option(name: &str) -> Self {
        let bare = name.trim_start_matches('-');
        // A subcommand's own option (`--iters` of `ping`) is known, only not here.
        let own = OPTS.iter().find(|o| o.long == bare && o.scope & RUN == 0);
        if let Some(sub) = own.and_then(|o| SubName::ALL.into_iter().find(|s| o.scope & s.bit() != 0)) {
            let why = format!("an option of `nccl-wrap {}`, not of a run", sub.name());
            return Problem::new(Origin::Arg, Fault::Unknown, shown(name), why, None);
        }
        let near = closest(bare, OPTS.iter().map(|o| o.long).chain(ALIASES.iter().map(|a| a.0)));
        let long = near.and_then(|n| super::find(&format!("--{n}"), None)).map(|i| OPTS[i].long);
        Problem {
            belongs: long.map_or_else(|| belongs_by_prefix(bare), |l| belongs(l, false)),
            suggestion: near.map(|n| format!("--{n}")),
            ..Problem::new(Origin::Arg, Fault::Unknown, shown(name), "not an option of nccl-wrap".into(), long)
        }
    }

    /// The line a person reads: what was wrong, and what happens instead.
    pub fn line(&self) -> String {
        let near = self.suggestion.as_ref().map(|s| format!(" (did you mean {s}?)")).unwrap_or_default();
        let default = self.long.and_then(|l| OPTS.iter().find(|o| o.long == l)).and_then(|o| o.ty.default_text());
        let instead = match (self.fault, default) {
            (Fault::Unknown, _) => "ignored".to_string(),
            (_, Some(d)) => format!("ignored, the default ({d}) applies"),
            (_, None) => "ignored, left unset".to_string(),
        };
        match (&self.value, self.fault) {
            (Some(v), _) => format!("{}={v:?} {instead}: {}{near}", self.source, self.why),
            (None, Fault::Unknown) => format!("{} is {}, {instead}{near}", self.source, self.why),
            (None, _) => format!("{} {instead}: {}{near}", self.source, self.why),
        }
    }

    /// The same problem as the usage error of a command line that runs no command (exit 2).
    pub(super) fn to_error(&self) -> ErrorKind {
        match self.fault {
            Fault::BadValue => ErrorKind::BadValue {
                source_name: self.source.clone(),
                value: self.value.clone().unwrap_or_default(),
                why: self.why.clone(),
            },
            Fault::MissingValue => ErrorKind::MissingValue(self.source.clone()),
            Fault::Unknown => ErrorKind::Unexpected(self.source.clone()),
        }
    }
}

/// For a command line that could not be parsed but names a command after `--` (run then without
/// nccl-wrap's settings): the interlock asked for anyway by an option or variable, if any. Only
/// an explicit "off" or `warn` is not asking.
pub fn interlock_asked<'a>(
    args: &'a [std::ffi::OsString],
    vars: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>,
) -> Option<String> {
    let off = |v: &str| boolish(v) == Ok(false) || v.eq_ignore_ascii_case("warn");
    let is_switch = |name: &str| name == "gate" || name.starts_with("require-");
    for arg in args.iter().skip(1).take_while(|a| *a != "--") {
        let text = arg.to_string_lossy();
        let Some(bare) = text.strip_prefix("--") else { continue };
        let (name, value) = bare.split_once('=').map_or((bare, None), |(n, v)| (n, Some(v)));
        if is_switch(name) && !value.is_some_and(off) {
            return Some(shown(&text));
        }
    }
    for (name, value) in vars {
        let (name, value) = (name.to_string_lossy(), value.to_string_lossy());
        let Some(bare) = name.strip_prefix("NCCL_WRAP_") else { continue };
        let long = bare.to_ascii_lowercase().replace('_', "-");
        if is_switch(&long) && !value.is_empty() && !off(&value) {
            return Some(format!("{}={:?}", shown(&name), shown(&value)));
        }
    }
    None
}

/// The closest known option or subcommand to a mistyped one in a usage error, if one is near.
pub fn suggest(e: &CliError) -> Option<String> {
    match &e.kind {
        ErrorKind::Unexpected(name) if name.starts_with('-') => {
            Problem::unknown_option(name.split_once('=').map_or(name.as_str(), |(n, _)| n)).suggestion
        }
        ErrorKind::NotASubcommand { near, .. } => Some((*near).to_owned()),
        _ => None,
    }
}

fn belongs(long: &str, knob: bool) -> Belongs {
    if long == "gate" || long.starts_with("require-") {
        Belongs::Switch
    } else if long.starts_with("gate-") || knob {
        Belongs::Gate
    } else {
        Belongs::Other
    }
}

/// An unknown name far from every known one still says what it meant by its prefix.
fn belongs_by_prefix(bare: &str) -> Belongs {
    let b = bare.to_ascii_lowercase().replace('_', "-");
    if b.starts_with("require") {
        Belongs::Switch
    } else if b.starts_with("gate") {
        Belongs::Gate
    } else {
        Belongs::Other
    }
}

/// Variables read outside the option table, which are therefore not typos: the log filter and
/// the test runner's emulator, so that a pod that sets them is never refused as mistaken.
pub const READ_ELSEWHERE: &[&str] = &["NCCL_WRAP_LOG", "NCCL_WRAP_TEST_RUNNER"];

/// The `NCCL_WRAP_*` variables among `names` that nothing reads, each with the closest known
/// name when one is near (`NCCL_WRAP_REQUIRE_RDAM` -> `NCCL_WRAP_REQUIRE_RDMA`).
pub fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a OsStr>) -> Vec<Problem> {
    let vars = || OPTS.iter().map(|o| o.var).filter(|v| !v.is_empty());
    let known = || vars().chain(ALIASES.iter().map(|a| a.1)).chain(READ_ELSEWHERE.iter().copied());
    let mut out: Vec<Problem> = Vec::new();
    for name in names {
        let name = name.to_string_lossy();
        if !name.starts_with("NCCL_WRAP_") || known().any(|k| k == name) {
            continue;
        }
        let near = closest(&name, known());
        let opt = near.and_then(|n| OPTS.iter().find(|o| o.var == n));
        let long = opt.map(|o| o.long);
        let knob = opt.is_some_and(|o| GATE_PING_KNOBS.contains(&o.long) && o.scope & RUN == 0);
        let bare = name.trim_start_matches("NCCL_WRAP_");
        out.push(Problem {
            belongs: long.map_or_else(|| belongs_by_prefix(bare), |l| belongs(l, knob)),
            suggestion: near.map(str::to_owned),
            ..Problem::new(Origin::Var, Fault::Unknown, shown(&name), "not a variable nccl-wrap reads".into(), long)
        });
    }
    out.sort_by(|a, b| a.source.cmp(&b.source));
    out
}

/// The closest of `known` to `name`, if near enough to be a typo of it: at most one edit in
/// three characters (a swap counts as one).
pub(super) fn closest<'k>(name: &str, known: impl Iterator<Item = &'k str>) -> Option<&'k str> {
    let limit = (name.len() / 3).max(1);
    known.map(|k| (distance(name, k), k)).filter(|(d, _)| *d <= limit).min_by_key(|(d, _)| *d).map(|(_, k)| k)
}

/// Edit distance with adjacent swaps (optimal string alignment), on bytes, case-insensitive.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<u8>, Vec<u8>) =
        (a.bytes().map(|c| c.to_ascii_lowercase()).collect(), b.bytes().map(|c| c.to_ascii_lowercase()).collect());
    if a.len().abs_diff(b.len()) > 8 || a.len() > 128 {
        return usize::MAX;
    }
    // The first row and column are the distance from an empty prefix: `i + j` where one is 0.
    let mut d: Vec<Vec<usize>> = (0..=a.len()).map(|i| (0..=b.len()).map(|j| i + j).collect()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// What the problems mean for a run of the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// One line per problem ignored alone (without the `nccl-wrap: warning:` prefix).
    pub ignored: Vec<String>,
    /// Why the command must not start (exit 125), naming the option or variable.
    pub refusal: Option<String>,
}

/// Sorts the problems: one of an interlock asked for refuses, every other one is ignored alone.
/// The gate is asked for when on to refuse, or its switch is unreadable (not `--gate=warn`).
pub fn verdict(cli: &Cli) -> Verdict {
    let gate_asked = cli.opts.gate == Gate::Refuse
        || cli.problems.iter().any(|p| p.long == Some("gate") && p.belongs == Belongs::Switch);
    let mut out = Verdict { ignored: Vec::new(), refusal: None };
    for p in &cli.problems {
        let refuses = p.belongs == Belongs::Switch || (p.belongs == Belongs::Gate && gate_asked);
        if refuses && out.refusal.is_none() {
            out.refusal = Some(refusal(p));
        } else if !refuses {
            out.ignored.push(p.line());
        }
    }
    out
}

fn refusal(p: &Problem) -> String {
    let what = match &p.value {
        Some(v) => format!("{}={v:?} is not usable ({})", p.source, p.why),
        None if p.fault == Fault::Unknown => format!("{} is {}", p.source, p.why),
        None => format!("{} is not usable ({})", p.source, p.why),
    };
    let near = p.suggestion.as_ref().map(|s| format!(" (did you mean {s}?)")).unwrap_or_default();
    let why = match (p.belongs, p.fault) {
        (Belongs::Switch, Fault::Unknown) => {
            "it looks like an interlock's name, and an interlock that cannot be read counts as asked for"
        }
        (Belongs::Switch, _) => {
            "it names an interlock, and an interlock set to a value that cannot be read counts as asked for"
        }
        _ => "the gate is asked for (--gate, NCCL_WRAP_GATE), and it would run without this setting",
    };
    format!("{what}{near}: {why}; fix it, or unset it to run without the interlock")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_name_and_strangers_do_not() {
        let names = [
            "NCCL_WRAP_REQUIRE_RDAM",
            "NCCL_WRAP_GATE_SIZ",
            "NCCL_WRAP_QUEIT",
            "NCCL_WRAP_NOTHING_LIKE_IT",
            "NCCL_WRAP_LOG",
            "PATH",
        ];
        let found = unknown_variables(names.iter().map(OsStr::new));
        let got: Vec<(&str, Option<&str>, Belongs)> =
            found.iter().map(|p| (p.source.as_str(), p.suggestion.as_deref(), p.belongs)).collect();
        assert_eq!(
            got,
            vec![
                ("NCCL_WRAP_GATE_SIZ", Some("NCCL_WRAP_GATE_SIZE"), Belongs::Gate),
                ("NCCL_WRAP_NOTHING_LIKE_IT", None, Belongs::Other),
                ("NCCL_WRAP_QUEIT", Some("NCCL_WRAP_QUIET"), Belongs::Other),
                ("NCCL_WRAP_REQUIRE_RDAM", Some("NCCL_WRAP_REQUIRE_RDMA"), Belongs::Switch),
            ]
        );
        let p = Problem::unknown_option("--requre-rdma");
        assert_eq!((p.suggestion.as_deref(), p.belongs), (Some("--require-rdma"), Belongs::Switch));
        assert_eq!(Problem::unknown_option("--verbose").belongs, Belongs::Other);
        assert_eq!(Problem::unknown_option("--require-gpu-of-my-dreams").belongs, Belongs::Switch);
    }

    #[test]
    fn distance_counts_a_swap_once() {
        assert_eq!(distance("RDMA", "RDAM"), 1);
        assert_eq!(distance("gate", "gate"), 0);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance(&"x".repeat(200), "x"), usize::MAX);
    }
}
