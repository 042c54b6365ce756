//! `-h` and `--help`, rendered from the option table so that no option goes undocumented: a
//! command's own options and words only, wrapped at 100 columns. `-h` gives one line per option;
//! `--help` adds each option's variable, range and default, and the notes.

use std::fmt::Write as _;

use super::table::{bit, Opt, Ty, OPTS, RUN};
use super::{usage, SubName};

const WIDTH: usize = 100;

pub(super) const ABOUT: &str = "Find this pod's RDMA ports, export NCCL settings, raise memlock, run the command";

const AFTER_HELP: &str = "\
Sources of devices, in order: PCIDEVICE_*_INFO / PCIDEVICE_* (SR-IOV device plugin), the
network-status annotation file, then sysfs (devices whose net device is in this namespace).

Exit status: the command's own; 128+N when it died of signal N; 126 when it cannot be executed;
127 when it is not found; 125 when a --require-* option or --gate refuses to start it; 2 on usage
errors.

A bad or out-of-range value (and an unknown option before -- or NCCL_WRAP_* name, with the closest
known one) is named and ignored alone; everything else applies. When it belongs to an interlock
asked for (--require-*, or --gate and its settings), nccl-wrap refuses instead (125), naming it.

As PID 1 (or with --supervise) the command runs as a child: signals are forwarded to it, zombies
are reaped, and the exit status is the command's as above. The RDMA ports in use are watched; when
the command fails, a post-mortem on stderr says what changed on them (docs/postmortem.md).

Boolean options take no value (true), or =VALUE: true/false, yes/no, on/off, 1/0. An option never
takes a following --option or -x as its value (it is then missing): give such a value inline,
as in --gate-id=--odd. The first word names a command unless it is a subcommand; a word a letter
off one (doctr) is refused as a typo: put a command of that name after --.
Logging detail: NCCL_WRAP_LOG=debug (env_logger syntax).";

const WATCH_AFTER_HELP: &str = "\
As a DaemonSet:  nccl-wrap watch \\
                   --features /etc/kubernetes/node-feature-discovery/features.d/nccl-wrap \\
                   --metrics /var/lib/node_exporter/textfile_collector/nccl-wrap.prom
SIGTERM or SIGINT ends it after the round in progress, with both files whole; SIGHUP runs a round
now. See docs/health.md for every label and metric, and deploy/node-health/ for the DaemonSet.";

const PING_AFTER_HELP: &str = "\
Two pods:   nccl-wrap ping --listen 18515        (pod A)
            nccl-wrap ping train-0.train:18515   (pod B)
A ring:     nccl-wrap ping --ring --peer-template 'train-{index}.train' --size 4
            (each pod listens on --port and tests the next index; its own index from --index,
            JOB_COMPLETION_INDEX, or the hostname's -N)
See docs/ping.md for the protocol and every cause.";

/// Help for the run (`None`) or one subcommand; `long`: `--help`'s, else `-h`'s.
pub(super) fn help(sub: Option<SubName>, long: bool) -> String {
    let short = |text: &str| if long { text.to_owned() } else { first(text) };
    let mut out = String::new();
    wrap(&mut out, &short(sub.map_or(ABOUT, SubName::about)), 0, 0);
    let _ = writeln!(out, "\nUsage: {}", usage(sub));
    if sub.is_none() {
        for s in SubName::ALL {
            let _ = writeln!(out, "       {}", usage(Some(s)));
        }
        out.push_str("\nCommands:\n");
        for s in SubName::ALL {
            let _ = write!(out, "  {:<8}", s.name());
            wrap(&mut out, &short(s.about()), 10, 10);
        }
    }
    let args: &[(&str, &str)] =
        sub.map_or(&[("[COMMAND]...", "The training command and its arguments (after `--`)")], SubName::args);
    if !args.is_empty() {
        out.push_str("\nArguments:\n");
        for (name, what) in args {
            item(&mut out, name, what, long);
        }
    }
    out.push_str("\nOptions:\n");
    // A subcommand's own options first, then those it shares with the run.
    let cmd = bit(sub);
    let own = OPTS.iter().filter(|o| o.scope & cmd != 0 && o.scope & RUN == 0);
    for opt in own.chain(OPTS.iter().filter(|o| o.scope & cmd != 0 && o.scope & RUN != 0)) {
        item(&mut out, &names(opt), &opt_help(opt, long), long);
    }
    let help = short("Print help (-h: a line per option; --help: with variables, ranges, defaults)");
    item(&mut out, "-h, --help", &help, long);
    item(&mut out, "-V, --version", "Print the version, the commit, the rdma-core linked and whether static", long);
    let after = after_help(sub);
    if long && !after.is_empty() {
        let _ = writeln!(out, "\n{after}");
    }
    out
}

/// The notes `--help` ends with (the man page: under its command, the run's under NOTES).
pub(super) fn after_help(sub: Option<SubName>) -> &'static str {
    match sub {
        None => AFTER_HELP,
        Some(SubName::Ping) => PING_AFTER_HELP,
        Some(SubName::Watch) => WATCH_AFTER_HELP,
        Some(_) => "",
    }
}

/// `--version`: one line per fact, each `name: value` after the first, for people and scripts
/// alike. The commit and the rdma-core release come from the build (`build.rs`); "static" is
/// whether the C library and rdma-core are linked into the binary (`+crt-static`).
pub(super) fn version() -> String {
    let static_ = if cfg!(target_feature = "crt-static") { "yes" } else { "no" };
    format!(
        "nccl-wrap {}\ncommit: {}\nrdma-core: {}\nstatic: {static_}",
        env!("CARGO_PKG_VERSION"),
        env!("NCCL_WRAP_COMMIT"),
        env!("NCCL_WRAP_RDMA_CORE"),
    )
}

/// `-q, --quiet[=BOOL]`, `    --grace <SECONDS>`.
pub(super) fn names(opt: &Opt) -> String {
    let short = opt.short.map_or("    ".to_string(), |c| format!("-{c}, "));
    match opt.ty {
        Ty::Flag | Ty::Maybe | Ty::Mode => format!("{short}--{}[={}]", opt.long, opt.ty.meta()),
        ty => format!("{short}--{} <{}>", opt.long, ty.meta()),
    }
}

/// Its help line; with `long`, its range, variable and default too.
pub(super) fn opt_help(opt: &Opt, long: bool) -> String {
    if !long {
        return first(opt.help);
    }
    let mut text = opt.help.to_owned();
    if let Some(range) = opt.ty.range_text() {
        let _ = write!(text, " ({range})");
    }
    if !opt.var.is_empty() {
        let _ = write!(text, " [env: {}]", opt.var);
    }
    if let Some(d) = opt.ty.default_text() {
        let _ = write!(text, " [default: {d}]");
    }
    text
}

/// One option or word: `--help`'s name line and its text below, or `-h`'s one line.
fn item(out: &mut String, name: &str, text: &str, long: bool) {
    if long {
        let _ = write!(out, "  {name}\n          ");
        return wrap(out, text, 10, 10);
    }
    const COLUMN: usize = 32;
    if name.len() + 4 > COLUMN {
        let _ = write!(out, "  {name}\n{:COLUMN$}", "");
    } else {
        let _ = write!(out, "  {name:<0$}", COLUMN - 2);
    }
    wrap(out, text, COLUMN, COLUMN);
}

/// A help text in brief: its first sentence (up to `. ` or `; `), without what it says in
/// parentheses.
pub(super) fn first(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            _ => out.push(c),
        }
        if depth == 0 && (out.ends_with(". ") || out.ends_with("; ")) {
            out.truncate(out.len() - 2);
            break;
        }
    }
    // A parenthesis leaves its space before it, and sometimes a space before a `:` or `,`.
    let out = out.replace("  ", " ").replace(" :", ":").replace(" ,", ",");
    out.trim_end().to_owned()
}

/// Appends `text` wrapped at [`WIDTH`], from column `col` of the current line; every further line
/// starts at column `indent`.
fn wrap(out: &mut String, text: &str, mut col: usize, indent: usize) {
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 && col + 1 + word.len() > WIDTH {
            let _ = write!(out, "\n{:indent$}", "");
            col = indent;
        } else if i > 0 {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += word.len();
    }
    out.push('\n');
}
