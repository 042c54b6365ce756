//! `--help` text, rendered from the option table so that no option goes undocumented.

use std::fmt::Write as _;

use super::options::{Kind, SPECS};
use super::SubName;

pub(super) const ABOUT: &str = "Find this pod's RDMA ports, export NCCL settings, raise memlock, run the command";

pub(super) const USAGE: &str = "\
Usage: nccl-wrap [OPTIONS] -- COMMAND [ARGS]...
       nccl-wrap env [--json] [OPTIONS]
       nccl-wrap doctor [--json] [--no-selftest] [--features FILE] [--metrics FILE] [OPTIONS]
       nccl-wrap ping [HOST:PORT | --listen [ADDR:]PORT | --ring] [--json] [OPTIONS]
       nccl-wrap watch [--features FILE] [--metrics FILE] [--interval SECONDS] [OPTIONS]
       nccl-wrap install DIR";

pub(super) const AFTER_HELP: &str = "\
Sources of devices, in order: PCIDEVICE_*_INFO / PCIDEVICE_* (SR-IOV device plugin), the
network-status annotation file, then sysfs (devices whose net device is in this namespace).

Exit status: the command's own; 128+N when it died of signal N; 126 when it cannot be executed;
127 when it is not found; 125 when a --require-* option or --gate refuses to start it; 2 on usage errors.

A bad or out-of-range value (and an unknown option before -- or NCCL_WRAP_* name, with the closest
known one) is named and ignored alone; everything else applies. When it belongs to an interlock
asked for (--require-*, or --gate and its settings), nccl-wrap refuses instead (125), naming it.

As PID 1 (or with --supervise) the command runs as a child: signals are forwarded to it, zombies
are reaped, and the exit status is the command's as above. The RDMA ports in use are watched; when
the command fails, a post-mortem on stderr says what changed on them (docs/postmortem.md).

Boolean options take no value (true), or =VALUE: true/false, yes/no, on/off, 1/0.
Logging detail: NCCL_WRAP_LOG=debug (env_logger syntax).";

const WATCH_AFTER_HELP: &str = "\
As a DaemonSet:  nccl-wrap watch --features /etc/kubernetes/node-feature-discovery/features.d/nccl-wrap \\
                   --metrics /var/lib/node_exporter/textfile_collector/nccl-wrap.prom
SIGTERM or SIGINT ends it after the round in progress, with both files whole; SIGHUP runs a round now.
See docs/health.md for every label and metric, and deploy/node-health/ for the DaemonSet.";

/// `--help`, for the top level or one subcommand.
const PING_AFTER_HELP: &str = "\
Two pods:   nccl-wrap ping --listen 18515        (pod A)
            nccl-wrap ping train-0.train:18515   (pod B)
A ring:     nccl-wrap ping --ring --peer-template 'train-{index}.train' --size 4
            (each pod listens on --port and tests the next index; its own index from --index,
            JOB_COMPLETION_INDEX, or the hostname's -N)
See docs/ping.md for the protocol and every cause.";

pub(super) fn help(sub: Option<SubName>) -> String {
    let mut out = String::new();
    match sub {
        None => {
            let _ = writeln!(out, "{ABOUT}\n\n{USAGE}\n\nCommands:");
            for s in SubName::ALL {
                let _ = writeln!(out, "  {:<8}{}", s.name(), s.about());
            }
            let _ = writeln!(out, "\nArguments:\n  [COMMAND]...  The training command and its arguments (after `--`)");
        }
        Some(s) => {
            let _ = writeln!(out, "{}\n\nUsage: nccl-wrap {} [OPTIONS]", s.about(), s.name());
        }
    }
    let _ = writeln!(out, "\nOptions:");
    for spec in SPECS.iter().filter(|spec| spec.only.is_none() || spec.only == sub) {
        let short = spec.short.map_or("    ".to_string(), |c| format!("-{c}, "));
        let value = match spec.kind {
            Kind::Flag => "[=BOOL]".to_string(),
            Kind::Value(name) => format!(" <{name}>"),
        };
        let _ = write!(out, "  {short}--{}{value}\n          {}", spec.long, spec.help);
        if !spec.env.is_empty() {
            let _ = write!(out, " [env: {}]", spec.env);
        }
        if let Some(d) = spec.default {
            let _ = write!(out, " [default: {d}]");
        }
        out.push('\n');
    }
    out.push_str("  -h, --help\n          Print help\n  -V, --version\n          Print version\n");
    match sub {
        None => {
            let _ = writeln!(out, "\n{AFTER_HELP}");
        }
        Some(SubName::Ping) => {
            let _ = writeln!(out, "\n{PING_AFTER_HELP}");
        }
        Some(SubName::Watch) => {
            let _ = writeln!(out, "\n{WATCH_AFTER_HELP}");
        }
        Some(_) => {}
    }
    out
}
