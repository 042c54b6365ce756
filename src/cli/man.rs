//! The man page, nccl-wrap(1), in roff from the option table and the help texts, for
//! `tools/docs.rs`: the binary never calls this. Never does I/O; no date in it.

use std::fmt::Write as _;

use super::help::{after_help, names, opt_help, ABOUT};
use super::table::{bit, Opt, OPTS, RUN};
use super::{usage, SubName};

const DESCRIPTION: &str = "A container entrypoint for GPU training over RDMA: it finds the pod's own RDMA \
    ports, exports NCCL's settings for them, raises RLIMIT_MEMLOCK, checks that the image's NCCL can use \
    RDMA, prints a short summary, and runs the command (execve, or supervised as PID 1). Every option is \
    also an NCCL_WRAP_* variable, read when the option is not given.";
const SEE_ALSO: &str = "docs/options.md (every option, variable and exit status), docs/doctor.md, \
    docs/ping.md, docs/gate.md, docs/postmortem.md and docs/health.md in nccl-wrap's source.";

/// Text as roff reads it: a backslash and a hyphen-minus escaped (so that `--quiet` is typed
/// as it shows), and a line that would start with a control character made plain.
fn roff(text: &str) -> String {
    let plain = |line: &str| if line.starts_with(['.', '\'']) { "\\&" } else { "" };
    let lines: Vec<String> =
        text.split('\n').map(|l| format!("{}{}", plain(l), l.replace('\\', "\\e").replace('-', "\\-"))).collect();
    lines.join("\n")
}

/// One option: its names in bold, its whole help (range, variable, default) below.
fn item(out: &mut String, name: &str, text: &str) {
    let _ = writeln!(out, ".TP\n.B {}\n{}", roff(name), roff(text));
}

/// Paragraphs as they are in the help (a blank line between two); lines indented in the
/// help (examples) kept as they are.
fn paragraphs(out: &mut String, text: &str) {
    for para in text.split("\n\n") {
        if para.lines().skip(1).any(|l| l.starts_with(' ')) || para.contains(" \\\n") {
            let _ = writeln!(out, ".PP\n.nf\n{}\n.fi", roff(para));
        } else {
            let _ = writeln!(out, ".PP\n{}", roff(para));
        }
    }
}

/// The page: name, synopsis, the run's options, each subcommand with its own options, the notes.
pub fn man_page() -> String {
    let mut out = String::new();
    let _ = writeln!(out, ".TH NCCL\\-WRAP 1 \"\" \"nccl\\-wrap {}\" \"User Commands\"", env!("CARGO_PKG_VERSION"));
    // No hyphenation: an option name broken across lines could not be searched for or copied.
    out.push_str(".nh\n.ad l\n");
    let mut about = ABOUT.to_owned();
    about[..1].make_ascii_lowercase();
    let _ = writeln!(out, ".SH NAME\nnccl\\-wrap \\- {}", roff(&about));
    out.push_str(".SH SYNOPSIS\n.nf\n");
    let _ = writeln!(out, "{}", roff(&usage(None)));
    for s in SubName::ALL {
        let _ = writeln!(out, "{}", roff(&usage(Some(s))));
    }
    out.push_str(".fi\n.SH DESCRIPTION\n");
    let _ = writeln!(out, "{}", roff(DESCRIPTION));
    out.push_str(".SH OPTIONS\n");
    for opt in OPTS.iter().filter(|o| o.scope & RUN != 0) {
        item(&mut out, &names(opt), &opt_help(opt, true));
    }
    item(&mut out, "-h, --help", "Print help (-h: a line per option; --help: with variables, ranges, defaults).");
    item(&mut out, "-V, --version", "Print the version, the commit, the rdma-core release linked and whether static.");
    out.push_str(".SH COMMANDS\n");
    for s in SubName::ALL {
        let _ = writeln!(out, ".SS {}\n{}", roff(&usage(Some(s))), roff(s.about()));
        for (name, what) in s.args() {
            item(&mut out, name, what);
        }
        let cmd = bit(Some(s));
        for opt in OPTS.iter().filter(|o| o.scope & cmd != 0 && o.scope & RUN == 0) {
            item(&mut out, &names(opt), &opt_help(opt, true));
        }
        let name = |o: &Opt| o.short.map_or_else(|| format!("--{}", o.long), |c| format!("--{} (-{c})", o.long));
        let shared: Vec<String> = OPTS.iter().filter(|o| o.scope & cmd != 0 && o.scope & RUN != 0).map(name).collect();
        if !shared.is_empty() {
            let _ = writeln!(out, ".PP\n{}", roff(&format!("Also the run's {}, as under OPTIONS.", shared.join(", "))));
        }
        if !after_help(Some(s)).is_empty() {
            paragraphs(&mut out, after_help(Some(s)));
        }
    }
    out.push_str(".SH NOTES\n");
    paragraphs(&mut out, after_help(None));
    out.push_str(".SH SEE ALSO\n");
    let _ = writeln!(out, "{}", roff(SEE_ALSO));
    out
}
