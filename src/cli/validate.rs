//! The high layer of the options: the parsed options made ready to act on (the unread
//! `NCCL_WRAP_*` names, the job's secret, the termination log, supervision's settings, the verdict).
//! It may read (the secret's file); it never writes, and never touches the process.

use std::path::PathBuf;
use std::time::Duration;

use crate::gate::seal::{Secret, MAX_SECRET};
use nw_decide::rails::Selector;
use nw_observe::detect::{file, Vars};
use nw_pid1::supervise;
use nw_postmortem::{hang, portwatch};

use super::problem::shown;
use super::{unknown_variables, verdict, Cli, Gate, Opts, Problem, Verdict};

/// The options ready to act on.
#[derive(Debug, Clone)]
pub struct Config {
    /// The run's options and the plan's inputs, each in its type and range, and the subcommand's.
    pub cli: Cli,
    /// Supervision's settings (the ports to watch are the plan's, which main adds).
    pub supervise: supervise::Options,
    /// The gate's, when a run asks for it.
    pub gate: Option<GateConfig>,
    /// `--rails`, parsed: the site's rails where the pod sees every RDMA port.
    pub rails: Option<Selector>,
}

/// What the gate takes beyond its settings in [`Opts`].
#[derive(Debug, Clone)]
pub struct GateConfig {
    /// `--gate=warn`: report, and start the command anyway.
    pub warn: bool,
    /// The job's secret, none, or why the one given cannot be used: never "none" then, so that a
    /// secret set wrong never runs the gate unauthenticated.
    pub secret: Result<Option<Secret>, String>,
    /// Where a refusal's cause goes for Kubernetes.
    pub termination_log: Option<PathBuf>,
}

/// The options made ready, and what their problems cost (`vars`: the whole environment, whose
/// `NCCL_WRAP_*` names are checked).
pub fn validate(mut cli: Cli, vars: &Vars) -> (Config, Verdict) {
    cli.problems.extend(unknown_variables(vars.keys().map(|k| k.as_os_str())));
    let mut verdict = verdict(&cli);
    let runs = cli.sub.is_none() && !cli.command.is_empty();
    let o = &cli.opts;
    let termination_log = runs.then(|| termination_log(o)).flatten();
    let gate = (runs && o.gate != Gate::Off).then(|| GateConfig {
        warn: o.gate == Gate::Warn,
        secret: secret(o, &cli.problems),
        termination_log: termination_log.clone(),
    });
    if let Some(GateConfig { warn: false, secret: Err(e), .. }) = &gate {
        verdict.refusal.get_or_insert_with(|| {
            format!(
                "secret: {e}; --gate (NCCL_WRAP_GATE) is set, and the gate never runs without the secret it was given"
            )
        });
    }
    // Pruning is the gate's: asked for without it, it is named, never silently off.
    if runs && o.gate_prune && o.gate == Gate::Off {
        verdict.refusal.get_or_insert_with(|| {
            "--gate-prune (NCCL_WRAP_GATE_PRUNE) is set and --gate (NCCL_WRAP_GATE) is not: pruning drops the rails the gate's pair tests fail, so it needs the gate; set --gate too, or unset --gate-prune".into()
        });
    }
    let supervise = supervise::Options {
        kill_group: o.kill_group,
        grace: Duration::from_secs(o.grace),
        watch: portwatch::Config {
            root: o.sysfs_root.clone(),
            ports: Vec::new(),
            every: Duration::from_millis(o.watch_ms),
            report: o.report.clone(),
        },
        hang: hang::Config { stall_ms: o.stall_ms, termination_log },
        state_file: Some(o.state_file.clone()),
    };
    // The table refused a malformed value already (a problem, ignored alone): what is left parses.
    let rails = cli.opts.rails.as_deref().and_then(|v| Selector::parse(v).ok());
    (Config { cli, supervise, gate, rails }, verdict)
}

/// As asked, or Kubernetes' /dev/termination-log, which exists in every container it starts
/// unless the pod says otherwise.
fn termination_log(o: &Opts) -> Option<PathBuf> {
    let default_log = o.dev_root.join("termination-log");
    o.termination_log.clone().or_else(|| default_log.exists().then_some(default_log))
}

/// The job's secret from `--gate-secret` or the file `--gate-secret-file` names (read with a
/// bound, never blocking), none, or why the one given cannot be had.
fn secret(o: &Opts, problems: &[Problem]) -> Result<Option<Secret>, String> {
    if let Some(p) = problems.iter().find(|p| matches!(p.long, Some("gate-secret" | "gate-secret-file"))) {
        return Err(format!("{}: {}", p.source, p.why));
    }
    match (&o.gate_secret, &o.gate_secret_file) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err("both NCCL_WRAP_GATE_SECRET and NCCL_WRAP_GATE_SECRET_FILE are set: set one".into()),
        (Some(s), None) => Ok(Some(s.clone())),
        (None, Some(path)) => {
            let named = |e: String| format!("NCCL_WRAP_GATE_SECRET_FILE={}: {e}", shown(&path.to_string_lossy()));
            let bytes = file::read(path, MAX_SECRET + 1).map_err(|e| named(format!("cannot read it: {e}")))?;
            Secret::new(&bytes).map(Some).map_err(|e| named(e.to_string()))
        }
    }
}
